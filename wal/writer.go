package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

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
	// Conform converts a replayed batch of another schema to Schema. The
	// default accepts only batches whose fields equal Schema's.
	Conform func(arrow.RecordBatch) (arrow.RecordBatch, error)

	MaxEntryBytes    int64 // bytes per WAL entry before a group is split; default 16 MiB
	MaxMemtableRows  int64 // seal when reached; default 200,000
	MaxMemtableBytes int64 // seal when reached; default 128 MiB
	// GroupWindow is the least time between the starts of two entries
	// while appends keep arriving and the last entry carried several (the
	// loop never waits when it was idle).
	// Under load an entry then carries every append of the window instead
	// of those of one put: fewer, larger writes, each of which costs far
	// more than its bytes. Default 2 ms; negative: no window.
	GroupWindow time.Duration
	// SegmentBytes is the preallocated size of a segment file of the log
	// on a local filesystem; default 64 MiB.
	SegmentBytes int64
	// ObjectLog writes one object per entry even on a local filesystem
	// (the log of object stores), instead of segment files.
	ObjectLog bool
	// LogFS and LogDir place the segment log on another file system (a
	// crash-simulating one in tests): its directory is
	// LogDir/_lc_wal/{shard}/log on LogFS. Default: the store's directory
	// through the operating system when the store is objstore.Local, else
	// no segment log (entries are objects).
	LogFS  vfs.FS
	LogDir string
	Logger *slog.Logger
	// Metrics are the instruments to count in (shared by the writers of
	// a process); nil: unregistered ones.
	Metrics *Metrics
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
	if o.GroupWindow == 0 {
		o.GroupWindow = 2 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = defaultMetrics
	}
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
	mem     memtable
	err     error // sticky: ErrFenced, ErrClosed or ErrLogFailed
	// segDir is the shard's segment directory when the store is on a local
	// filesystem; seg is the segment log when this writer writes one (nil:
	// entries are objects). objectsUpTo is the last position held in an
	// object entry (entries of an earlier object-log writer replayed).
	segDir      string
	logFS       vfs.FS
	seg         *segmentLog
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
	stats    Stats
	// sweep is set when generation files may have been left behind: at
	// claim (an earlier owner may have crashed between draining and
	// deleting), after a failed delete and after a failed seal. The next
	// drop sweeps.
	sweep atomic.Bool
}

// Stats are counters of a writer's activity.
type Stats struct {
	Entries      atomic.Int64 // WAL entries written
	EntryRows    atomic.Int64 // rows in them
	Seals        atomic.Int64
	AdoptedRows  atomic.Int64 // rows found in the log written by another writer
	LastGroupLen atomic.Int64 // appends in the last group commit
}

type opKind int

const (
	opAppend opKind = iota
	opSeal
	opDrop
	opClose
)

type op struct {
	kind   opKind
	recs   []arrow.RecordBatch // opAppend: rows that must land in one entry
	msgs   [][]byte            // opAppend: recs encoded in format
	format *entryFormat        // opAppend
	upTo   uint64
	done   chan error
}

