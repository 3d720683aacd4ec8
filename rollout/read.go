package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/internal/multierr"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// Source selects which tier List reads (see api.Source).
type Source = api.Source

// The sources.
const (
	SourceFragments = api.SourceFragments
	SourceWAL       = api.SourceWAL
	SourceAll       = api.SourceAll
)

// ParseSource maps "" to fragments and rejects unknown names.
func ParseSource(s string) (Source, error) {
	switch Source(s) {
	case "", SourceFragments:
		return SourceFragments, nil
	case SourceWAL, SourceAll:
		return Source(s), nil
	}
	return "", invalid("source %q is not one of fragments, wal, all", s)
}

// Filter is an equality filter on one of FilterColumns. include_in_training
// takes "true" or "false".
type Filter struct {
	Column string
	Value  string
}

// ParseFilters validates filters given as column -> value. Empty values are
// ignored (no filter).
func ParseFilters(m map[string]string) ([]Filter, error) {
	var out []Filter
	for k, v := range m {
		if !slices.Contains(FilterColumns, k) {
			return nil, invalid("cannot filter on %q; filters: %s", k, strings.Join(FilterColumns, ", "))
		}
		if v == "" {
			continue
		}
		if k == "include_in_training" && v != "true" && v != "false" {
			return nil, invalid("include_in_training must be true or false, got %q", v)
		}
		out = append(out, Filter{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Column < out[j].Column })
	return out, nil
}

func tableFilters(fs []Filter) []table.Eq {
	out := make([]table.Eq, len(fs))
	for i, f := range fs {
		out[i] = table.Eq{Column: f.Column, Value: f.Value}
		if f.Column == "include_in_training" {
			out[i].Value = f.Value == "true"
		}
	}
	return out
}

// ListOptions selects a page of records (see cursor.go for the order).
type ListOptions struct {
	Source  Source
	Filters []Filter
	Limit   int    // default 25
	Offset  int    // rows to skip after After
	After   string // an id: list the ids above it (DecodeCursor reads a cursor)
	// Version, when not 0, reads that base version alone, as a checkout
	// of it does, without changing what other reads see.
	Version uint64
}

// ListResult is one page. NextCursor continues after it; empty on the last
// page.
type ListResult struct {
	Records    []Record
	HasMore    bool
	NextCursor string
}

// snapshot is a consistent view: shard manifests first, then the base, so
// every generation a manifest lists is either pending (above the base's
// watermark) or in the base.
type snapshot struct {
	base   *table.Dataset
	shards []shardView
}

type shardView struct {
	id      string
	man     *wal.Manifest
	pending []wal.Generation // above the watermark, oldest first
}

func (s *Store) snapshot(ctx context.Context, withWAL bool, plan readPlan) (*snapshot, error) {
	return s.snapshotLimit(ctx, withWAL, s.opts.PendingMax, plan)
}

// snapshotLimit is snapshot with a chosen pending-generation limit; plan
// names what the read opens first in the base (openBase), for reads that
// go on to read rows.
func (s *Store) snapshotLimit(ctx context.Context, withWAL bool, limit int, plan readPlan) (*snapshot, error) {
	v := plan.version
	if p := s.pinned.Load(); v == 0 && p != 0 && !plan.latest {
		v = p
	}
	if v != 0 {
		// A read at a version, or a checkout: the base at that version,
		// without the WAL tier.
		base, err := table.Checkout(ctx, s.root, v)
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, fmt.Errorf("%w: version %d of store %s (cleaned up, or never committed)", ErrNotFound, v, s.name)
		}
		if err != nil {
			return nil, err
		}
		return &snapshot{base: base}, nil
	}
	var shards []shardView
	var base *table.Dataset
	var err error
	var reused bool
	if !plan.fresh {
		shards, base, reused = s.reusable(withWAL)
	}
	if reused {
		s.warmBase(ctx, base, plan)
	} else {
		at, mark := s.clock(), s.ownMark()
		if withWAL {
			shards, base, err = s.readShardsAndBase(ctx, plan)
		} else {
			base, err = s.openBase(ctx, plan)
		}
		if err != nil {
			return nil, err
		}
		s.remember(withWAL, at, mark, shards, base)
	}
	s.sawVersion(base.Version())
	total := 0
	for i := range shards {
		shards[i].pending = shards[i].man.Pending(Watermark(base, shards[i].id))
		n := len(shards[i].pending)
		total += n
		if n > limit {
			return nil, fmt.Errorf("%w: shard %s has %d (limit %d); merge it, then retry", ErrOverloaded, shards[i].id, n, limit)
		}
		if n >= s.opts.PendingWarn {
			s.opts.Logger.Warn("rollout: many pending generations", "store", s.name, "shard", shards[i].id, "pending", n)
		}
	}
	if total > limit {
		return nil, fmt.Errorf("%w: %d in all shards (limit %d); merge, then retry", ErrOverloaded, total, limit)
	}
	return &snapshot{base: base, shards: shards}, nil
}

