package rollout

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// What the sampler keeps in memory, so that a batch costs what its window
// holds and not what the store holds:
//
//   - per base fragment (its data files and deletion file: a fragment whose
//     deletions change is a new entry), the first appearance of each policy
//     version in it (fragVersions): a few bytes per version, read once
//     from the policy_version and created_at columns;
//   - per base fragment and key column, its rows grouped by policy version
//     and key, with their rewards (fragGroups): built only for fragments
//     that hold a version of some window, about 8 bytes a row;
//   - per pending generation and base version, the base rows its ids
//     rewrite (the all view hides them).
//
// All three live in one LRU, bounded by bytes (a sixteenth of the memory
// budget, at most 256 MiB), shared by every store of the process; entries
// never go stale (their keys name immutable files) and are only evicted.

type offsetSet = roaring.Bitmap

var sampleLRU = newSampleCache(gctune.Share(16, 256<<20))

type sampleCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // front: most recently used
	entries map[sampleCacheKey]*list.Element
}

type sampleCacheKey struct {
	root objstore.Store
	key  string
}

type sampleCacheEntry struct {
	k     sampleCacheKey
	v     any
	bytes int64
}

func newSampleCache(max int64) *sampleCache {
	return &sampleCache{max: max, order: list.New(), entries: map[sampleCacheKey]*list.Element{}}
}

func (c *sampleCache) get(k sampleCacheKey) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*sampleCacheEntry).v, true
}

func (c *sampleCache) put(k sampleCacheKey, v any, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.entries[k] = c.order.PushFront(&sampleCacheEntry{k, v, bytes})
	c.size += bytes
	for c.size > c.max && c.order.Len() > 1 {
		e := c.order.Back()
		ce := e.Value.(*sampleCacheEntry)
		c.order.Remove(e)
		delete(c.entries, ce.k)
		c.size -= ce.bytes
	}
}

// fragKey names a fragment's content: its id, data files and deletion
// file. A merge or compaction that rewrites or deletes rows changes it.
func fragKey(f *pb.DataFragment) string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(f.GetId(), 10))
	for _, df := range f.GetFiles() {
		b.WriteByte('|')
		b.WriteString(df.GetPath())
	}
	if d := f.GetDeletionFile(); d != nil {
		fmt.Fprintf(&b, "|del:%d:%d:%d", d.GetId(), d.GetReadVersion(), d.GetNumDeletedRows())
	}
	return b.String()
}

// verFirst is a version's first appearance in a fragment: the smallest
// created_at (microseconds) of its rows and the offset of a row that has
// it.
type verFirst struct {
	at  int64
	off uint32
}

// fragVersions is a fragment's policy versions and their first
// appearance; nulls counts its rows without a policy_version.
type fragVersions struct {
	first map[string]verFirst
	nulls int
}

func (v *fragVersions) bytes() int64 {
	n := int64(64)
	for k := range v.first {
		n += int64(len(k)) + 48
	}
	return n
}

// storeSampler is a store handle's sampler state: its consumer groups'
// ledgers.
type storeSampler struct {
	root    objstore.Store
	mu      sync.Mutex
	ledgers map[string]*ledger
}

var samplers = struct {
	mu sync.Mutex
	m  map[objstore.Store]*storeSampler
}{m: map[objstore.Store]*storeSampler{}}

// maxSamplers bounds the store handles whose sampler state is kept; a
// dropped one is read back from storage when next used.
const maxSamplers = 1024

// samplerFor returns s's sampler state, keyed by the store's root (a new
// store of the same name has a new root).
func samplerFor(s *Store) *storeSampler {
	samplers.mu.Lock()
	defer samplers.mu.Unlock()
	sc := samplers.m[s.root]
	if sc == nil {
		if len(samplers.m) >= maxSamplers {
			for k := range samplers.m {
				delete(samplers.m, k)
				break
			}
		}
		sc = &storeSampler{root: s.root, ledgers: map[string]*ledger{}}
		samplers.m[s.root] = sc
	}
	return sc
}

func (sc *storeSampler) ledger(s *Store, group string) *ledger {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	l := sc.ledgers[group]
	if l == nil {
		l = &ledger{root: s.root, store: s.name, group: group}
		sc.ledgers[group] = l
	}
	return l
}

// parallelism is how many fragments a cold sample summarizes at once.
func parallelism() int { return max(2, runtime.GOMAXPROCS(0)) }

