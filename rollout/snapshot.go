package rollout

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/lance-context/lance-context/internal/multierr"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// Snapshot metadata on object storage: what a read costs before it reads
// any row.
//
// By default a read revalidates everything it depends on, every time (the
// staleness bound is zero: a read sees every commit, of any process, that
// finished before it began), in one wave of parallel requests:
//
//   - one listing of the shard markers (_lc_wal/_shards/), for shards
//     claimed since the last read;
//   - per shard this process knows, one listing of its manifest directory
//     (wal.LatestManifestInfo), whose newest name is the shard's latest
//     version: a manifest this process already holds (same version, size
//     and modification time) is not read again;
//   - the base table's latest version by one listing of the first names
//     of _versions/ (table.Open): a version already decoded is not read
//     again (lance/table's manifest cache).
//
// A second wave reads only what changed (a new manifest version, a shard
// not seen before). Since the base is read concurrently with the shard
// manifests rather than after them, the snapshot then checks the order
// the read path needs (every generation a manifest no longer lists is at or
// below the base's watermark of that shard: merges drain a shard only
// after committing the base that holds its rows) and reads the base again
// when a merge drained a shard between the two reads.
//
// With a read consistency interval N > 0 (Options.ReadConsistencyInterval,
// LanceDB's read_consistency_interval), a read reuses what a read of this
// handle validated less than N ago (counted from when its listings began)
// and makes no request for it: other processes' commits are then seen at
// most N late. This process's own commits end the reuse at once (ownMark:
// every base commit counts in Store.commits, noteCommit; every commit of
// its shard's WAL writer publishes a new manifest), so a process always
// reads its own writes. A retry after a generation file vanished always
// revalidates (readPlan.fresh).
type snapMeta struct {
	mu     sync.Mutex
	shards []string                  // the shard ids of the last listing
	mans   map[string]cachedShardMan // latest manifest read per shard

	// The newest validations, kept only with a read consistency interval:
	// shard manifests with their base, and the newest base (validated
	// with the manifests or alone).
	full, base validated
}

// validated is snapshot metadata a read validated.
type validated struct {
	at     time.Time // when its listings began
	mark   ownMark
	shards []shardView // only id and man are set
	base   *table.Dataset
}

// ownMark identifies the state of this process's own commits to a store:
// it changes with each of them, after the commit is durable.
type ownMark struct {
	commits uint64
	man     *wal.Manifest // the shard writer's latest committed manifest
}

func (s *Store) ownMark() ownMark {
	// The counter first: a commit that ends between the two loads changes
	// the next mark, never this one's meaning.
	m := ownMark{commits: s.commits.Load()}
	if w := s.writer.Load(); w != nil {
		m.man = w.Manifest()
	}
	return m
}

// noteCommit records a commit of this process to the store, once it is
// durable: snapshots validated before it are no longer reused.
func (s *Store) noteCommit() { s.commits.Add(1) }

// readPlan says what a read opens first in the base, so that the snapshot
// opens it ahead (openBase), and whether it must revalidate.
type readPlan struct {
	files   bool     // the newest fragments' data files
	indexes []string // the columns whose BTree indexes it looks up
	fresh   bool     // revalidate even within the read consistency interval
	latest  bool     // the latest version even under a checkout pin (the feed)
	version uint64   // read this base version alone (0: the latest, or the pin)
}

// at is p reading base version v (0: unchanged).
func (p readPlan) at(v uint64) readPlan {
	p.version = v
	return p
}

// The plans of the reads: each opens ahead only the index it uses (a get
// does not open the rollout_id index, nor a trajectory the id index).
var (
	planGet        = readPlan{files: true, indexes: []string{ColID}}
	planTrajectory = readPlan{files: true, indexes: []string{ColRolloutID}}
)

// planList is a listing's plan: the id index (the order of every page)
// and the indexes of its filter columns.
func planList(o ListOptions) readPlan {
	if o.Source == SourceWAL {
		return readPlan{version: o.Version} // no base row is read
	}
	p := readPlan{files: true, indexes: []string{ColID}, version: o.Version}
	for _, f := range o.Filters {
		p.indexes = append(p.indexes, f.Column)
	}
	return p
}