// readRetry runs read on fresh snapshots until it does not trip over a
// generation a concurrent merge deleted; a retry never reuses snapshot
// metadata (the interval's reuse is what may have named the file).
func (s *Store) readRetry(ctx context.Context, withWAL bool, plan readPlan, read func(*snapshot) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		plan.fresh = attempt > 0
		var snap *snapshot
		if snap, err = s.snapshot(ctx, withWAL, plan); err != nil {
			return err
		}
		if err = read(snap); !errors.Is(err, objstore.ErrNotFound) {
			return err
		}
	}
	return fmt.Errorf("rollout: store %s changed during the read; retry the request: %w", s.name, err)
}

// readView is readRetry with the snapshot's view.
func (s *Store) readView(ctx context.Context, withWAL bool, plan readPlan, read func(*view) error) error {
	return s.readRetry(ctx, withWAL, plan, func(snap *snapshot) error { return read(s.newView(snap)) })
}

// walRow is one winning row of the WAL tier.
type walRow struct {
	gen *wal.LoadedGeneration
	row int
}

func (w walRow) id() string { return w.gen.Key(w.row) }

// pendingSet is the winning pending rows of a set of generations, one per
// id (the newest, by wal's Newest rule), oldest generation first and in
// row order within one, and the set of their ids. It is shared by the
// reads that meet the same generations, and never changed.
type pendingSet struct {
	gens []*wal.LoadedGeneration
	rows []walRow
	ids  map[string]struct{}
}

// walRows returns the pending rows of snap (see pendingSet). The winning
// rows of one set of cached generations are found once: each read walked
// and mapped every pending id (a fifth of a soak's allocations), and a
// worker taking appends seals about once a second.
func (s *Store) walRows(ctx context.Context, snap *snapshot) (*pendingSet, error) {
	gens, err := s.loadPending(ctx, snap)
	if err != nil {
		return nil, err
	}
	if m := s.pendingMemo.Load(); m != nil && slices.Equal(m.gens, gens) {
		return m, nil
	}
	rows, ids := wal.NewestRows(gens)
	out := make([]walRow, len(rows))
	for i, r := range rows {
		out[i] = walRow{r.Gen, r.Row}
	}
	p := &pendingSet{gens: gens, rows: out, ids: ids}
	s.pendingMemo.Store(p)
	return p, nil
}

// pendingRefs lists the snapshot's pending generations, each shard's in
// ascending order.
func (snap *snapshot) pendingRefs() []wal.GenRef {
	var refs []wal.GenRef
	for _, sh := range snap.shards {
		for _, g := range sh.pending {
			refs = append(refs, wal.GenRef{Shard: sh.id, Gen: g})
		}
	}
	return refs
}

// pendingReads is how many generation reads a read issues at once: 64
// makes a backlog of 50 one wave of reads (16 took 4 waves).
const pendingReads = 64

// loadPending returns every pending generation, decoded, in (shard,
// generation) order. Cold generations are read concurrently: with a long
// backlog, one-by-one reads would dominate a cold list.
func (s *Store) loadPending(ctx context.Context, snap *snapshot) ([]*wal.LoadedGeneration, error) {
	refs := snap.pendingRefs()
	out := make([]*wal.LoadedGeneration, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, pendingReads)
	for i, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = s.opts.Cache.get(ctx, s.root, ref)
		}()
	}
	wg.Wait()
	return out, multierr.Join(errs...)
}

