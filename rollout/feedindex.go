package rollout

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
)

// The base table's rows in sequence order, per fragment and shard: what
// the feed needs to find "the next rows of shard k after seq p" without
// scanning the table. A fragment's lc_shard and lc_seq columns (16 bytes a
// row) are read once and kept sorted by seq; a fragment never changes but
// through its deletion file, which is part of the key. The sorted rows are
// an LRU bounded by bytes; each fragment's per-shard range (first and last
// seq) stays after eviction, so choosing the fragments to read costs no I/O.

// seqRun is one shard's live rows of a fragment, ascending by seq.
type seqRun struct {
	seqs []int64
	offs []uint32
}

// fragSeqs is a fragment's rows by shard.
type fragSeqs struct {
	byShard map[int64]*seqRun
	ranges  map[int64]seqRange // of byShard
	bytes   int64
}

// seqRange is the first and last seq of a shard's rows in a fragment.
type seqRange struct{ first, last int64 }

type feedIndex struct {
	mu     sync.Mutex
	ranges map[string]map[int64]seqRange // fragment key -> shard -> range
	lru    *list.List                    // of *feedIndexEntry, most recent first
	byKey  map[string]*list.Element
	bytes  int64
	limit  int64
	// newest is the newest base version forget was called for: a read of
	// an older version (another consumer's snapshot) forgets nothing, or
	// two readers a merge apart would drop each other's fragments.
	newest uint64

	afterRead func() // test hook: runs after a fragment is read and recorded
}

type feedIndexEntry struct {
	key  string
	seqs *fragSeqs
}

func newFeedIndex() *feedIndex {
	return &feedIndex{
		ranges: map[string]map[int64]seqRange{},
		lru:    list.New(),
		byKey:  map[string]*list.Element{},
		limit:  gctune.Share(16, 512<<20),
	}
}

// feedFragKey names a fragment's content: its id, data files and deletion file.
func feedFragKey(f *pb.DataFragment) string {
	k := fmt.Sprint(f.GetId())
	for _, df := range f.GetFiles() {
		k += "/" + df.GetPath()
	}
	if d := f.GetDeletionFile(); d != nil {
		k += fmt.Sprintf("/del-%d-%d", d.GetReadVersion(), d.GetId())
	}
	return k
}

// rangesOf returns the per-shard seq ranges of a fragment, reading it when
// they are not known.
func (x *feedIndex) rangesOf(ctx context.Context, base *table.Dataset, f *pb.DataFragment) (map[int64]seqRange, error) {
	key := feedFragKey(f)
	x.mu.Lock()
	r, ok := x.ranges[key]
	x.mu.Unlock()
	if ok {
		return r, nil
	}
	// The ranges come from the rows read, not from x.ranges: another
	// reader's forget may drop the key in between, and a fragment taken as
	// holding no rows makes the feed move past them for good.
	s, err := x.rows(ctx, base, f)
	if err != nil {
		return nil, err
	}
	return s.ranges, nil
}

// rows returns a fragment's rows by shard, sorted by seq.
func (x *feedIndex) rows(ctx context.Context, base *table.Dataset, f *pb.DataFragment) (*fragSeqs, error) {
	key := feedFragKey(f)
	x.mu.Lock()
	if e, ok := x.byKey[key]; ok {
		x.lru.MoveToFront(e)
		s := e.Value.(*feedIndexEntry).seqs
		x.mu.Unlock()
		return s, nil
	}
	x.mu.Unlock()
	s, err := readFragSeqs(ctx, base, f)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	x.ranges[key] = s.ranges
	if _, ok := x.byKey[key]; !ok {
		x.byKey[key] = x.lru.PushFront(&feedIndexEntry{key: key, seqs: s})
		x.bytes += s.bytes
		for x.bytes > x.limit && x.lru.Len() > 1 {
			e := x.lru.Back()
			old := e.Value.(*feedIndexEntry)
			x.lru.Remove(e)
			delete(x.byKey, old.key)
			x.bytes -= old.seqs.bytes
		}
	}
	x.mu.Unlock()
	if x.afterRead != nil {
		x.afterRead()
	}
	return s, nil
}

