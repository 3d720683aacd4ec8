package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/internal/clock"
	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout/row"
	"github.com/lance-context/lance-context/vfs"
	"github.com/lance-context/lance-context/wal"
)

var (
	// ErrNotFound is returned for a missing store, record or payload.
	ErrNotFound = errors.New("rollout: not found")
	// ErrExists is returned when creating a store that exists.
	ErrExists = errors.New("rollout: store already exists")
	// ErrOverloaded is returned when a read would touch more pending
	// generations than allowed; merge the store, then retry.
	ErrOverloaded = errors.New("rollout: too many pending WAL generations")
	// ErrClosed is returned after the store is closed.
	ErrClosed = errors.New("rollout: store closed")
	// ErrFenced is returned when another process claimed this process's
	// shard (a newer epoch): its writes are refused at storage. Callers
	// match the store's errors against this package alone.
	ErrFenced = wal.ErrFenced
	// ErrWriterClosed is returned for a shard writer that was closed or
	// dropped after a failure; the next call claims the shard again.
	ErrWriterClosed = wal.ErrClosed
	// ErrCorrupt is returned when the shard's WAL is damaged mid-log (a
	// *wal.CorruptionError says where); see Store.Damage.
	ErrCorrupt = wal.ErrCorrupt
	// ErrCompacting is returned while another compaction of the store runs
	// in this process.
	ErrCompacting = errors.New("rollout: a compaction of this store is already running")
)

// Config keys this package keeps in the base table's manifest config.
const (
	watermarkPrefix   = "lance-context.merged."
	lastCompactionKey = "lance-context.last-compaction"
)

func watermarkKey(shard string) string { return watermarkPrefix + shard }

// Watermark returns the highest generation of shard merged into base.
func Watermark(base *table.Dataset, shard string) uint64 {
	v, _ := strconv.ParseUint(base.Config()[watermarkKey(shard)], 10, 64)
	return v
}

// Options tunes a store. Zero values take the documented defaults.
type Options struct {
	MergeMaxGenerations int   // generations per merge pass; default DefaultMergeMaxGenerations; <0 means no cap
	MergeMaxBytes       int64 // generation bytes per merge pass; default an eighth of the memory budget, at most 1 GiB; <0 no cap
	PendingWarn         int   // warn above this many pending generations per shard; default 256
	PendingMax          int   // refuse wal/all reads above this (per shard or total); default 4096
	CompactTargetRows   int64 // rows per compacted fragment; default 1<<20
	MaxMemtableRows     int64 // seal when a memtable reaches this; default 200,000
	MaxMemtableBytes    int64 // or this many bytes; default 128 MiB
	Logger              *slog.Logger
	Cache               *GenCache // shared generation cache; default a private one of a sixteenth of the memory budget, at most 256 MiB
	// IndexColumns are the columns kept under BTree indexes (nil means
	// DefaultIndexColumns, empty means none); IndexCache owns the decoded
	// index pages and prewarms of the stores' lookups and builds (default
	// index.DefaultCache: the process's, sized by LC_INDEX_CACHE_BYTES
	// through internal/config); Indexes is the shared index lookup
	// (default IndexCache.NewFinder()); IndexMaxSegments caps
	// the delta segments merges add before they consolidate (default 16);
	// IndexTempDir holds an index build's spilled runs (default os.TempDir).
	IndexColumns     []string
	IndexCache       *index.Cache
	Indexes          *index.Finder
	IndexMaxSegments int
	IndexTempDir     string
	// Registerer, when set, registers the storage metrics (see
	// Catalog.RegisterMetrics).
	Registerer prometheus.Registerer
	// LogFS, when set, holds the stores' WAL segment logs, each under
	// /{store}.rollout.lance (a crash-simulating file system in tests);
	// default: beside the data on a local data directory, none elsewhere
	// (WALLog).
	LogFS vfs.FS
	// BufferedLog writes the segment logs through the page cache even
	// where direct IO is possible (wal.Options.BufferedLog).
	BufferedLog bool
	// ReadConsistencyInterval, when positive, lets a read reuse the
	// snapshot metadata (shard listing, shard manifests, base version)
	// validated less than this long ago instead of listing again, as
	// LanceDB's read_consistency_interval does; this process's own commits
	// end the reuse at once. Zero (the default): every read revalidates
	// (snapshot.go).
	ReadConsistencyInterval time.Duration
	// OwnerID identifies this process as the owner of its shards (default:
	// one random id per process) and InstanceID names its instance id in
	// errors. HeartbeatInterval and HeartbeatTTL are how often a shard
	// writer renews its heartbeat and how long another process with the
	// same instance id waits for it before taking the shard over (defaults
	// wal.DefaultHeartbeatInterval, wal.DefaultHeartbeatTTL; see
	// claimguard.go). Clock is their time (tests use a fake one).
	OwnerID           string
	InstanceID        string
	HeartbeatInterval time.Duration
	HeartbeatTTL      time.Duration
	Clock             clock.Clock

	metrics *metrics // made by setDefaults, shared by a catalog's stores
}