// Claim takes ownership of a shard: it writes a manifest version with a new
// epoch (fencing any previous writer), replays the WAL after the replay
// position, seals what it replayed, and starts the writer.
func Claim(ctx context.Context, opts Options) (*Writer, error) {
	opts.setDefaults()
	if err := opts.Store.Put(ctx, shardsDir+opts.Shard, nil); err != nil {
		return nil, fmt.Errorf("wal: register shard %s: %w", opts.Shard, err)
	}
	var nm *Manifest
	for attempt := 0; ; attempt++ {
		m, err := loadListedManifest(ctx, opts.Store, opts.Shard)
		if errors.Is(err, ErrNoShard) {
			m, err = &Manifest{NextGeneration: 1}, nil
		}
		if err != nil {
			return nil, err
		}
		nm = m.clone()
		nm.Version++
		nm.Epoch++
		nm.UpdatedAt = time.Now().UTC()
		err = commitManifest(ctx, opts.Store, opts.Shard, nm)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrFenced) || attempt >= 20 {
			return nil, fmt.Errorf("wal: claim shard %s: %w", opts.Shard, err)
		}
	}
	w := &Writer{
		opts: opts, epoch: nm.Epoch, man: nm, nextPos: nm.ReplayAfter + 1,
		ops: make(chan *op, 1024), stop: make(chan struct{}), done: make(chan struct{}),
		sealDone: make(chan sealResult, 1), hintKick: make(chan struct{}, 1),
	}
	if writeHint(ctx, opts.Store, opts.Shard, nm.Version) == nil {
		w.hinted.Store(nm.Version)
	}
	w.manifestsCollected = nm.Version
	w.sweep.Store(true)
	started := false
	defer func() {
		if !started {
			w.ungauge()
		}
	}()
	w.publish()
	w.segDir, w.logFS = logPlace(&opts)
	if err := w.replay(ctx); err != nil {
		w.mem.release()
		return nil, err
	}
	if _, err := w.seal(ctx, SealClaim); err != nil {
		w.mem.release()
		return nil, err
	}
	if w.segDir != "" {
		// Everything in older epochs' segments that anyone acknowledged is
		// now sealed: from here on only this epoch's segments are the log.
		if err := w.commitLogEpoch(ctx); err != nil {
			return nil, err
		}
		if !opts.ObjectLog {
			w.seg = newSegmentLog(w.logFS, w.segDir, opts.Shard, w.epoch, opts.SegmentBytes)
			if err := w.seg.start(); err != nil {
				return nil, err
			}
		}
	}
	opts.Logger.Info("wal: shard claimed", "shard", opts.Shard, "epoch", w.epoch, "manifest_version", w.man.Version, "next_position", w.nextPos)
	w.sweepLog(w.man.ReplayAfter, w.man.Version)
	started = true
	go w.loop()
	return w, nil
}

// hintInterval is the least time between two hint writes of a writer.
const hintInterval = 250 * time.Millisecond

// writeHints writes the hint of the latest committed manifest version in
// the background: a seal or a drop should not wait for a file (on local
// disk an inode and two flushes) that only speeds up readers' search.
// It runs for the life of the loop, which stops it before closing done.
func (w *Writer) writeHints(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	written := w.hinted.Load() // the claim wrote its own
	for {
		select {
		case <-w.hintKick:
		case <-stop:
			return
		}
		if v := w.Manifest().Version; v > written {
			if writeHint(ctx, w.opts.Store, w.opts.Shard, v) == nil {
				w.hinted.Store(v)
			}
			written = v
			// At most a few hints a second: each is a durable file write
			// that the writer's own flushes would queue behind.
			select {
			case <-time.After(hintInterval):
			case <-stop:
				return
			}
		}
	}
}

// localPather is a store on a local filesystem (objstore.Local).
type localPather interface {
	LocalPath(key string) (string, bool)
}

// logPlace returns where the shard's segment log lives: its directory
// ("" for none) and file system.
func logPlace(o *Options) (string, vfs.FS) {
	if o.LogFS != nil {
		return filepath.Join(o.LogDir, filepath.FromSlash(segmentDir(o.Shard))), o.LogFS
	}
	if lp, ok := o.Store.(localPather); ok {
		dir, _ := lp.LocalPath(segmentDir(o.Shard))
		return dir, vfs.Default
	}
	return "", nil
}

// replay reads entries after the replay position into the memtable,
// sealing whenever it fills: object entries first, then, on a local
// filesystem, the frames of the segments of epochs from the manifest's
// LogEpoch on.
func (w *Writer) replay(ctx context.Context) error {
	shard := w.opts.Shard
	var err error
	w.nextPos, err = replayObjects(ctx, w.opts.Store, shard, w.nextPos, func(pos uint64, b []byte) error {
		return w.adoptReplayed(ctx, b)
	})
	if err != nil {
		return w.replayFailed(err)
	}
	w.objectsUpTo = w.nextPos - 1
	if w.segDir == "" {
		return nil
	}
	segs, err := listSegments(w.logFS, w.segDir, w.man.LogEpoch)
	if err != nil {
		return err
	}
	_, err = replaySegments(w.logFS, shard, segs, w.nextPos, func(seg string, off int64, pos uint64, payload []byte) error {
		return placeCorruption(w.adoptReplayed(ctx, payload), seg, off)
	})
	if err != nil {
		return w.replayFailed(fmt.Errorf("wal: replay shard %s: %w", shard, err))
	}
	return nil
}

