package index

import (
	"cmp"
	"context"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/table"
)

// cursor walks one index's non-null entries above a value in ascending
// order, page by page, keeping only rows of the fragments in bm.
type cursor struct {
	t   *BTree
	bm  *roaring.Bitmap
	p   int // page being walked
	j   int // next row in it
	pg  *page
	ids *array.Uint64
	// The current entry, valid after a successful next.
	v    string
	addr uint64
}

// seek positions c before the first entry above after.
func (c *cursor) seek(ctx context.Context, after string) error {
	t := c.t
	np := len(t.maxs)
	// First page whose max is above after (null maxes sort first).
	c.p = sort.Search(np, func(i int) bool { return !t.maxNull[i] && t.maxs[i] > after })
	if c.p >= np {
		return nil
	}
	if err := c.load(ctx); err != nil {
		return err
	}
	pg := c.pg
	c.j = sort.Search(pg.len(), func(j int) bool { return !pg.values.IsNull(j) && pg.values.value(j) > after })
	return nil
}

func (c *cursor) load(ctx context.Context) error {
	// A walk needs the row id of every entry it passes: read them with
	// the values (one round trip, not values and then ids).
	pg, err := c.t.readPageOf(ctx, c.p, true)
	if err != nil {
		return err
	}
	ids, err := c.t.rowIDs(ctx, pg)
	if err != nil {
		return err
	}
	c.pg, c.ids, c.j = pg, ids, 0
	return nil
}

// next moves to the next entry; false at the end.
func (c *cursor) next(ctx context.Context) (bool, error) {
	for c.p < len(c.t.maxs) {
		if c.pg == nil {
			if err := c.load(ctx); err != nil {
				return false, err
			}
		}
		for ; c.j < c.pg.len(); c.j++ {
			if c.pg.values.IsNull(c.j) {
				continue
			}
			a := c.ids.Value(c.j)
			// Rows of fragments outside the bitmap (removed by a compaction)
			// are not this index's to answer for.
			if !c.bm.Contains(uint32(a >> 32)) {
				continue
			}
			c.v, c.addr = c.pg.values.value(c.j), a
			c.j++
			return true, nil
		}
		c.p++
		c.pg, c.ids = nil, nil
	}
	return false, nil
}

// Ascend calls fn with every non-null value above after, in ascending
// order, and its row address, until fn returns false. It reads only the
// pages it walks: a keyset page of a sorted listing costs O(log n + page).
// v is valid only during the call.
func (t *BTree) Ascend(ctx context.Context, after string, fn func(v string, addr uint64) bool) error {
	c := &cursor{t: t, bm: nil}
	if err := c.seek(ctx, after); err != nil {
		return err
	}
	for c.p < len(t.maxs) {
		if c.pg == nil {
			if err := c.load(ctx); err != nil {
				return err
			}
		}
		for ; c.j < c.pg.len(); c.j++ {
			if !c.pg.values.IsNull(c.j) && !fn(c.pg.values.value(c.j), c.ids.Value(c.j)) {
				return nil
			}
		}
		c.p++
		c.pg = nil
	}
	return nil
}

// Ascend walks the values above after of the BTree indexes on column of d,
// merged across their segments in ascending order, calling fn with each
// value and its row address until fn returns false; v is valid only during
// the call (copy what you keep). Only rows of the fragments the indexes
// cover in d are given (deleted rows included: the caller checks them);
// covered is that set, nil when no index covers any fragment of d, and then
// nothing is walked.
func (f *Finder) Ascend(ctx context.Context, d *table.Dataset, column, after string, fn func(v string, addr uint64) bool) (covered *roaring.Bitmap, err error) {
	segs, covered, err := f.segments(ctx, d, column)
	if err != nil || covered == nil {
		return nil, err
	}
	// Every segment's cursor seeks at once: a cold walk waits for one
	// page read, not one per segment.
	cs := make([]*cursor, len(segs))
	oks := make([]bool, len(segs))
	errs := make([]error, len(segs))
	start := func(i int) {
		c := &cursor{t: segs[i].t, bm: segs[i].bm}
		cs[i] = c
		if errs[i] = c.seek(ctx, after); errs[i] == nil {
			oks[i], errs[i] = c.next(ctx)
		}
	}
	eachAtOnce(len(segs), nil, start)
	var heads []*cursor
	for i := range segs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if oks[i] {
			heads = append(heads, cs[i])
		}
	}
	// A k-way merge of the segments (few: delta segments are consolidated
	// past IndexMaxSegments), smallest value first.
	for len(heads) > 0 {
		k := 0
		for i := 1; i < len(heads); i++ {
			if heads[i].v < heads[k].v {
				k = i
			}
		}
		h := heads[k]
		if !fn(h.v, h.addr) {
			break
		}
		ok, err := h.next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			heads = append(heads[:k], heads[k+1:]...)
		}
	}
	return covered, nil
}