func (o *Options) setDefaults() {
	if o.MergeMaxGenerations == 0 {
		o.MergeMaxGenerations = DefaultMergeMaxGenerations
	}
	if o.MergeMaxBytes == 0 {
		o.MergeMaxBytes = gctune.Share(8, 1<<30) // a share of the process's memory budget
	}
	if o.PendingWarn <= 0 {
		o.PendingWarn = 256
	}
	if o.PendingMax <= 0 {
		o.PendingMax = 4096
	}
	if o.CompactTargetRows <= 0 {
		o.CompactTargetRows = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Cache == nil {
		o.Cache = NewGenCache(gctune.Share(16, 256<<20))
	}
	if o.IndexCache == nil {
		o.IndexCache = index.DefaultCache()
	}
	if o.Indexes == nil {
		o.Indexes = o.IndexCache.NewFinder()
	}
	if o.IndexMaxSegments <= 0 {
		o.IndexMaxSegments = 16
	}
	if o.OwnerID == "" {
		o.OwnerID = processOwner
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = wal.DefaultHeartbeatInterval
	}
	if o.HeartbeatTTL <= 0 {
		o.HeartbeatTTL = wal.DefaultHeartbeatTTL
	}
	o.Clock = clock.Or(o.Clock)
	if o.metrics == nil {
		o.metrics = newMetrics(o.Registerer, o.Cache)
	}
}

// Store is one rollout store: a Lance dataset (the base table) plus the WAL
// tier beside it. A process writes only to its own shard.
type Store struct {
	name  string
	root  objstore.Store // the dataset directory
	shard string
	opts  Options
	log   wal.Log // where its shards' WAL segment logs live (Catalog.storeLog)

	mergeMu sync.Mutex // one merge pass at a time per store and process

	// pendingMemo is the winning pending rows of the last set of cached
	// generations a read met (walRows): reads between two seals share it.
	pendingMemo atomic.Pointer[pendingSet]

	compactMu   sync.Mutex            // one compaction at a time per store and process
	cleanMu     sync.Mutex            // one cleanup at a time per store and process
	hmu         sync.Mutex            // guards holds
	holds       map[uint64]int        // version floors long operations read (lifecycle.go)
	pinLease    atomic.Pointer[Lease] // the lease of a checkout pin
	cmu         sync.Mutex            // guards compactions and compactErr
	compactions uint64
	compactErr  *string

	version atomic.Uint64    // the newest base version this process has seen
	evolved atomic.Bool      // the base table has every column of Schema
	pinned  atomic.Uint64    // a checkout's base version; 0 reads the latest
	meta    snapMeta         // what snapshots read last (snapshot.go)
	commits atomic.Uint64    // commits of this process to the store (noteCommit)
	now     func() time.Time // the clock of snapshot reuse; nil: time.Now (tests set it)
	// tailAhead, when set, replaces the feed's check that the tail
	// starts past the snapshot (tests force the rare gap with it).
	tailAhead func(first, replayed uint64) bool
	// feedRace, when set, runs in a feed read between its tail and its
	// snapshot, and may change the snapshot it gets (tests make the race
	// of a seal and a merge with the snapshot's reads with it).
	feedRace func(snap *snapshot)

	// mu serializes claims of the shard (walWriter) and closing; writer
	// is read without it, so that reads and statistics never wait behind a
	// claim's replay (which can take long: a big WAL on a slow store).
	mu     sync.Mutex
	writer atomic.Pointer[wal.Writer]
	closed bool
	health storeHealth

	// appends is the group commit: appends waiting to be written together
	// as one WAL entry (appendqueue.go).
	appends appendQueue

	// The feed (feed.go): feedCh is closed at the next acknowledged
	// append; feed indexes the base's rows by shard and seq.
	feedMu sync.Mutex
	feedCh chan struct{}
	feed   *feedIndex
}

func approxSize(recs []Record) int {
	n := 0
	for i := range recs {
		r := &recs[i]
		n += 256 + len(r.BinaryPayload) + len(r.InputTokens)*4 + len(r.OutputTokens)*4
		for _, p := range []*string{r.Content, r.ModelInputString, r.ModelOutputString, r.Rationale, r.ProblemText, r.UserMetadata, r.Metadata} {
			if p != nil {
				n += len(*p)
			}
		}
	}
	return n
}

// batchSize is the bytes of rec's buffers. All-null columns count nothing:
// they may be slices of a shared column far larger than the batch (see
// buildBatch), and entries carry no bytes for them.
func batchSize(rec arrow.RecordBatch) int {
	var n int
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += b.Len()
			}
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	for _, c := range rec.Columns() {
		if c.NullN() < c.Len() {
			walk(c.Data())
		}
	}
	return n
}