// replayFailed logs and counts a corrupt log (see CorruptionError) and
// returns err.
func (w *Writer) replayFailed(err error) error {
	var c *CorruptionError
	if errors.As(err, &c) {
		w.opts.Metrics.ReplayCorrupt.Inc()
		w.opts.Logger.Error("wal: log corrupt; the shard is refused until it is repaired", "shard", c.Shard,
			"segment", c.Segment, "offset", c.Offset, "position", c.Position, "next_valid", c.Next, "reason", c.Reason)
	}
	return err
}

func (w *Writer) adoptReplayed(ctx context.Context, b []byte) error {
	if err := w.adopt(b); err != nil {
		return err
	}
	if w.mem.full(&w.opts) {
		if _, err := w.seal(ctx, SealFull); err != nil {
			return err
		}
	}
	return nil
}

// commitLogEpoch records in the manifest that segments of epochs below
// this writer's are dead (see doc.go, "Segment log").
func (w *Writer) commitLogEpoch(ctx context.Context) error {
	if w.man.LogEpoch == w.epoch {
		return nil
	}
	nm := w.man.clone()
	nm.Version++
	nm.LogEpoch = w.epoch
	nm.UpdatedAt = time.Now().UTC()
	if err := commitManifest(ctx, w.opts.Store, w.opts.Shard, nm); err != nil {
		return fmt.Errorf("wal: claim shard %s: %w", w.opts.Shard, err)
	}
	w.man = nm
	w.publish()
	return nil
}