func (w walRow) matches(fs []Filter) bool { return rowMatches(w.gen.Rec, w.row, fs) }

// rowMatches reports whether row of rec (a cached generation: every
// filter column is among its columns) matches every filter.
func rowMatches(rec arrow.RecordBatch, row int, fs []Filter) bool {
	for _, f := range fs {
		if c := columnOf(rec, f.Column); c == nil || !valueMatches(c, row, f.Value) {
			return false
		}
	}
	return true
}

// columnOf returns rec's column name, nil when it has none.
func columnOf(rec arrow.RecordBatch, name string) arrow.Array {
	if i := rec.Schema().FieldIndices(name); len(i) == 1 {
		return rec.Column(i[0])
	}
	return nil
}

// valueMatches reports whether row of col equals a filter's value: a
// string, or "true"/"false" for a bool column. Null matches nothing.
func valueMatches(col arrow.Array, row int, value string) bool {
	if col.IsNull(row) {
		return false
	}
	switch c := col.(type) {
	case *array.String:
		return c.Value(row) == value
	case *array.Boolean:
		return c.Value(row) == (value == "true")
	}
	return false
}

// List returns one page of records, in id order (see cursor.go).
func (s *Store) List(ctx context.Context, o ListOptions) (*ListResult, error) {
	if o.Limit <= 0 {
		o.Limit = 25
	}
	if o.Offset < 0 {
		return nil, invalid("offset must be >= 0")
	}
	if o.Source == "" {
		o.Source = SourceFragments
	}
	var res *ListResult
	err := s.readView(ctx, o.Source != SourceFragments, planList(o), func(v *view) error {
		var err error
		res, err = s.listByID(ctx, v, o)
		return err
	})
	return res, err
}

// Get returns the newest version of a record from the full union.
func (s *Store) Get(ctx context.Context, id string) (*Record, error) { return s.GetAt(ctx, id, 0) }

// GetAt is Get from base version v alone (0: the latest, with the tier),
// as a checkout of v reads it, without changing what other reads see.
func (s *Store) GetAt(ctx context.Context, id string, v uint64) (*Record, error) {
	var out *Record
	err := s.readView(ctx, true, planGet.at(v), func(vw *view) error {
		var err error
		out, err = vw.get(ctx, id)
		return err
	})
	return out, err
}

// pendingCached reports whether every pending generation of snap is
// decoded in the generation cache (reading them costs no request).
func (s *Store) pendingCached(snap *snapshot) bool {
	return s.opts.Cache.holdsAll(s.root, snap.pendingRefs())
}

// pendingRef locates a row in a generation.
type pendingRef struct {
	walRow
	shard string
	gen   wal.Generation
}

// findPending looks id up in the pending generations, newest first (wal's
// Newest rule), through the generation cache. The candidates the cache
// does not hold (the generations whose id range may hold id) are read in
// one parallel wave, not one after another: a cold get waits one round
// trip for them, not one per generation.
func (s *Store) findPending(ctx context.Context, snap *snapshot, id string) (pendingRef, bool, error) {
	refs := snap.pendingRefs()
	load := s.opts.Cache.loader(s.root)
	if !s.opts.Cache.holdsAll(s.root, refs) {
		w := s.loadWave(ctx, refs, id)
		defer w.wait() // no read of this call outlives it
		load = w.load
	}
	r, ok, err := wal.FindNewest(ctx, refs, id, load)
	if err != nil || !ok {
		return pendingRef{}, false, err
	}
	return pendingRef{walRow{r.Gen, r.Row}, r.Gen.Ref.Shard, r.Gen.Ref.Gen}, true, nil
}

// genWave is a parallel read of the generations a key lookup may need,
// started before the lookup asks for them in turn (wal.FindNewest).
type genWave struct {
	wg       sync.WaitGroup
	loads    map[string]*genLoad // by generation key
	fallback wal.Loader
}

type genLoad struct {
	done chan struct{}
	g    *wal.LoadedGeneration
	err  error
}