// reusable returns the snapshot metadata to reuse within the read
// consistency interval: with the shard manifests (withWAL) or the base
// alone. ok is false when there is none to reuse.
func (s *Store) reusable(withWAL bool) (shards []shardView, base *table.Dataset, ok bool) {
	n := s.opts.ReadConsistencyInterval
	if n <= 0 {
		return nil, nil, false
	}
	mark := s.ownMark()
	m := &s.meta
	m.mu.Lock()
	v := m.base
	if withWAL {
		v = m.full
	}
	m.mu.Unlock()
	// A base version this process saw after the validation (a commit of
	// its own, or a newer read) also ends the reuse.
	if v.base == nil || v.mark != mark || s.clock().Sub(v.at) >= n || s.version.Load() > v.base.Version() {
		return nil, nil, false
	}
	shards = make([]shardView, len(v.shards))
	for i, sh := range v.shards {
		shards[i] = shardView{id: sh.id, man: sh.man}
	}
	return shards, v.base, true
}

// remember keeps a validation for reuse (with a read consistency interval
// only), unless a newer one is already kept.
func (s *Store) remember(withWAL bool, at time.Time, mark ownMark, shards []shardView, base *table.Dataset) {
	if s.opts.ReadConsistencyInterval <= 0 {
		return
	}
	v := validated{at: at, mark: mark, base: base}
	if withWAL {
		v.shards = make([]shardView, len(shards))
		for i, sh := range shards {
			v.shards[i] = shardView{id: sh.id, man: sh.man}
		}
	}
	m := &s.meta
	m.mu.Lock()
	defer m.mu.Unlock()
	if withWAL && (m.full.base == nil || !at.Before(m.full.at)) {
		m.full = v
	}
	if m.base.base == nil || !at.Before(m.base.at) {
		m.base = validated{at: at, mark: mark, base: base}
	}
}

// clock is the time reuse is measured in (tests set Store.now).
func (s *Store) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

type cachedShardMan struct {
	version uint64
	size    int64
	modTime time.Time
	man     *wal.Manifest
}

// readShardsAndBase reads the shard manifests and the base table as
// described above.
func (s *Store) readShardsAndBase(ctx context.Context, plan readPlan) ([]shardView, *table.Dataset, error) {
	m := &s.meta
	m.mu.Lock()
	known := slices.Clone(m.shards)
	m.mu.Unlock()
	if len(known) == 0 && s.shard != "" {
		// First read of this handle: this process's own shard is the
		// likeliest one; probe it in the first wave.
		known = []string{s.shard}
	}

	var (
		wg      sync.WaitGroup
		ids     []string
		listErr error
		base    *table.Dataset
		baseErr error
		fresh   []string // shards claimed since the last read
		fm      []*wal.Manifest
		ferrs   []error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if ids, listErr = wal.ListShards(ctx, s.root); listErr != nil {
			return
		}
		// Shards claimed since the last read: a second wave, which starts
		// as soon as the listing names them (not after the base and its
		// warm-up).
		for _, id := range ids {
			if !slices.Contains(known, id) {
				fresh = append(fresh, id)
			}
		}
		fm = make([]*wal.Manifest, len(fresh))
		ferrs = make([]error, len(fresh))
		var fwg sync.WaitGroup
		for i, id := range fresh {
			fwg.Add(1)
			go func() {
				defer fwg.Done()
				fm[i], ferrs[i] = s.latestShardManifest(ctx, id)
			}()
		}
		fwg.Wait()
	}()
	go func() {
		defer wg.Done()
		base, baseErr = s.openBase(ctx, plan)
	}()
	mans := make([]*wal.Manifest, len(known))
	errs := make([]error, len(known))
	for i, id := range known {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mans[i], errs[i] = s.latestShardManifest(ctx, id)
		}()
	}
	wg.Wait()
	if err := multierr.Join(listErr, baseErr, multierr.Join(errs...), multierr.Join(ferrs...)); err != nil {
		return nil, nil, err
	}
	got := make(map[string]*wal.Manifest, len(ids))
	for i, id := range known {
		got[id] = mans[i]
	}
	for i, id := range fresh {
		got[id] = fm[i]
	}
	m.mu.Lock()
	m.shards = ids
	m.mu.Unlock()

	shards := make([]shardView, 0, len(ids))
	for _, id := range ids {
		if man := got[id]; man != nil {
			shards = append(shards, shardView{id: id, man: man})
		}
	}
	// The order check: a merge that drained a shard between the base read
	// and the manifest read left generations that neither holds.
	for _, sh := range shards {
		if Watermark(base, sh.id) < drainedUpTo(sh.man) {
			b, err := table.Open(ctx, s.root)
			if err != nil {
				return nil, nil, err
			}
			base = b
			break
		}
	}
	return shards, base, nil
}