// forget drops what is known of fragments not in keep, the fragments of
// base version v (the others were superseded by a compaction or a new
// deletion file), so the ranges do not grow with the store's age. Only
// the newest version seen forgets.
func (x *feedIndex) forget(v uint64, keep map[string]bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if v < x.newest {
		return
	}
	x.newest = v
	for k := range x.ranges {
		if !keep[k] {
			delete(x.ranges, k)
		}
	}
	for k, e := range x.byKey {
		if !keep[k] {
			x.bytes -= e.Value.(*feedIndexEntry).seqs.bytes
			x.lru.Remove(e)
			delete(x.byKey, k)
		}
	}
}

// readFragSeqs reads a fragment's live rows' lc_shard and lc_seq. Rows
// without them (merged before the columns existed, or written by another
// Lance writer) are not in the feed.
func readFragSeqs(ctx context.Context, base *table.Dataset, f *pb.DataFragment) (*fragSeqs, error) {
	out := &fragSeqs{byShard: map[int64]*seqRun{}}
	err := base.Scan(ctx, table.ScanOptions{
		Columns:     []string{ColShard, ColSeq},
		Fragments:   roaring.BitmapOf(uint32(f.GetId())),
		WithRowAddr: true,
		BatchRows:   1 << 16,
	}, func(b arrow.RecordBatch) error {
		shards, ok1 := b.Column(0).(*array.Int64)
		seqs, ok2 := b.Column(1).(*array.Int64)
		addrs, ok3 := b.Column(2).(*array.Uint64)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("rollout: feed: fragment %d: %s, %s are %s, %s", f.GetId(), ColShard, ColSeq, b.Column(0).DataType(), b.Column(1).DataType())
		}
		for i := 0; i < int(b.NumRows()); i++ {
			if shards.IsNull(i) || seqs.IsNull(i) {
				continue
			}
			k := shards.Value(i)
			run := out.byShard[k]
			if run == nil {
				run = &seqRun{}
				out.byShard[k] = run
			}
			run.seqs = append(run.seqs, seqs.Value(i))
			run.offs = append(run.offs, uint32(addrs.Value(i)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.ranges = make(map[int64]seqRange, len(out.byShard))
	for k, run := range out.byShard {
		// A merge writes its newest generation first: sort by seq.
		if !slices.IsSorted(run.seqs) {
			sort.Sort(runBySeq{run})
		}
		out.bytes += int64(len(run.seqs)) * 12
		out.ranges[k] = seqRange{run.seqs[0], run.seqs[len(run.seqs)-1]}
	}
	return out, nil
}

type runBySeq struct{ *seqRun }

func (r runBySeq) Len() int           { return len(r.seqs) }
func (r runBySeq) Less(i, j int) bool { return r.seqs[i] < r.seqs[j] }
func (r runBySeq) Swap(i, j int) {
	r.seqs[i], r.seqs[j] = r.seqs[j], r.seqs[i]
	r.offs[i], r.offs[j] = r.offs[j], r.offs[i]
}

// baseRow is a base row of one shard, by address.
type baseRow struct {
	seq  int64
	addr table.RowAddr
}

// next returns up to n rows of shard k with seq > after from the base, in
// seq order. Fragments are visited in the order of their first seq of the
// shard, and the walk stops as soon as no unvisited fragment can hold one
// of the n smallest.
func (x *feedIndex) next(ctx context.Context, base *table.Dataset, k, after int64, n int) ([]baseRow, error) {
	type cand struct {
		f *pb.DataFragment
		r seqRange
	}
	var cands []cand
	for _, f := range base.Fragments() {
		ranges, err := x.rangesOf(ctx, base, f)
		if err != nil {
			return nil, err
		}
		if r, ok := ranges[k]; ok && r.last > after {
			cands = append(cands, cand{f, r})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].r.first < cands[j].r.first })
	var out []baseRow
	for _, c := range cands {
		if len(out) >= n && c.r.first > out[n-1].seq {
			break
		}
		fs, err := x.rows(ctx, base, c.f)
		if err != nil {
			return nil, err
		}
		run := fs.byShard[k]
		if run == nil {
			continue
		}
		i, _ := slices.BinarySearch(run.seqs, after+1)
		for j := i; j < len(run.seqs) && j-i < n; j++ {
			out = append(out, baseRow{run.seqs[j], table.RowAddr{Fragment: c.f.GetId(), Offset: run.offs[j]}})
		}
		if len(out) >= n {
			// Fragments interleave only after a compaction: keep the n smallest.
			slices.SortFunc(out, func(a, b baseRow) int { return cmpInt64(a.seq, b.seq) })
			out = out[:n]
		}
	}
	slices.SortFunc(out, func(a, b baseRow) int { return cmpInt64(a.seq, b.seq) })
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