// AddrSet is a set of row addresses that a walk over many index entries,
// most of them not in the set, tests each entry against (AscendEach): a
// 64 Kibit filter with two probes turns away all but a few percent of
// them before a binary search of the sorted addresses.
type AddrSet struct {
	bloom  [1 << 10]uint64
	sorted []uint64
}

// NewAddrSet returns the set of sorted, ascending addresses.
func NewAddrSet(sorted []uint64) *AddrSet {
	s := &AddrSet{sorted: sorted}
	for _, a := range sorted {
		h1, h2 := addrHash(a)
		s.bloom[h1>>6] |= 1 << (h1 & 63)
		s.bloom[h2>>6] |= 1 << (h2 & 63)
	}
	return s
}

func addrHash(a uint64) (uint64, uint64) {
	h := a * 0x9e3779b97f4a7c15
	return h >> 48, (h >> 32) & 0xffff
}

// maybe is the filter's answer: false means a is not in the set.
func (s *AddrSet) maybe(a uint64) bool {
	h1, h2 := addrHash(a)
	return s.bloom[h1>>6]&(1<<(h1&63)) != 0 && s.bloom[h2>>6]&(1<<(h2&63)) != 0
}

// has reports whether a is in the set (after maybe said it may be).
func (s *AddrSet) has(a uint64) bool {
	_, ok := slices.BinarySearch(s.sorted, a)
	return ok
}

// AscendEach walks, one index segment after another (not merged), the
// entries above after in ascending order, and calls fn with the value and
// row address of those whose address is in keep, until fn returns false
// for that segment. Entries not in keep cost an address test, not a value:
// a walk that looks for a few rows of a known set (a filtered page) reads
// O(k · rows/matches) addresses per segment. The largest segment goes
// first: a caller that stops at a bound the rows it kept set (the k
// smallest values) then walks the smaller ones only below that bound.
// Only rows of the fragments the indexes cover in d are given (deleted
// rows included); covered is that set, nil when no index covers any
// fragment of d. v is valid only during the call.
func (f *Finder) AscendEach(ctx context.Context, d *table.Dataset, column, after string, keep *AddrSet, fn func(v string, addr uint64) bool) (covered *roaring.Bitmap, err error) {
	segs, covered, err := f.segments(ctx, d, column)
	if err != nil || covered == nil {
		return nil, err
	}
	segs = slices.Clone(segs) // the memo's: not to be reordered
	slices.SortStableFunc(segs, func(a, b segment) int { return cmp.Compare(b.t.Rows(), a.t.Rows()) })
	for _, sg := range segs {
		t, bm := sg.t, sg.bm
		c := &cursor{t: t, bm: bm}
		if err := c.seek(ctx, after); err != nil {
			return nil, err
		}
		lastFrag, lastIn := uint64(1<<63), false
	walk:
		for c.p < len(t.maxs) {
			if c.pg == nil {
				if err := c.load(ctx); err != nil {
					return nil, err
				}
			}
			pg, ids := c.pg, c.ids.Uint64Values()
			for j := c.j; j < len(ids); j++ {
				a := ids[j]
				// keep first: it turns most entries away, and ids in id order
				// change fragment at almost every entry.
				if !keep.maybe(a) || !keep.has(a) {
					continue
				}
				if frag := a >> 32; frag != lastFrag {
					lastFrag, lastIn = frag, bm.Contains(uint32(frag))
				}
				if !lastIn || pg.values.IsNull(j) {
					continue
				}
				if !fn(pg.values.value(j), a) {
					break walk
				}
			}
			c.p++
			c.pg, c.j = nil, 0
		}
	}
	return covered, nil
}