// drainedUpTo is the highest generation a shard's manifest no longer lists:
// generations are numbered densely from 1 and removed only by drains of
// the oldest, after the base committed them.
func drainedUpTo(m *wal.Manifest) uint64 {
	if len(m.Generations) > 0 {
		return m.Generations[0].Generation - 1
	}
	if m.NextGeneration > 0 {
		return m.NextGeneration - 1
	}
	return 0
}

// latestShardManifest returns a shard's latest manifest (nil when it has
// none yet: registered, but its first claim has not committed one, or never
// will), reading it only when this process does not hold that version.
func (s *Store) latestShardManifest(ctx context.Context, id string) (*wal.Manifest, error) {
	v, info, err := wal.LatestManifestInfo(ctx, s.root, id)
	if errors.Is(err, wal.ErrNoShard) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := &s.meta
	m.mu.Lock()
	c, ok := m.mans[id]
	m.mu.Unlock()
	if ok && c.version == v && c.size == info.Size && c.modTime.Equal(info.ModTime) {
		return c.man, nil
	}
	man, err := wal.ReadManifest(ctx, s.root, id, v)
	if errors.Is(err, objstore.ErrNotFound) {
		// Deleted since the listing (a newer one exists): the slow path.
		man, err = wal.LoadManifest(ctx, s.root, id)
		if errors.Is(err, wal.ErrNoShard) {
			return nil, nil
		}
		return man, err
	}
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.mans == nil {
		m.mans = map[string]cachedShardMan{}
	}
	if c, ok := m.mans[id]; !ok || c.version <= v {
		m.mans[id] = cachedShardMan{v, info.Size, info.ModTime, man}
	}
	m.mu.Unlock()
	return man, nil
}

// warmFiles is how many of the newest fragments' data files openBase opens
// ahead: every one of a store that compaction keeps under its 16-fragment
// threshold (CompactMinFragments). With 8, a cold page of a 10M-row store
// (11 fragments) opened the oldest fragment's file, where its first rows
// were, in a round trip of its own after the index walk.
const warmFiles = 16

// indexWarmer is a RowFinder that can open a version's indexes ahead
// (index.Finder).
type indexWarmer interface {
	Warm(ctx context.Context, d *table.Dataset, columns ...string)
}

// openBase opens the latest base table, and what the read will need first
// in it (warmBase).
func (s *Store) openBase(ctx context.Context, plan readPlan) (*table.Dataset, error) {
	base, err := table.Open(ctx, s.root)
	if err != nil {
		return nil, err
	}
	s.warmBase(ctx, base, plan)
	return base, nil
}

// warmBase opens, in parallel and before it returns, what a read of base
// will need first (plan): the BTree indexes it looks up and the newest
// fragments' data files (footers and column metadata). They are immutable
// and cached once opened, so this costs requests only for a version this
// process has not read yet (a first read, or the first after a commit),
// and saves the read's dependent round trips: on a cold store it overlaps
// the wave that reads the shard manifests, instead of index lookup, then
// data file footer, then data one after another. Only the plan's indexes
// are opened: another read's index would cost a cold request its requests
// (4 for the two files of a BTree) for nothing; that read opens its own.
func (s *Store) warmBase(ctx context.Context, base *table.Dataset, plan readPlan) {
	var wg sync.WaitGroup
	if w, ok := s.finder().(indexWarmer); ok && len(plan.indexes) > 0 {
		var cols []string
		for _, c := range plan.indexes {
			if slices.Contains(s.indexColumns(), c) && !slices.Contains(cols, c) {
				cols = append(cols, c)
			}
		}
		if len(cols) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.Warm(ctx, base, cols...)
			}()
		}
	}
	if plan.files {
		base.WarmFiles(ctx, warmFiles)
	}
	wg.Wait()
}