var lanceSchema = func() *schema.Schema {
	s, err := schema.FromArrow(Schema, 0)
	if err != nil {
		panic(err)
	}
	return s
}()

// createStore makes the base table of a new store.
func createStore(ctx context.Context, root objstore.Store) error {
	_, err := table.Create(ctx, root, lanceSchema, table.CreateOptions{})
	if errors.Is(err, objstore.ErrExists) {
		return ErrExists
	}
	return err
}

// smallIndexFileBytes: index files up to this size are read whole when
// first opened and then served from memory (objstore.SmallFiles).
const smallIndexFileBytes = 1 << 20

func isIndexFile(key string) bool { return strings.HasPrefix(key, index.IndicesDir) }

// openStore opens an existing store and evolves its schema to Schema.
func openStore(ctx context.Context, name string, root objstore.Store, log wal.Log, shard string, opts Options) (*Store, error) {
	opts.setDefaults()
	// Index files are immutable (a fresh directory per build) and opening
	// one is a chain of dependent reads: read the small ones whole, once.
	root = objstore.NewSmallFiles(root, isIndexFile, smallIndexFileBytes)
	d, err := table.Open(ctx, root)
	if errors.Is(err, table.ErrNoTable) {
		return nil, fmt.Errorf("%w: store %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	// An older table gains Schema's new columns at its next write
	// (evolve), never here: opening a store to read it must not commit.
	_, changed, err := d.Schema().Evolve(Schema)
	if err != nil {
		return nil, fmt.Errorf("rollout: store %q has an incompatible schema: %w", name, err)
	}
	st := &Store{name: name, root: root, log: log, shard: shard, opts: opts, feed: newFeedIndex()}
	st.appends.write = st.appendBatch
	st.evolved.Store(!changed)
	st.sawVersion(d.Version())
	return st, nil
}

// evolve adds the columns of Schema the base table lacks, in one commit,
// before this process's first write to the base (merge, compaction).
func (s *Store) evolve(ctx context.Context) error {
	if s.evolved.Load() {
		return nil
	}
	d, err := table.AddColumns(ctx, s.root, lanceSchema)
	if err != nil {
		return fmt.Errorf("rollout: evolve schema of %q: %w", s.name, err)
	}
	s.sawVersion(d.Version())
	s.noteCommit()
	s.evolved.Store(true)
	return nil
}

// sawVersion records a base version read or committed by this process.
func (s *Store) sawVersion(v uint64) {
	for {
		old := s.version.Load()
		if v <= old || s.version.CompareAndSwap(old, v) {
			return
		}
	}
}

// Version returns the newest base table version this process has seen (a
// read or a commit of its own; appends go to the WAL and do not advance it).
func (s *Store) Version() uint64 { return s.version.Load() }

// Checkout pins this process's reads of the store to base version v: lists,
// gets and blobs then read that version of the base table and not the WAL
// tier (time travel). Checking out the latest version unpins. Appends are
// unaffected. It returns the version reads now see.
func (s *Store) Checkout(ctx context.Context, v uint64) (uint64, error) {
	// Reads after it start from a fresh snapshot (snapshot.go).
	defer s.noteCommit()
	latest, err := table.Open(ctx, s.root)
	if err != nil {
		return 0, err
	}
	s.sawVersion(latest.Version())
	switch {
	case v == 0 || v > latest.Version():
		return 0, fmt.Errorf("%w: version %d of store %s (the latest is %d)", ErrNotFound, v, s.name, latest.Version())
	case v == latest.Version():
		s.pinned.Store(0)
		s.releasePin(ctx)
		return v, nil
	}
	if _, err := table.Checkout(ctx, s.root, v); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return 0, fmt.Errorf("%w: version %d of store %s was cleaned up", ErrNotFound, v, s.name)
		}
		return 0, err
	}
	// The pin is a lease too, so that cleanup in any process keeps it.
	l, err := s.TakeLease(ctx, v, PinLeaseTTL, "checkout:"+s.shard)
	if err != nil {
		return 0, err
	}
	s.releasePin(ctx)
	s.pinLease.Store(l)
	s.pinned.Store(v)
	return v, nil
}

