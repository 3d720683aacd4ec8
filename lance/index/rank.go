package index

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/lance-context/lance-context/lance/table"
)

// MaxRankDeleted bounds the deleted rows a Ranker looks up (their keys are
// read one by one); beyond it Ranker declines and the caller walks.
const MaxRankDeleted = 1 << 16

// Ranker counts the live rows below a value through the BTree indexes on a
// column, from the pages' known row counts: page i of page_data holds rows
// [i*batch_size, (i+1)*batch_size), so the rank of a value is its page's
// first row plus its position in that page, one page read instead of a walk.
// It is exact: an index entry that is not a live row of a covered fragment
// (a row deleted since the build, or a row of a fragment outside the
// index's bitmap) is found and subtracted, or the Ranker is not made.
type Ranker struct {
	segs    []*rankSeg
	covered *roaring.Bitmap
	largest int
}

type rankSeg struct {
	t *BTree
	// dead are the keys of the segment's entries that are not live rows
	// (deleted since the index was built), sorted.
	dead []string
}

// Ranker returns a Ranker over the BTree indexes on column of d, or nil
// when it cannot count exactly and cheaply: no index covers a fragment of
// d, an index holds nulls, more than MaxRankDeleted covered rows are
// deleted, or an index holds entries of fragments outside its bitmap.
func (f *Finder) Ranker(ctx context.Context, d *table.Dataset, column string) (*Ranker, error) {
	idxs, err := BTreeIndexes(d, column)
	if err != nil || len(idxs) == 0 {
		return nil, err
	}
	frags := map[uint32]int64{} // live fragment -> live rows
	for _, fr := range d.Fragments() {
		frags[uint32(fr.GetId())] = int64(fr.GetPhysicalRows()) - int64(fr.GetDeletionFile().GetNumDeletedRows())
	}
	r := &Ranker{covered: roaring.New()}
	for _, m := range idxs {
		bm, err := table.FragmentBitmap(m)
		if err != nil {
			return nil, err
		}
		var live int64
		cov := roaring.New()
		for it := bm.Iterator(); it.HasNext(); {
			id := it.Next()
			if n, ok := frags[id]; ok {
				live += n
				cov.Add(id)
			}
		}
		if cov.IsEmpty() {
			continue
		}
		if r.covered.Intersects(cov) {
			return nil, nil // segments overlap: a walk would yield a row twice; do not guess
		}
		t, err := f.treeOf(ctx, d, m)
		if err != nil {
			return nil, fmt.Errorf("lance/index: index %s on %s: %w", m.GetName(), column, err)
		}
		if t.rows > 0 && t.minNull[0] {
			return nil, nil
		}
		seg := &rankSeg{t: t}
		// The index holds every live row of its fragments (it was built from
		// them); what it holds beyond those (slack) must be rows deleted since.
		slack := t.rows - live
		if slack < 0 {
			return nil, fmt.Errorf("%w: index %s on %s holds %d entries for %d live rows of its fragments", ErrCorrupt, m.GetName(), column, t.rows, live)
		}
		if slack > 0 {
			if seg.dead, err = deadKeys(ctx, d, t, cov, column); err != nil || seg.dead == nil {
				return nil, err
			}
			if int64(len(seg.dead)) != slack {
				return nil, nil // entries of fragments outside the bitmap remain
			}
		}
		r.covered.Or(cov)
		if len(r.segs) > 0 && t.rows > r.segs[r.largest].t.rows {
			r.largest = len(r.segs)
		}
		r.segs = append(r.segs, seg)
	}
	if len(r.segs) == 0 {
		return nil, nil
	}
	return r, nil
}

// deadKeys returns the sorted keys of t's entries that name deleted rows of
// the covered fragments (nil when there are too many to look up).
func deadKeys(ctx context.Context, d *table.Dataset, t *BTree, cov *roaring.Bitmap, column string) ([]string, error) {
	var addrs []table.RowAddr
	for it := cov.Iterator(); it.HasNext(); {
		id := uint64(it.Next())
		del, err := d.DeletedRows(ctx, id)
		if err != nil {
			return nil, err
		}
		if del == nil {
			continue
		}
		if len(addrs)+int(del.GetCardinality()) > MaxRankDeleted {
			return nil, nil
		}
		for o := del.Iterator(); o.HasNext(); {
			addrs = append(addrs, table.RowAddr{Fragment: id, Offset: o.Next()})
		}
	}
	if len(addrs) == 0 {
		return []string{}, nil
	}
	b, err := d.TakePlain(ctx, addrs, []string{column})
	if err != nil {
		return nil, err
	}
	defer b.Release()
	vals := strs(b.Column(0))
	var dead []string
	var found []uint64
	for i, a := range addrs {
		if vals.IsNull(i) {
			continue
		}
		v := vals.value(i)
		// The build may have left the row out (it was deleted already): count
		// it only when the index names this very row.
		if found, err = t.Equal(ctx, v, found[:0]); err != nil {
			return nil, err
		}
		if slices.Contains(found, a.Fragment<<32|uint64(a.Offset)) {
			dead = append(dead, v)
		}
	}
	slices.Sort(dead)
	if dead == nil {
		dead = []string{}
	}
	return dead, nil
}

// Covered is the set of fragments whose live rows the Ranker counts.
func (r *Ranker) Covered() *roaring.Bitmap { return r.covered }

// Below returns the number of live rows of the covered fragments whose
// value is below v (byte order, as the index sorts).
func (r *Ranker) Below(ctx context.Context, v string) (int64, error) {
	var n int64
	for _, s := range r.segs {
		k, err := s.t.below(ctx, v)
		if err != nil {
			return 0, err
		}
		n += k - int64(sort.SearchStrings(s.dead, v))
	}
	return n, nil
}

// Pivots returns ascending values at which a walk can start without
// reading what lies before them: the last value of each page of the
// largest index.
func (r *Ranker) Pivots() []string { return r.segs[r.largest].t.maxs }

// below returns the number of entries whose value is below v (nulls, which
// sort first, included).
func (t *BTree) below(ctx context.Context, v string) (int64, error) {
	np := len(t.maxs)
	p := sort.Search(np, func(i int) bool { return !t.maxNull[i] && t.maxs[i] >= v })
	if p == np {
		return t.rows, nil
	}
	pg, err := t.readPage(ctx, p)
	if err != nil {
		return 0, err
	}
	return int64(p)*t.batchSize + int64(pg.search(v)), nil
}