// loadWave starts reading, through the generation cache, every generation
// of refs whose id range may hold key (the candidates wal.FindNewest
// would read), at most pendingReads at a time as loadPending does.
func (s *Store) loadWave(ctx context.Context, refs []wal.GenRef, key string) *genWave {
	w := &genWave{loads: map[string]*genLoad{}, fallback: s.opts.Cache.loader(s.root)}
	sem := make(chan struct{}, pendingReads)
	for _, ref := range refs {
		if g := ref.Gen; g.MinID != "" && (key < g.MinID || key > g.MaxID) {
			continue
		}
		l := &genLoad{done: make(chan struct{})}
		w.loads[ref.Key()] = l
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer close(l.done)
			sem <- struct{}{}
			defer func() { <-sem }()
			l.g, l.err = s.opts.Cache.get(ctx, s.root, ref)
		}()
	}
	return w
}

// load is a wal.Loader answering from the wave (a generation outside it
// is read as the cache reads it).
func (w *genWave) load(ctx context.Context, ref wal.GenRef) (*wal.LoadedGeneration, error) {
	l, ok := w.loads[ref.Key()]
	if !ok {
		return w.fallback(ctx, ref)
	}
	select {
	case <-l.done:
		return l.g, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// wait waits for every read of the wave.
func (w *genWave) wait() { w.wg.Wait() }

// Blob returns a record's payload and content type. ErrNotFound when the
// record or its payload is absent.
func (s *Store) Blob(ctx context.Context, id string) ([]byte, string, error) {
	return s.BlobAt(ctx, id, 0)
}

// BlobAt is Blob from base version v alone (0: the latest). It holds the
// whole payload in memory: servers stream with OpenPayload instead.
func (s *Store) BlobAt(ctx context.Context, id string, v uint64) ([]byte, string, error) {
	p, err := s.OpenPayload(ctx, id, v)
	if err != nil {
		return nil, "", err
	}
	data, err := io.ReadAll(p)
	if err != nil {
		return nil, "", err
	}
	return data, p.ContentType, nil
}

// maxTrajectory bounds the records of one trajectory read.
const maxTrajectory = 100_000

// Trajectory returns the records of a rollout (full union) ordered by
// sequence_order, then id.
func (s *Store) Trajectory(ctx context.Context, rolloutID string) ([]Record, error) {
	return s.TrajectoryAt(ctx, rolloutID, 0)
}

// TrajectoryAt is Trajectory from base version v alone (0: the latest).
func (s *Store) TrajectoryAt(ctx context.Context, rolloutID string, v uint64) ([]Record, error) {
	var out []Record
	err := s.readView(ctx, true, planTrajectory.at(v), func(vw *view) error {
		var err error
		out, err = s.trajectory(ctx, vw, rolloutID)
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.SequenceOrder != b.SequenceOrder {
			return a.SequenceOrder < b.SequenceOrder
		}
		return a.ID < b.ID
	})
	return out, nil
}

// trajectory reads a rollout's records from one view: the pending rows
// of the rollout, and the base rows (through the rollout_id index) the
// view shows. Unlike a listing it needs no id order, so the base rows are
// read with their columns in one scan, not ids first and rows after (one
// round trip less).
func (s *Store) trajectory(ctx context.Context, v *view, rolloutID string) ([]Record, error) {
	fs := []Filter{{ColRolloutID, rolloutID}}
	scanBase := !missingFilter(v.base(), fs)
	// The pending generations must be read first (a cold process, or new
	// generations): scan the base at the same time, on a view of the base
	// alone (what the pending rows hide is dropped after), so the base's
	// reads do not wait for theirs.
	var (
		early    []Record
		earlyErr error
		done     chan struct{}
	)
	if scanBase && !v.pendingCached() {
		bctx, cancel := context.WithCancel(ctx)
		defer func() { cancel(); <-done }() // no read of this call outlives it
		done = make(chan struct{})
		go func() {
			defer close(done)
			early, earlyErr = s.trajectoryBase(bctx, v.baseOnly(), fs, maxTrajectory+1)
		}()
	}
	rows, err := v.pending(ctx)
	if err != nil {
		return nil, err
	}
	var mine []walRow
	for i := range rows {
		if rows[i].matches(fs) {
			mine = append(mine, rows[i])
		}
	}
	if len(mine) > maxTrajectory {
		return nil, invalid("trajectory %q has more than %d records", rolloutID, maxTrajectory)
	}
	// The pending rows' columns the generation cache does not keep are
	// read beside the base's rows; the order is made by the caller.
	pending := s.startPendingRecords(ctx, mine)
	defer pending.stop()
	var out []Record
	if done != nil {
		<-done
		if earlyErr != nil {
			return nil, earlyErr
		}
		if len(early) <= maxTrajectory {
			for _, r := range early {
				if !v.hides(r.ID) {
					out = append(out, r)
				}
			}
			scanBase = false
		}
		// Else the scan stopped at its limit before the pending rows
		// were known: scan again through the view, below.
	}
	if scanBase {
		rs, err := s.trajectoryBase(ctx, v, fs, maxTrajectory+1-len(mine))
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	pend, err := pending.wait()
	if err != nil {
		return nil, err
	}
	out = append(pend, out...)
	if len(out) > maxTrajectory {
		return nil, invalid("trajectory %q has more than %d records", rolloutID, maxTrajectory)
	}
	return out, nil
}

// trajectoryBase reads up to limit base rows matching fs that v shows.
func (s *Store) trajectoryBase(ctx context.Context, v *view, fs []Filter, limit int) ([]Record, error) {
	opts := table.ScanOptions{Columns: baseColumns(v.base(), listColumns), Where: tableFilters(fs), Index: s.finder(),
		PlainDictionaries: true, Limit: int64(limit)}
	var out []Record
	err := v.scanBase(ctx, opts, func(b arrow.RecordBatch) error {
		rs, err := recordsFromBatch(b)
		out = append(out, rs...)
		return err
	})
	return out, err
}

// ShardStats and Stats are the wire types of a store's statistics.
type (
	ShardStats = api.ShardStats
	Stats      = api.Stats
)

// Stats reads the store's statistics from its manifests.
func (s *Store) Stats(ctx context.Context) (*Stats, error) {
	// No limit: an overloaded store is exactly the one to describe.
	snap, err := s.snapshotLimit(ctx, true, int(^uint(0)>>1), readPlan{})
	if err != nil {
		return nil, err
	}
	st := &Stats{
		Name: s.name, BaseRows: snap.base.CountRows(), DeletedRows: deletedRows(snap.base), Fragments: len(snap.base.Fragments()),
		Version: snap.base.Version(), UnflushedRows: s.UnflushedRows(), Shards: []ShardStats{},
	}
	if ts := snap.base.Manifest().GetTimestamp(); ts != nil {
		t := time.Unix(ts.GetSeconds(), int64(ts.GetNanos())).UTC()
		st.LastUpdated = &t
	}
	if v := snap.base.Config()[lastCompactionKey]; v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			st.LastCompaction = &t
		}
	}
	for _, sh := range snap.shards {
		ss := ShardStats{ShardID: sh.id, PendingGenerations: len(sh.pending), Epoch: sh.man.Epoch, Watermark: Watermark(snap.base, sh.id), UpdatedAt: sh.man.UpdatedAt}
		for _, g := range sh.pending {
			ss.PendingRows += g.Rows
		}
		if len(sh.pending) > 0 {
			t := sh.pending[0].SealedAt
			ss.OldestPendingAt = &t
			if lag := s.clockNow().Sub(t).Seconds(); lag > st.MergeLagSeconds {
				st.MergeLagSeconds = lag
			}
		}
		st.PendingGenerations += ss.PendingGenerations
		st.PendingRows += ss.PendingRows
		st.Shards = append(st.Shards, ss)
		if len(sh.pending) > 0 {
			if t := sh.pending[len(sh.pending)-1].SealedAt; st.LastUpdated == nil || t.After(*st.LastUpdated) {
				st.LastUpdated = &t
			}
		}
	}
	st.Rows = st.BaseRows + st.PendingRows
	return st, nil
}
