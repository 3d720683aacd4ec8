package rollout

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// Snapshot metadata on object storage: what a read costs before it reads
// any row.
//
// A read revalidates everything it depends on, every time (the staleness
// bound is zero: a read sees every commit, of any process, that finished
// before it began), in one wave of parallel requests:
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
type snapMeta struct {
	mu     sync.Mutex
	shards []string                  // the shard ids of the last listing
	mans   map[string]cachedShardMan // latest manifest read per shard
}

type cachedShardMan struct {
	version uint64
	size    int64
	modTime time.Time
	man     *wal.Manifest
}

// readShardsAndBase reads the shard manifests and the base table as
// described above.
func (s *Store) readShardsAndBase(ctx context.Context, warm bool) ([]shardView, *table.Dataset, error) {
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
		base, baseErr = s.openBase(ctx, warm)
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
	if err := errors.Join(listErr, baseErr, errors.Join(errs...), errors.Join(ferrs...)); err != nil {
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
// ahead.
const warmFiles = 8

// indexWarmer is a RowFinder that can open a version's indexes ahead
// (index.Finder).
type indexWarmer interface {
	Warm(ctx context.Context, d *table.Dataset, columns ...string)
}

// warmIndexColumns are the indexes openBase opens ahead: those of the
// reads a client makes first (pages and get by id, trajectories).
var warmIndexColumns = []string{ColID, ColRolloutID}

// openBase opens the latest base table. With warm, it also opens, in
// parallel and before it returns, what a read of that version will need
// first: the BTree indexes on id and rollout_id and the newest fragments' data files (footers
// and column metadata). They are immutable and cached once opened, so this
// costs requests only for a version this process has not read yet (a
// first read, or the first after a commit), and saves the read's dependent
// round trips: on a cold store it overlaps the wave that reads the shard
// manifests, instead of index lookup, then data file footer, then data one
// after another.
func (s *Store) openBase(ctx context.Context, warm bool) (*table.Dataset, error) {
	base, err := table.Open(ctx, s.root)
	if err != nil || !warm {
		return base, err
	}
	var wg sync.WaitGroup
	if w, ok := s.finder().(indexWarmer); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Warm(ctx, base, warmIndexColumns...)
		}()
	}
	base.WarmFiles(ctx, warmFiles)
	wg.Wait()
	return base, nil
}