// releasePin releases a checkout pin's lease (best effort: it expires).
func (s *Store) releasePin(ctx context.Context) {
	if l := s.pinLease.Swap(nil); l != nil {
		if err := s.ReleaseLease(ctx, l.ID); err != nil && !errors.Is(err, ErrNotFound) {
			s.opts.Logger.Warn("rollout: releasing a checkout pin's lease; it expires by itself", "store", s.name, "lease", l.ID, "err", err)
		}
	}
}

// RenewPin renews the checkout pin's lease when half its life has passed.
func (s *Store) RenewPin(ctx context.Context) error {
	l := s.pinLease.Load()
	if l == nil || s.clockNow().Before(l.ExpiresAt.Add(-PinLeaseTTL/2)) {
		return nil
	}
	nl, err := s.RenewLease(ctx, l.ID, PinLeaseTTL)
	if err != nil {
		return fmt.Errorf("rollout: renew the checkout pin of store %s: %w", s.name, err)
	}
	s.pinLease.CompareAndSwap(l, nl)
	return nil
}

// Pinned returns the version a checkout pinned reads to, 0 when none.
func (s *Store) Pinned() uint64 { return s.pinned.Load() }

// Name returns the store name.
func (s *Store) Name() string { return s.name }

// Shard returns this process's shard id.
func (s *Store) Shard() string { return s.shard }

// Root returns the object store rooted at the dataset directory.
func (s *Store) Root() objstore.Store { return s.root }

// conform converts a WAL batch written under an older schema to Schema.
func conform(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	recs, err := recordsFromBatch(rec)
	if err != nil {
		return nil, err
	}
	return buildBatch(recs), nil
}

// walWriter returns this process's shard writer, claiming the shard on
// first use (or again after being fenced).
func (s *Store) walWriter(ctx context.Context) (*wal.Writer, error) {
	return s.walWriterSeen(ctx, nil)
}

// walWriterSeen is walWriter given the shard's holder as just read (nil:
// read it here).
func (s *Store) walWriterSeen(ctx context.Context, seen *wal.Holder) (*wal.Writer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if w := s.writer.Load(); w != nil {
		return w, nil
	}
	if err := s.refuseDamaged(); err != nil {
		return nil, err
	}
	// Another live process with this instance id, or a full disk, is
	// reported rather than fought over with claims (claimguard.go).
	h, err := s.admitClaim(ctx, seen)
	if err != nil {
		return nil, err
	}
	opts := s.walOptions()
	opts.Holder = h // the claim builds on the manifest just read
	w, err := wal.Claim(ctx, opts)
	if err := s.noteClaim(err); err != nil {
		return nil, err
	}
	s.writer.Store(w)
	return w, nil
}

// forgetDead reports whether err says w can write no more: fenced by a
// newer epoch, or stopped by a failed log write. It then forgets w, so
// that the next write claims the shard again (replaying what is durable).
func (s *Store) forgetDead(w *wal.Writer, err error) bool {
	s.noteFenced(err)
	if errors.Is(err, wal.ErrFenced) || errors.Is(err, wal.ErrLogFailed) {
		s.dropWriter(w)
		return true
	}
	return false
}

// dropWriter forgets w (fenced, or its log failed) so the next write
// claims the shard again.
func (s *Store) dropWriter(w *wal.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writer.CompareAndSwap(w, nil) {
		go w.Abandon()
	}
}

// Append validates recs, fills defaults and makes them durable. It returns
// the ids in input order. Rows become readable at the next Flush (or seal).
func (s *Store) Append(ctx context.Context, recs []Record) ([]string, error) {
	if len(recs) == 0 {
		return nil, invalid("no records: send at least one")
	}
	if err := row.Prepare(recs, 0, time.Now().UTC()); err != nil {
		return nil, err
	}
	ids := make([]string, len(recs))
	for i := range recs {
		ids[i] = recs[i].ID
	}
	if len(recs) < buildBelowRecords {
		return ids, s.appends.enqueue(ctx, &queuedAppend{recs: recs, rows: len(recs), size: approxSize(recs)})
	}
	// Large enough to carry its batch's fixed cost: built here, in
	// parallel with other callers, not by the driver.
	rec := buildBatch(recs)
	return ids, s.appends.enqueue(ctx, &queuedAppend{batches: []arrow.RecordBatch{rec}, rows: len(recs), size: batchSize(rec)})
}