// adopt adds the entry at nextPos (already durable) to the memtable.
func (w *Writer) adopt(b []byte) error {
	e, err := checkEntry(w.opts.Shard, w.nextPos, b)
	if err != nil {
		return err
	}
	defer e.release()
	for _, rec := range e.batches {
		c, ok := widen(rec, w.opts.Schema)
		if !ok {
			c, err = w.opts.Conform(rec)
		}
		if err != nil {
			return fmt.Errorf("wal: shard %s position %d: %w", w.opts.Shard, w.nextPos, err)
		}
		w.mem.add(c)
		c.Release()
		w.stats.AdoptedRows.Add(c.NumRows())
	}
	w.nextPos++
	w.publishUnsealed()
	return nil
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

// Stats returns the writer's counters.
func (w *Writer) Stats() *Stats { return &w.stats }

// Append makes recs durable in the WAL, all in one entry (all or none). It
// returns nil only once the rows are in a durable entry and the writer has
// checked it still owns the shard. The rows become readable at the next
// seal.
func (w *Writer) Append(ctx context.Context, recs ...arrow.RecordBatch) error {
	if len(recs) == 0 {
		return nil
	}
	for _, rec := range recs {
		if !sameFields(rec.Schema(), w.opts.Schema) {
			return fmt.Errorf("wal: append: batch schema %s does not match the shard schema", rec.Schema())
		}
	}
	f, err := w.format(presentColumns(w.opts.Schema, recs))
	if err != nil {
		return err
	}
	msgs := make([][]byte, len(recs))
	for i, rec := range recs {
		// Encoded here, on the caller's goroutine: the loop is serial.
		m, err := f.encode(rec)
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	for _, rec := range recs {
		rec.Retain()
	}
	return w.do(ctx, &op{kind: opAppend, recs: recs, msgs: msgs, format: f})
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

// Seal writes the memtable as a new generation. It reports whether anything
// was sealed (false: the memtable was empty).
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

// Abandon stops the writer without sealing, as a crash would (tests).
func (w *Writer) Abandon() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *Writer) do(ctx context.Context, o *op) error {
	o.done = make(chan error, 1)
	select {
	case w.ops <- o:
	case <-w.done:
		o.release()
		return ErrClosed
	case <-ctx.Done():
		o.release()
		return ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-w.done:
		// The loop has stopped. The send above may have won the race with
		// its exit (the channel is buffered), and then nobody will answer;
		// or the loop answered o before it stopped (done is closed after
		// the last answer).
		select {
		case err := <-o.done:
			return err
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		// The operation may still complete; it is simply not acknowledged.
		return ctx.Err()
	}
}

func (w *Writer) loop() {
	defer close(w.done)
	defer w.ungauge()
	hintStop, hintStopped := make(chan struct{}), make(chan struct{})
	go w.writeHints(hintStop, hintStopped)
	defer func() {
		close(hintStop)
		<-hintStopped
	}()
	defer w.mem.release()
	if w.seg != nil {
		defer w.seg.close()
	}
	defer w.abandonSeal()
	ctx := context.Background()
	var queue []*op
	var lastEntry time.Time // when the last entry started
	lastOps := 0            // appends in the last entry
	for {
		idle := false
		if len(queue) == 0 {
			select {
			case o := <-w.ops:
				idle = true
				queue = append(queue, o)
			case res := <-w.sealDone:
				w.finishSeal(ctx, res)
				continue
			case <-w.stop:
				w.failAll(ErrClosed)
				return
			}
		}
		// A background seal that has finished is committed first, so that
		// its rows become readable as soon as possible.
		select {
		case res := <-w.sealDone:
			w.finishSeal(ctx, res)
		default:
		}
		// Under load (work was waiting when the last entry finished, and
		// that entry carried several appends), let the group window fill
		// before the next entry. An appender that combines its own appends
		// into one batch (rollout's small appends) has a window of its own.
		if !idle && lastOps > 1 && queue[0].kind == opAppend && w.opts.GroupWindow > 0 {
			if wait := w.opts.GroupWindow - time.Since(lastEntry); wait > 0 {
				time.Sleep(wait)
			}
		}
		// Take everything already waiting: this is the group commit.
	drain:
		for {
			select {
			case o := <-w.ops:
				queue = append(queue, o)
			default:
				break drain
			}
		}
		// Consecutive appends of one column set form one entry, up to
		// MaxEntryBytes.
		n, size := 0, int64(0)
		for n < len(queue) && queue[n].kind == opAppend && queue[n].format == queue[0].format {
			for _, r := range queue[n].recs {
				size += recordBytes(r)
			}
			n++
			if size >= w.opts.MaxEntryBytes {
				break
			}
		}
		if n > 0 {
			lastEntry, lastOps = time.Now(), n
			w.appendGroup(ctx, queue[:n])
			queue = queue[n:]
			continue
		}
		o := queue[0]
		queue = queue[1:]
		if w.err != nil {
			o.done <- w.err
			if o.kind == opClose {
				w.failQueued(queue, ErrClosed)
				return
			}
			continue
		}
		switch o.kind {
		case opSeal:
			// Answered once every row acknowledged so far is in a
			// committed generation.
			switch {
			case w.mem.rows > 0 && w.sealing != nil:
				// Sealed right after the one in flight, without holding
				// up appends until then (finishSeal starts it).
				w.sealNext = append(w.sealNext, o.done)
			case w.mem.rows > 0:
				w.startSeal(ctx, SealFlush, o.done)
			case w.sealing != nil:
				w.sealing.waiters = append(w.sealing.waiters, o.done)
			default:
				o.done <- nil
			}
		case opDrop:
			o.done <- w.drop(ctx, o.upTo)
		case opClose:
			_, err := w.seal(ctx, SealClose)
			if err == nil {
				err = ErrClosed
			}
			w.err = ErrClosed
			o.done <- err
			w.failQueued(queue, ErrClosed)
			w.failAll(ErrClosed)
			return
		}
	}
}

func (o *op) release() {
	for _, r := range o.recs {
		r.Release()
	}
}

func (w *Writer) failQueued(queue []*op, err error) {
	for _, o := range queue {
		o.release()
		o.done <- err
	}
}

// failAll answers every operation still in the channel.
func (w *Writer) failAll(err error) {
	for {
		select {
		case o := <-w.ops:
			w.failQueued([]*op{o}, err)
		default:
			return
		}
	}
}

func (w *Writer) appendGroup(ctx context.Context, group []*op) {
	var recs []arrow.RecordBatch
	var msgs [][]byte
	for _, o := range group {
		recs = append(recs, o.recs...)
		msgs = append(msgs, o.msgs...)
	}
	err := w.writeEntry(ctx, group[0].format, recs, msgs)
	for _, o := range group {
		o.release()
		o.done <- err
	}
	w.stats.LastGroupLen.Store(int64(len(group)))
	if err == nil && w.mem.full(&w.opts) {
		w.startSeal(ctx, SealFull)
	}
}

// writeEntry makes recs (encoded as msgs in format f) durable at the next
// free position and adds them to the memtable. A nil return is the
// acknowledgement.
func (w *Writer) writeEntry(ctx context.Context, f *entryFormat, recs []arrow.RecordBatch, msgs [][]byte) error {
	if w.err != nil {
		return w.err
	}
	if w.pending {
		if err := w.resolvePending(ctx); err != nil {
			return err
		}
	}
	size := len(f.header.msg) + len(endOfStream)
	for _, m := range msgs {
		size += len(m)
	}
	start := time.Now()
	if w.seg != nil {
		frame := f.header.assemble(msgs, w.nextPos, frameHeaderSize)
		if err := w.seg.append(w.nextPos, frame); err != nil {
			return w.halt(err)
		}
		w.opts.Metrics.SyncSeconds.Observe(since(start))
	} else {
		err := w.putEntry(ctx, f.header, msgs)
		w.opts.Metrics.PutSeconds.Observe(since(start))
		if err != nil {
			return err
		}
	}
	// The entry is durable. Count it in the memtable whatever happens next:
	// it is in the log and will be sealed by us or replayed by a successor.
	var rows int64
	for _, r := range recs {
		w.mem.add(r)
		rows += r.NumRows()
	}
	w.nextPos++
	w.publishUnsealed()
	w.stats.Entries.Add(1)
	w.stats.EntryRows.Add(rows)
	w.opts.Metrics.EntryBytes.Observe(float64(size))
	w.opts.Metrics.EntryRows.Observe(float64(rows))
	w.opts.Metrics.RowsTotal.Add(float64(rows))
	return w.checkFence(ctx)
}

// putEntry writes msgs as an object entry at nextPos, put-if-absent,
// adopting entries other writers left at the positions it finds taken.
func (w *Writer) putEntry(ctx context.Context, header *entryHeader, msgs [][]byte) error {
	for {
		pos := w.nextPos
		data := header.assemble(msgs, pos, 0)
		key := entryKey(w.opts.Shard, pos)
		err := retry(ctx, func() error { return w.opts.Store.PutIfAbsent(ctx, key, data) })
		if errors.Is(err, objstore.ErrExists) {
			got, gerr := w.opts.Store.Get(ctx, key)
			if gerr != nil {
				w.pending = true
				return fmt.Errorf("wal: read back position %d: %w", pos, gerr)
			}
			if !bytes.Equal(got, data) {
				// Another writer's entry: adopt it (it may have been
				// acknowledged), unless that writer is newer than us.
				if e, derr := decodeEntry(got); derr == nil {
					newer := e.epoch > w.epoch
					e.release()
					if newer {
						return w.fence(fmt.Errorf("%w: position %d holds an entry of epoch %d", ErrFenced, pos, e.epoch))
					}
				}
				if err := w.adopt(got); err != nil {
					return err
				}
				continue
			}
			err = nil // ours, with a lost acknowledgement
		}
		if err != nil {
			w.pending = true
			return fmt.Errorf("wal: write position %d (not acknowledged): %w", pos, err)
		}
		return nil
	}
}

// resolvePending settles an earlier ambiguous write at nextPos.
func (w *Writer) resolvePending(ctx context.Context) error {
	b, err := w.opts.Store.Get(ctx, entryKey(w.opts.Shard, w.nextPos))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		w.pending = false
		return nil
	case err != nil:
		return fmt.Errorf("wal: resolve position %d: %w", w.nextPos, err)
	}
	w.pending = false
	return w.adopt(b)
}

// checkFence verifies no manifest version newer than ours exists, which is
// what entitles this writer to acknowledge (see doc.go).
func (w *Writer) checkFence(ctx context.Context) error {
	next := w.man.Version + 1
	_, err := w.opts.Store.Head(ctx, manifestKey(w.opts.Shard, next))
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: fence check (not acknowledged): %w", err)
	}
	return w.fence(fmt.Errorf("%w: shard %s manifest version %d exists", ErrFenced, w.opts.Shard, next))
}

func (w *Writer) fence(err error) error {
	if w.err == nil {
		w.opts.Logger.Warn("wal: writer fenced", "shard", w.opts.Shard, "epoch", w.epoch, "err", err)
		w.opts.Metrics.FencedWriters.Inc()
		w.err = err
	}
	return w.err
}

// halt makes err (ErrLogFailed) sticky: the writer appends no more.
func (w *Writer) halt(err error) error {
	if w.err == nil {
		w.opts.Logger.Error("wal: writer stopped", "shard", w.opts.Shard, "epoch", w.epoch, "err", err)
		w.opts.Metrics.FailedWriters.Inc()
		w.err = err
	}
	return w.err
}

// sealJob is a memtable being written as a generation in the background.
type sealJob struct {
	cause   string    // why it was started (SealFull, ...)
	start   time.Time // when
	mem     memtable
	gen     uint64       // its generation number
	lastPos uint64       // the last WAL position whose rows it holds
	waiters []chan error // Seal calls answered when it commits
}

type sealResult struct {
	job *sealJob
	gen Generation
	err error
}

// startSeal moves the memtable into a background seal, after waiting for
// the one in flight (so at most two memtables are held: the bound on a
// writer's memory). The waiters are answered when it commits. The
// loop keeps appending meanwhile: sealing a full memtable (128 MiB) takes
// far longer than a group commit, and appends must not wait for it.
func (w *Writer) startSeal(ctx context.Context, cause string, waiters ...chan error) {
	for w.sealing != nil { // finishing one may start the next (sealNext)
		w.finishSeal(ctx, <-w.sealDone)
	}
	if w.err != nil || w.mem.rows == 0 {
		for _, d := range waiters {
			d <- w.err
		}
		return
	}
	job := &sealJob{cause: cause, start: time.Now(), mem: w.mem, gen: w.man.NextGeneration, lastPos: w.nextPos - 1, waiters: waiters}
	w.mem = memtable{}
	w.sealing = job
	w.publishUnsealed()
	store, shard, key := w.opts.Store, w.opts.Shard, w.opts.KeyColumn
	go func() {
		g, err := writeGeneration(ctx, store, shard, job.gen, key, job.mem.batches)
		w.sealDone <- sealResult{job: job, gen: g, err: err}
	}()
}

// finishSeal commits a finished background seal to the manifest and
// answers its waiters. On failure its rows go back in front of the
// memtable: they are acknowledged, and the next seal retries them.
func (w *Writer) finishSeal(ctx context.Context, res sealResult) {
	job := res.job
	w.sealing = nil
	err := res.err
	if err == nil {
		err = w.commitSeal(ctx, res.gen, job.lastPos)
	}
	if err == nil {
		w.opts.Metrics.Seals.WithLabelValues(job.cause).Inc()
		w.opts.Metrics.SealSeconds.Observe(since(job.start))
	}
	if err != nil {
		if w.err == nil {
			w.opts.Logger.Warn("wal: seal failed; its rows stay buffered", "shard", w.opts.Shard, "generation", job.gen, "err", err)
		}
		job.mem.batches = append(job.mem.batches, w.mem.batches...)
		job.mem.rows += w.mem.rows
		job.mem.bytes += w.mem.bytes
		w.mem = job.mem
	} else {
		job.mem.release()
	}
	w.publishUnsealed()
	for _, d := range job.waiters {
		d <- err
	}
	if next := w.sealNext; len(next) > 0 {
		w.sealNext = nil
		w.startSeal(ctx, SealFlush, next...)
	}
}

// abandonSeal waits for a seal in flight when the loop stops, and drops it
// uncommitted (its rows are in the WAL; a successor replays them).
func (w *Writer) abandonSeal() {
	for _, d := range w.sealNext {
		d <- ErrClosed
	}
	w.sealNext = nil
	if w.sealing == nil {
		return
	}
	res := <-w.sealDone
	w.sealing = nil
	res.job.mem.release()
	w.sweep.Store(true)
	for _, d := range res.job.waiters {
		d <- ErrClosed
	}
}

func (w *Writer) publishUnsealed() {
	n := w.mem.rows
	if w.sealing != nil {
		n += w.sealing.mem.rows
	}
	w.unsealed.Store(n)
	w.opts.Metrics.UnsealedRows.Add(float64(n - w.gaugedUnsealed))
	w.gaugedUnsealed = n
}

// ungauge takes this writer's share out of the gauges: it has stopped.
func (w *Writer) ungauge() {
	w.opts.Metrics.PendingGens.Sub(float64(w.gaugedGens))
	w.opts.Metrics.UnsealedRows.Sub(float64(w.gaugedUnsealed))
	w.gaugedGens, w.gaugedUnsealed = 0, 0
}

// seal writes the memtable as a generation and commits it to the manifest,
// waiting for it (and for any seal in flight first).
func (w *Writer) seal(ctx context.Context, cause string) (bool, error) {
	start := time.Now()
	for w.sealing != nil { // finishing one may start the next (sealNext)
		w.finishSeal(ctx, <-w.sealDone)
	}
	if w.err != nil {
		return false, w.err
	}
	if w.mem.rows == 0 {
		return false, nil
	}
	gen, err := writeGeneration(ctx, w.opts.Store, w.opts.Shard, w.man.NextGeneration, w.opts.KeyColumn, w.mem.batches)
	if err != nil {
		return false, err
	}
	if err := w.commitSeal(ctx, gen, w.nextPos-1); err != nil {
		return false, err
	}
	w.opts.Metrics.Seals.WithLabelValues(cause).Inc()
	w.opts.Metrics.SealSeconds.Observe(since(start))
	w.mem.release()
	w.mem = memtable{}
	w.publishUnsealed()
	return true, nil
}

// commitSeal adds a written generation holding the rows of WAL positions
// up to lastPos to the manifest, then collects those positions.
func (w *Writer) commitSeal(ctx context.Context, gen Generation, lastPos uint64) error {
	if w.err != nil {
		w.sweep.Store(true) // the file will never be committed
		return w.err
	}
	nm := w.man.clone()
	nm.Version++
	nm.NextGeneration++
	prevReplay := nm.ReplayAfter
	nm.ReplayAfter = lastPos
	nm.Generations = append(nm.Generations, gen)
	nm.UpdatedAt = time.Now().UTC()
	if err := commitManifest(ctx, w.opts.Store, w.opts.Shard, nm); err != nil {
		// The generation file stays: the manifest may have landed. If it
		// did not, the file is garbage; a later drop sweeps it.
		w.sweep.Store(true)
		if errors.Is(err, ErrFenced) {
			return w.fence(err)
		}
		return err
	}
	w.man = nm
	w.publish()
	w.stats.Seals.Add(1)
	to := nm.ReplayAfter
	if w.seg != nil {
		w.seg.collect(nm.ReplayAfter)
		to = min(to, w.objectsUpTo)
	}
	w.collect(prevReplay+1, to, nm.Version, nil, 0, nil)
	if n := len(nm.Generations); n >= pendingWarn && n%pendingWarn == 0 {
		w.opts.Logger.Warn("wal: many pending generations; merge this shard", "shard", w.opts.Shard, "pending", n)
	}
	return nil
}

const pendingWarn = 256

// keepManifests is how many manifest versions stay behind the latest.
const keepManifests = 16

// collect deletes, in the background, WAL entries [from, to], manifest
// versions older than keepManifests behind version, and the given
// generation files. When sweepUpTo > 0 it also sweeps the generation
// directory (see sweepGenerations), skipping the paths in listed. Failures
// only leave garbage; a failed generation delete schedules a sweep.
func (w *Writer) collect(from, to, version uint64, gens []string, sweepUpTo uint64, listed map[string]bool) {
	store, shard := w.opts.Store, w.opts.Shard
	w.inBackground(func(ctx context.Context) {
		for p := from; p <= to && p > 0; p++ {
			_ = objstore.Discard(ctx, store, entryKey(shard, p))
		}
		// Garbage only: a file a crash brings back is found again by the
		// sweeps, so no directory sync is paid for (see objstore.Discard).
		// Versions at or above the hint stay, so that readers probing up
		// from it never meet a gap.
		if upTo := min(version, w.hinted.Load()); upTo > keepManifests {
			for v := w.manifestsCollected + 1; v <= upTo-keepManifests; v++ {
				_ = objstore.Discard(ctx, store, manifestKey(shard, v))
			}
			w.manifestsCollected = max(w.manifestsCollected, upTo-keepManifests)
		}
		clean := true
		for _, g := range gens {
			if objstore.Discard(ctx, store, shardDir(shard)+g) != nil {
				clean = false
			}
		}
		if sweepUpTo > 0 && !sweepGenerations(ctx, store, shard, sweepUpTo, listed) {
			clean = false
		}
		if !clean {
			w.sweep.Store(true)
		}
	})
}

// sweepGenerations deletes the generation files of shard numbered <= upTo
// that listed does not hold: files a crash or a failed delete left behind
// after a merge drained them, and files of seals whose manifest commit
// failed. upTo is a merge watermark, so every committed generation <= upTo
// is in the base table and readers skip it; the others were never visible.
// It reports whether everything went well.
func sweepGenerations(ctx context.Context, store objstore.Store, shard string, upTo uint64, listed map[string]bool) bool {
	dir := shardDir(shard)
	objs, err := store.List(ctx, dir+"gen/")
	if err != nil {
		return false
	}
	ok := true
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, dir)
		num, _, _ := strings.Cut(path.Base(rel), "-")
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n > upTo || listed[rel] {
			continue
		}
		if objstore.Discard(ctx, store, o.Key) != nil {
			ok = false
		}
	}
	return ok
}

