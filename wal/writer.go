package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/internal/clock"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// Options configures a shard writer.
type Options struct {
	Store objstore.Store // rooted at the dataset directory
	Shard string
	// Schema is the row schema. Appended batches must have exactly these
	// fields; entries written under an older schema are passed to Conform on
	// replay.
	Schema *arrow.Schema
	// KeyColumn names the utf8 key column; a seal keeps the newest row per key.
	KeyColumn string
	// SeqColumn, if set, names an int64 column of Schema that a seal fills
	// with each row's sequence number (seq.go); appended values are
	// replaced.
	SeqColumn string
	// Conform converts a replayed batch of another schema to Schema. The
	// default accepts only batches whose fields equal Schema's.
	Conform func(arrow.RecordBatch) (arrow.RecordBatch, error)

	MaxEntryBytes    int64 // bytes per WAL entry before a group is split; default 16 MiB
	MaxMemtableRows  int64 // seal when reached; default 200,000
	MaxMemtableBytes int64 // seal when reached; default 128 MiB
	// SegmentBytes is the preallocated size of a segment file of the log
	// on a local filesystem; default 64 MiB.
	SegmentBytes int64
	// ObjectLog writes one object per entry even on a local filesystem
	// (the log of object stores), instead of segment files.
	ObjectLog bool
	// BufferedLog writes segment files through the page cache even where
	// the file system takes direct IO (direct.go).
	BufferedLog bool
	// Log is where the segment log lives; the zero Log: nowhere, entries
	// are objects in Store.
	Log    Log
	Logger *slog.Logger
	// Metrics are the instruments to count in (shared by the writers of
	// a process); nil: unregistered ones.
	Metrics *Metrics
	// Owner, when set, names the process that claims: the claim's
	// manifest version records it and, unless Owner.Merge, the writer
	// renews a heartbeat beside the manifest every HeartbeatInterval
	// while it holds the shard (default DefaultHeartbeatInterval), which
	// says it is alive for HeartbeatTTL (default DefaultHeartbeatTTL).
	// Another process reads them with ReadHolder to tell a live owner
	// from a crashed one; they never decide whether a write is safe.
	Owner             *Owner
	HeartbeatInterval time.Duration
	HeartbeatTTL      time.Duration
	// Clock is the heartbeat's time; nil: the machine's.
	Clock clock.Clock
	// Holder, when set, is what the caller read of the shard's holder
	// just before claiming (ReadHolder): the claim's first attempt builds
	// on the manifest it read instead of reading it again. A manifest
	// committed since makes that attempt fail, and the claim reads again.
	Holder *Holder

	// placeMin and minInPlace replace the constants of the same names
	// when set (tests seal small memtables in place).
	placeMin   int
	minInPlace int64
}

func (o *Options) setDefaults() {
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = 16 << 20
	}
	if o.MaxMemtableRows <= 0 {
		o.MaxMemtableRows = 200_000
	}
	if o.MaxMemtableBytes <= 0 {
		o.MaxMemtableBytes = 128 << 20
	}
	if o.placeMin <= 0 {
		o.placeMin = placeMin
	}
	if o.minInPlace <= 0 {
		o.minInPlace = minInPlaceBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = defaultMetrics
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.HeartbeatTTL <= 0 {
		o.HeartbeatTTL = DefaultHeartbeatTTL
	}
	o.Clock = clock.Or(o.Clock)
	if o.Conform == nil {
		o.Conform = func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
			if !sameFields(rec.Schema(), o.Schema) {
				return nil, fmt.Errorf("wal: entry schema %s does not match %s", rec.Schema(), o.Schema)
			}
			rec.Retain()
			return rec, nil
		}
	}
}

func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.Fields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// Writer is the single writer of one shard. Its methods are safe for
// concurrent use; all work happens on one goroutine, which is what makes
// group commit and the position discipline simple.
type Writer struct {
	opts    Options
	epoch   uint64
	formats sync.Map // columnSet → *entryFormat: the column sets this writer's entries use
	ops     chan *op
	stop    chan struct{}
	done    chan struct{}
	gcMu    sync.Mutex     // one collection at a time
	gcWG    sync.WaitGroup // collections in flight

	// state owned by the loop goroutine
	man     *Manifest
	nextPos uint64
	pending bool // the put at nextPos failed ambiguously; resolve before reuse
	// reused: nextPos was found free after an ambiguous put; the entry put
	// there is acknowledged only after the fence check.
	reused bool
	mem    memtable
	// tailMu guards mem's batches and tailSealing against Tail, the one
	// reader off the loop (seq.go); the loop takes it only to change them.
	tailMu      sync.Mutex
	tailSealing *memtable // the memtable of the seal in flight, until it commits
	err         error     // sticky: ErrFenced, ErrClosed or ErrLogFailed
	// segDir is the shard's segment directory when the store is on a local
	// filesystem; seg is the segment log when this writer writes one (nil:
	// entries are objects). objectsUpTo is the last position held in an
	// object entry (entries of an earlier object-log writer replayed).
	segDir      string
	logFS       vfs.FS
	log         entryLog    // where entries go: seg, or objects
	seg         *segmentLog // the segment log, if entries go there
	objectsUpTo uint64
	// sealing is the seal running in the background, if any: its
	// generation file is being written off the loop, which then commits it
	// (finishSeal) when sealDone delivers the result.
	sealing  *sealJob
	sealDone chan sealResult
	sealNext []chan error // Seal calls waiting for the seal after the one in flight
	// hintKick wakes writeHints after a manifest commit (see publish).
	hintKick chan struct{}
	// hinted is the version of the last hint written; manifest versions
	// are deleted only below it (see latestVersion).
	hinted atomic.Uint64
	// manifestsCollected: versions up to it were deleted or left to the
	// claim's sweep (guarded by gcMu).
	manifestsCollected uint64

	// gaugedGens and gaugedUnsealed are what this writer added to the
	// PendingGens and UnsealedRows gauges (owned by the loop, and by Claim
	// before it starts); ungauge takes them back when the writer stops.
	gaugedGens, gaugedUnsealed int64

	// published for concurrent readers
	manifest atomic.Pointer[Manifest]
	unsealed atomic.Int64
	// unsealedBytes is the memory the memtables behind unsealed hold.
	unsealedBytes atomic.Int64
	// hb renews the shard's heartbeat (nil without an Owner); stopped is
	// set once the writer is fenced or failed, when it stops renewing.
	hb      *heartbeater
	stopped atomic.Bool
	// sweep is set when generation files may have been left behind: at
	// claim (an earlier owner may have crashed between draining and
	// deleting), after a failed delete and after a failed seal. The next
	// drop sweeps.
	sweep atomic.Bool
}