// versionStats returns the first appearances of every fragment, reading
// the fragments not in the cache (in parallel).
func (sc *storeSampler) versionStats(ctx context.Context, s *Store, base *table.Dataset, frags []*pb.DataFragment) ([]*fragVersions, error) {
	out := make([]*fragVersions, len(frags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism())
	for i, f := range frags {
		k := sampleCacheKey{s.root, "v:" + fragKey(f)}
		if v, ok := sampleLRU.get(k); ok {
			out[i] = v.(*fragVersions)
			continue
		}
		g.Go(func() error {
			st, err := scanVersionStats(gctx, base, f, nil)
			if err != nil {
				return err
			}
			sampleLRU.put(k, st, st.bytes())
			out[i] = st
			return nil
		})
	}
	return out, g.Wait()
}

// scanVersionStats reads a fragment's policy_version and created_at, and
// returns each version's first appearance, leaving out the rows in skip.
func scanVersionStats(ctx context.Context, base *table.Dataset, f *pb.DataFragment, skip *offsetSet) (*fragVersions, error) {
	st := &fragVersions{first: map[string]verFirst{}}
	frag := roaring.BitmapOf(uint32(f.GetId()))
	cols := []string{"policy_version", ColCreatedAt}
	err := base.Scan(ctx, table.ScanOptions{Columns: baseColumns(base, cols), Fragments: frag, WithRowAddr: true, PlainDictionaries: true}, func(b arrow.RecordBatch) error {
		p, addrs, err := projectWithAddr(b, cols)
		if err != nil {
			return err
		}
		defer p.Release()
		at, _ := p.Column(1).(*array.Timestamp)
		for i := 0; i < int(p.NumRows()); i++ {
			off := uint32(addrs.Value(i))
			if skip != nil && skip.Contains(off) {
				continue
			}
			v, null := stringAt(p.Column(0), i)
			if null {
				st.nulls++
				continue
			}
			t := int64(math.MaxInt64)
			if at != nil && !at.IsNull(i) {
				t = int64(at.Value(i))
			}
			if cur, ok := st.first[v]; !ok || t < cur.at {
				st.first[strings.Clone(v)] = verFirst{t, off}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rollout: sample: read the versions of fragment %d: %w", f.GetId(), err)
	}
	return st, nil
}

// projectWithAddr is project for a scan batch with a row address column
// (table.RowAddrColumn), which it returns apart.
func projectWithAddr(b arrow.RecordBatch, cols []string) (arrow.RecordBatch, *array.Uint64, error) {
	ai := b.Schema().FieldIndices(table.RowAddrColumn)
	if len(ai) != 1 {
		return nil, nil, fmt.Errorf("rollout: sample: scan batch without %s", table.RowAddrColumn)
	}
	addrs, ok := b.Column(ai[0]).(*array.Uint64)
	if !ok {
		return nil, nil, fmt.Errorf("rollout: sample: %s is %s, not uint64", table.RowAddrColumn, b.Column(ai[0]).DataType())
	}
	p, err := project(b, cols)
	return p, addrs, err
}

// groupPart is the rows of one key in one fragment and version, and the
// statistics of their rewards.
type groupPart struct {
	key     string
	offs    []uint32
	rewards []float32 // NaN: null
	st      rewardStats
}

// without returns p without the rows in skip: p itself when it has none
// of them, nil when it has only them.
func (p *groupPart) without(skip *offsetSet) *groupPart {
	first := slices.IndexFunc(p.offs, skip.Contains)
	if first < 0 {
		return p
	}
	out := &groupPart{key: p.key}
	for i, off := range p.offs {
		if i >= first && skip.Contains(off) {
			continue
		}
		out.offs = append(out.offs, off)
		out.rewards = append(out.rewards, p.rewards[i])
		out.st.add(p.rewards[i])
	}
	if len(out.offs) == 0 {
		return nil
	}
	return out
}

// versionParts is a fragment's rows of one policy version (or of none:
// null), by key.
type versionParts struct {
	version string
	null    bool
	parts   []*groupPart
}

// fragGroups is a fragment's rows by version and key (rows whose key is
// null belong to no group and are left out).
type fragGroups struct {
	vers  []versionParts
	bytes int64
}

// groupParts returns the group summaries of the fragments frags[need[k]]
// for the key column groupBy, reading those not in the cache (in
// parallel).
func (sc *storeSampler) groupParts(ctx context.Context, s *Store, base *table.Dataset, frags []*pb.DataFragment, need []int, groupBy string) ([]*fragGroups, error) {
	out := make([]*fragGroups, len(need))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism())
	for k, i := range need {
		f := frags[i]
		ck := sampleCacheKey{s.root, "g:" + groupBy + ":" + fragKey(f)}
		if v, ok := sampleLRU.get(ck); ok {
			out[k] = v.(*fragGroups)
			continue
		}
		g.Go(func() error {
			fg, err := scanGroupParts(gctx, base, f, groupBy)
			if err != nil {
				return err
			}
			sampleLRU.put(ck, fg, fg.bytes)
			out[k] = fg
			return nil
		})
	}
	return out, g.Wait()
}

// scanGroupParts reads a fragment's policy_version, key and reward
// columns and groups its rows.
func scanGroupParts(ctx context.Context, base *table.Dataset, f *pb.DataFragment, groupBy string) (*fragGroups, error) {
	cols := []string{"policy_version", "reward"}
	keyAt := 0 // group by policy_version: the version column is the key
	if groupBy != "policy_version" {
		cols = append(cols, groupBy)
		keyAt = 2
	}
	type verKey struct {
		v    string
		null bool
	}
	byVer := map[verKey]map[string]*groupPart{}
	var verOrder []verKey
	err := base.Scan(ctx, table.ScanOptions{Columns: baseColumns(base, cols), Fragments: roaring.BitmapOf(uint32(f.GetId())), WithRowAddr: true, PlainDictionaries: true}, func(b arrow.RecordBatch) error {
		p, addrs, err := projectWithAddr(b, cols)
		if err != nil {
			return err
		}
		defer p.Release()
		rew, _ := p.Column(1).(*array.Float32)
		var (
			lastVK  verKey
			lastMap map[string]*groupPart
		)
		for i := 0; i < int(p.NumRows()); i++ {
			key, null := stringAt(p.Column(keyAt), i)
			if null {
				continue
			}
			v, vnull := stringAt(p.Column(0), i)
			vk := verKey{v, vnull}
			m := lastMap
			if m == nil || vk != lastVK {
				if m = byVer[vk]; m == nil {
					vk.v = strings.Clone(vk.v)
					m = map[string]*groupPart{}
					byVer[vk] = m
					verOrder = append(verOrder, vk)
				}
				lastVK, lastMap = vk, m
			}
			gp := m[key]
			if gp == nil {
				gp = &groupPart{key: strings.Clone(key)}
				m[gp.key] = gp
			}
			r := float32(math.NaN())
			if rew != nil && !rew.IsNull(i) {
				r = rew.Value(i)
			}
			gp.offs = append(gp.offs, uint32(addrs.Value(i)))
			gp.rewards = append(gp.rewards, r)
			gp.st.add(r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rollout: sample: read the groups of fragment %d: %w", f.GetId(), err)
	}
	fg := &fragGroups{bytes: 64}
	for _, vk := range verOrder {
		m := byVer[vk]
		vp := versionParts{version: vk.v, null: vk.null, parts: make([]*groupPart, 0, len(m))}
		for _, gp := range m {
			gp.offs = gp.offs[:len(gp.offs):len(gp.offs)]
			gp.rewards = gp.rewards[:len(gp.rewards):len(gp.rewards)]
			vp.parts = append(vp.parts, gp)
			fg.bytes += int64(len(gp.key)) + 96 + 8*int64(cap(gp.offs))
		}
		fg.vers = append(fg.vers, vp)
		fg.bytes += int64(len(vk.v)) + 48
	}
	return fg, nil
}

// baseCombo is the window's groups in the base table alone (the parts of
// every fragment, merged by key, with their statistics), immutable once
// built: sample copies a group before changing it.
type baseCombo struct {
	groups []candGroup
	byKey  map[string]int32
}

// baseGroups returns the window's base groups, from the cache when the
// same base version, key column and window (wkey) were sampled before.
func (sc *storeSampler) baseGroups(root objstore.Store, wkey string, frags []*pb.DataFragment, need []int, parts []*fragGroups, inWindow func(v string, null bool) (int, bool)) *baseCombo {
	k := sampleCacheKey{root, wkey}
	if v, ok := sampleLRU.get(k); ok {
		return v.(*baseCombo)
	}
	hint := 0
	for _, fg := range parts {
		for _, vp := range fg.vers {
			if _, ok := inWindow(vp.version, vp.null); ok {
				hint += len(vp.parts)
			}
		}
	}
	c := &baseCombo{groups: make([]candGroup, 0, hint), byKey: make(map[string]int32, hint)}
	for k, i := range need {
		fid := frags[i].GetId()
		for _, vp := range parts[k].vers {
			vr, ok := inWindow(vp.version, vp.null)
			if !ok {
				continue
			}
			for _, p := range vp.parts {
				gi, ok := c.byKey[p.key]
				if !ok {
					gi = int32(len(c.groups))
					c.groups = append(c.groups, candGroup{key: p.key, newer: math.MaxInt})
					c.byKey[p.key] = gi
				}
				g := &c.groups[gi]
				g.parts = append(g.parts, partRef{fid, p, vr})
				g.st.merge(p.st)
				g.newer = min(g.newer, vr)
			}
		}
	}
	bytes := int64(len(wkey)) + 64
	for i := range c.groups {
		c.groups[i].finish()
		bytes += 160 + 24*int64(cap(c.groups[i].parts)) + int64(len(c.groups[i].key))
	}
	sampleLRU.put(k, c, bytes)
	return c
}

// genSuperseded returns the addresses of the base rows the pending
// generation g hides in v (the view's rule, hiddenBaseRows), once per
// generation and base version, then cached.
func (sc *storeSampler) genSuperseded(ctx context.Context, v *view, g *wal.LoadedGeneration) ([]uint64, error) {
	k := sampleCacheKey{sc.root, "s:" + g.Ref.Key() + "@" + strconv.FormatUint(v.base().Version(), 10)}
	if c, ok := sampleLRU.get(k); ok {
		return c.([]uint64), nil
	}
	out, err := v.hiddenBaseRows(ctx, g)
	if err != nil {
		return nil, fmt.Errorf("rollout: sample: find the base rows generation %s rewrites: %w", g.Ref.Key(), err)
	}
	sampleLRU.put(k, out, 64+8*int64(len(out)))
	return out, nil
}
