package index

import (
	"context"
	"fmt"
	"iter"
	"sort"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/lance-context/lance-context/lance/table"
)

// Ascend calls fn with every non-null value above after, in ascending
// order, and its row address, until fn returns false. It reads only the
// pages it walks: a keyset page of a sorted listing costs O(log n + page).
func (t *BTree) Ascend(ctx context.Context, after string, fn func(v string, addr uint64) bool) error {
	np := len(t.maxs)
	// First page whose max is above after (null maxes sort first).
	p := sort.Search(np, func(i int) bool { return !t.maxNull[i] && t.maxs[i] > after })
	for ; p < np; p++ {
		pg, err := t.readPage(ctx, p)
		if err != nil {
			return err
		}
		j := sort.Search(pg.len(), func(j int) bool { return !pg.values.IsNull(j) && pg.values.value(j) > after })
		if j == pg.len() {
			continue
		}
		ids, err := t.rowIDs(ctx, pg)
		if err != nil {
			return err
		}
		for ; j < pg.len(); j++ {
			if !fn(pg.values.value(j), ids.Value(j)) {
				return nil
			}
		}
	}
	return nil
}

// Ascend walks the values above after of the BTree indexes on column of d,
// merged across their segments in ascending order, calling fn with each
// value (a copy) and its row address until fn returns false. Only rows of
// the fragments the indexes cover in d are given (deleted rows included:
// the caller checks them); covered is that set, nil when no index covers
// any fragment of d, and then nothing is walked.
func (f *Finder) Ascend(ctx context.Context, d *table.Dataset, column, after string, fn func(v string, addr uint64) bool) (covered *roaring.Bitmap, err error) {
	idxs, err := BTreeIndexes(d, column)
	if err != nil || len(idxs) == 0 {
		return nil, err
	}
	live := liveFragments(d)
	covered = roaring.New()
	type head struct {
		v    string
		addr uint64
		next func() (string, uint64, bool)
		stop func()
	}
	var heads []*head
	defer func() {
		for _, h := range heads {
			h.stop()
		}
	}()
	var walkErrs []*error
	for _, m := range idxs {
		bm, err := table.FragmentBitmap(m)
		if err != nil {
			return nil, err
		}
		bm.And(live)
		if bm.IsEmpty() {
			continue
		}
		covered.Or(bm)
		t, err := f.tree(ctx, d.Store(), uuidString(m))
		if err != nil {
			return nil, fmt.Errorf("lance/index: index %s on %s: %w", m.GetName(), column, err)
		}
		var werr error
		walkErrs = append(walkErrs, &werr)
		seq := func(yield func(string, uint64) bool) {
			werr = t.Ascend(ctx, after, func(v string, addr uint64) bool {
				// Rows of fragments outside the bitmap (removed by a
				// compaction) are not this index's to answer for.
				if !bm.Contains(uint32(addr >> 32)) {
					return true
				}
				return yield(v, addr)
			})
		}
		next, stop := iter.Pull2(iter.Seq2[string, uint64](seq))
		h := &head{next: func() (string, uint64, bool) { return next() }, stop: stop}
		if v, a, ok := h.next(); ok {
			h.v, h.addr = strings.Clone(v), a
			heads = append(heads, h)
		} else {
			stop()
		}
	}
	if covered.IsEmpty() {
		return nil, nil
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
		if v, a, ok := h.next(); ok {
			h.v, h.addr = strings.Clone(v), a
		} else {
			h.stop()
			heads = append(heads[:k], heads[k+1:]...)
		}
	}
	for _, e := range walkErrs {
		if *e != nil {
			return nil, *e
		}
	}
	return covered, nil
}