// sweepLog deletes, in the background, what a predecessor that crashed
// before its own collection left behind: WAL entries at or below
// replayAfter (sealed; safe to delete by the argument in doc.go), manifest
// versions more than keepManifests behind version,
// and the segment files of earlier epochs (dead once the claim committed
// LogEpoch).
func (w *Writer) sweepLog(replayAfter, version uint64) {
	store, shard, segDir, logFS, epoch, hinted := w.opts.Store, w.opts.Shard, w.segDir, w.logFS, w.epoch, w.hinted.Load()
	w.inBackground(func(ctx context.Context) {
		if objs, err := store.List(ctx, shardDir(shard)+"wal/"); err == nil {
			for _, o := range objs {
				num, _, _ := strings.Cut(path.Base(o.Key), ".")
				if p, err := strconv.ParseUint(num, 10, 64); err == nil && p <= replayAfter {
					_ = objstore.Discard(ctx, store, o.Key)
				}
			}
		}
		if objs, err := store.List(ctx, shardDir(shard)+"manifest/"); err == nil {
			for _, o := range objs {
				if v, ok := parseManifestKey(o.Key); ok && v+keepManifests < min(version, hinted) {
					_ = objstore.Discard(ctx, store, o.Key)
				}
			}
		}
		if segDir != "" {
			sweepSegments(logFS, segDir, epoch)
		}
	})
}