type opKind int

const (
	opAppend opKind = iota
	opSeal
	opDrop
	opClose
)

type op struct {
	kind    opKind
	recs    []arrow.RecordBatch // opAppend: rows that must land in one entry
	enc     *encoded            // opAppend: recs encoded in format
	format  *entryFormat        // opAppend
	appends int                 // opAppend: the callers whose rows recs are
	upTo    uint64
	done    chan error
}

func (w *Writer) publish() {
	w.manifest.Store(w.man.clone())
	n := int64(len(w.man.Generations))
	w.opts.Metrics.PendingGens.Add(float64(n - w.gaugedGens))
	w.gaugedGens = n
	select {
	case w.hintKick <- struct{}{}:
	default:
	}
}

// Manifest returns the latest manifest this writer committed.
func (w *Writer) Manifest() *Manifest { return w.manifest.Load() }

// ShardID returns the shard this writer owns.
func (w *Writer) ShardID() string { return w.opts.Shard }

// Epoch returns the writer's epoch.
func (w *Writer) Epoch() uint64 { return w.epoch }

// UnsealedRows returns the rows acknowledged but not yet sealed.
func (w *Writer) UnsealedRows() int64 { return w.unsealed.Load() }

// UnsealedBytes returns the bytes the memtable (and a seal in flight) hold.
func (w *Writer) UnsealedBytes() int64 { return w.unsealedBytes.Load() }

// Append makes recs durable in the WAL, all in one entry (all or none). It
// returns nil only once the rows are in a durable entry and the writer
// still owns the shard (see doc.go, "Fencing"). The rows become readable at
// the next seal.
func (w *Writer) Append(ctx context.Context, recs ...arrow.RecordBatch) error {
	return w.AppendGroup(ctx, 1, recs...)
}

// AppendGroup is Append for recs that hold the rows of appends callers,
// grouped by the caller (they count in the group commit metrics).
func (w *Writer) AppendGroup(ctx context.Context, appends int, recs ...arrow.RecordBatch) error {
	if len(recs) == 0 {
		return nil
	}
	var rows int64
	for _, rec := range recs {
		if !sameFields(rec.Schema(), w.opts.Schema) {
			return fmt.Errorf("wal: append: batch schema %s does not match the shard schema", rec.Schema())
		}
		rows += rec.NumRows()
	}
	if rows > MaxEntryRows {
		return fmt.Errorf("%w: %d rows in one append; at most %d", ErrTooManyRows, rows, MaxEntryRows)
	}
	f, err := w.format(presentColumns(w.opts.Schema, recs))
	if err != nil {
		return err
	}
	enc := &encoded{}
	for _, rec := range recs {
		// Encoded here, on the caller's goroutine: the loop is serial.
		if err := f.encode(enc, rec); err != nil {
			enc.release()
			return err
		}
	}
	for _, rec := range recs {
		rec.Retain()
	}
	return w.do(ctx, &op{kind: opAppend, recs: recs, enc: enc, format: f, appends: max(appends, 1)})
}

// format returns the writer's entry format for set, made on first use.
func (w *Writer) format(set columnSet) (*entryFormat, error) {
	if f, ok := w.formats.Load(set); ok {
		return f.(*entryFormat), nil
	}
	f, err := newEntryFormat(w.opts.Schema, set, w.opts.Shard, w.epoch)
	if err != nil {
		return nil, err
	}
	got, _ := w.formats.LoadOrStore(set, f)
	return got.(*entryFormat), nil
}

// Seal makes every row acknowledged before it readable: it returns once
// they are in a committed generation (at once when nothing is buffered).
// A seal already in flight is waited for; the memtable behind it is sealed
// next, and appends go on meanwhile.
func (w *Writer) Seal(ctx context.Context) error {
	return w.do(ctx, &op{kind: opSeal})
}

// DropGenerations removes generations <= upTo from the manifest (after a
// merge committed them into the base table) and deletes their files.
func (w *Writer) DropGenerations(ctx context.Context, upTo uint64) error {
	return w.do(ctx, &op{kind: opDrop, upTo: upTo})
}

// Close seals the memtable and stops the writer.
func (w *Writer) Close(ctx context.Context) error {
	err := w.do(ctx, &op{kind: opClose})
	<-w.done
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// Abandon stops the writer without sealing, as a crash would: what it
// acknowledged stays in the log for the next claim to replay. A store
// abandons a writer that was fenced or whose log failed; tests use it to
// crash one.
func (w *Writer) Abandon() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}