// AppendArrow appends the rows of batches whose columns are any subset of
// Schema's (see ConformArrow), with the defaults and validation of Append,
// without converting them to Records. Every batch is checked before
// anything is written, and all of them land in one WAL entry: all rows are
// stored or none. Row indexes in errors count across the batches. It
// returns the ids in row order. Rows become readable at the next Flush.
func (s *Store) AppendArrow(ctx context.Context, recs ...arrow.RecordBatch) ([]string, error) {
	now := time.Now().UTC()
	a := &queuedAppend{}
	var ids []string
	for _, rec := range recs {
		c, cids, err := row.ConformPart(rec, now, len(ids))
		if err != nil {
			a.release()
			return nil, err
		}
		if c != nil { // nil: no rows
			a.batches = append(a.batches, c)
			a.size += batchSize(c)
			ids = append(ids, cids...)
		}
	}
	if len(ids) == 0 {
		a.release()
		return nil, invalid("no records: send at least one")
	}
	a.rows = len(ids)
	if err := s.appends.enqueue(ctx, a); err != nil {
		return nil, err
	}
	return ids, nil
}

// appendBatch makes recs (with Schema), the rows of appends callers, durable
// in one WAL entry.
func (s *Store) appendBatch(ctx context.Context, appends int, recs ...arrow.RecordBatch) error {
	for attempt := 0; ; attempt++ {
		w, err := s.walWriter(ctx)
		if err != nil {
			return err
		}
		err = w.AppendGroup(ctx, appends, recs...)
		if err == nil {
			s.feedNotify()
		}
		if s.forgetDead(w, err) && errors.Is(err, wal.ErrFenced) && attempt == 0 {
			// Someone claimed our shard: an orphan merge, taken back here
			// (retrying is safe: ids make the append idempotent); or
			// another live process with our instance id, which the claim
			// refuses (ErrClaimedElsewhere) instead of fighting over it.
			s.opts.Logger.Warn("rollout: shard writer fenced; claiming again", "store", s.name, "shard", s.shard)
			continue
		}
		return s.noteSpace(err)
	}
}

// Flush seals buffered rows into a generation so they become readable. It
// is a no-op when nothing is buffered.
//
// When this process has not claimed its shard yet (no write since it
// started), an earlier process with the same shard may have crashed with
// acknowledged rows still only in the WAL: Flush then claims the shard,
// which replays and seals them. A shard without a manifest has nothing to
// replay and is left alone.
func (s *Store) Flush(ctx context.Context) error {
	w := s.writer.Load()
	if w == nil {
		if _, err := wal.LoadManifest(ctx, s.root, s.shard); errors.Is(err, wal.ErrNoShard) {
			return nil
		} else if err != nil {
			return err
		}
		_, err := s.walWriter(ctx) // the claim replays and seals
		return err
	}
	err := w.Seal(ctx)
	s.forgetDead(w, err)
	// The seal's manifest ends snapshot reuse already (ownMark); this also
	// covers a seal whose outcome is unknown.
	s.noteCommit()
	return s.noteSpace(err)
}

// Close seals buffered rows and releases the shard.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	w := s.writer.Swap(nil)
	s.closed = true
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.Close(ctx)
}

// UnflushedRows returns rows acknowledged by this process but not sealed.
func (s *Store) UnflushedRows() int64 {
	w := s.writer.Load()
	if w == nil {
		return 0
	}
	return w.UnsealedRows()
}

// UnsealedBytes returns the memory this process's memtable of the store
// holds.
func (s *Store) UnsealedBytes() int64 {
	w := s.writer.Load()
	if w == nil {
		return 0
	}
	return w.UnsealedBytes()
}

// PendingOwn returns the pending generations of this process's shard, from
// its writer's manifest (no I/O), or -1 when the shard is not claimed.
func (s *Store) PendingOwn() int {
	w := s.writer.Load()
	if w == nil {
		return -1
	}
	return len(w.Manifest().Generations)
}

// OldestPendingOwn returns when the oldest generation of this process's
// shard still in its manifest was sealed (no I/O); ok is false with none.
func (s *Store) OldestPendingOwn() (t time.Time, ok bool) {
	w := s.writer.Load()
	if w == nil {
		return t, false
	}
	gens := w.Manifest().Generations
	if len(gens) == 0 {
		return t, false
	}
	return gens[0].SealedAt, true
}