// inBackground runs fn off the loop, one collection at a time, with a
// bound on how long it may take; WaitCollect waits for it.
func (w *Writer) inBackground(fn func(ctx context.Context)) {
	w.gcWG.Add(1)
	go func() {
		defer w.gcWG.Done()
		w.gcMu.Lock()
		defer w.gcMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fn(ctx)
	}()
}

// WaitCollect waits for background garbage collection (tests).
func (w *Writer) WaitCollect() { w.gcWG.Wait() }

// drop removes generations <= upTo from the manifest, then their files.
// When files may have been left behind (after a claim, or a failed delete),
// it also sweeps generation files <= upTo the manifest does not list.
func (w *Writer) drop(ctx context.Context, upTo uint64) error {
	nm := w.man.clone()
	var keep []Generation
	var gone []string
	for _, g := range nm.Generations {
		if g.Generation <= upTo {
			gone = append(gone, g.Path)
		} else {
			keep = append(keep, g)
		}
	}
	sweep := w.sweep.Swap(false)
	if len(gone) == 0 {
		if sweep {
			w.collect(1, 0, 0, nil, upTo, listedPaths(w.man))
		}
		return nil
	}
	nm.Generations = keep
	nm.Version++
	nm.UpdatedAt = time.Now().UTC()
	if err := commitManifest(ctx, w.opts.Store, w.opts.Shard, nm); err != nil {
		if sweep {
			w.sweep.Store(true)
		}
		if errors.Is(err, ErrFenced) {
			return w.fence(err)
		}
		return err
	}
	w.man = nm
	w.publish()
	if sweep {
		w.collect(1, 0, nm.Version, gone, upTo, listedPaths(nm))
	} else {
		w.collect(1, 0, nm.Version, gone, 0, nil)
	}
	return nil
}

func listedPaths(m *Manifest) map[string]bool {
	out := make(map[string]bool, len(m.Generations))
	for _, g := range m.Generations {
		out[g.Path] = true
	}
	return out
}

// memtable holds acknowledged rows not yet sealed.
type memtable struct {
	batches []arrow.RecordBatch
	rows    int64
	bytes   int64
}

func (m *memtable) add(rec arrow.RecordBatch) {
	rec.Retain()
	m.batches = append(m.batches, rec)
	m.rows += rec.NumRows()
	m.bytes += recordBytes(rec)
}

func (m *memtable) full(o *Options) bool {
	return m.rows >= o.MaxMemtableRows || m.bytes >= o.MaxMemtableBytes
}

func (m *memtable) release() {
	for _, b := range m.batches {
		b.Release()
	}
	m.batches, m.rows, m.bytes = nil, 0, 0
}
