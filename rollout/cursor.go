package rollout

import (
	"container/heap"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/table"
)

// Listings are ordered by id, ascending, in every source. A cursor is the
// last id of a page: the next page holds the smallest ids above it. An id
// never changes when its row moves from the WAL into the base table
// (merge) or from one fragment to another (compaction), so following
// cursors returns every row that existed when the listing began exactly
// once, whatever maintenance runs in between; an offset counts rows in the
// same order and is exact only while nothing is merged.

// cursorPrefix versions the cursor encoding.
const cursorPrefix = "v1:"

// EncodeCursor returns the opaque cursor of the page that ends at id.
func EncodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + id))
}

// DecodeCursor returns the id a cursor continues after.
func DecodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return "", invalid("cursor %q is not one this service returned: pass next_cursor from the previous page as is", c)
	}
	return strings.TrimPrefix(string(b), cursorPrefix), nil
}

// candidate is a row that may be on the page: from the WAL (wal set) or
// the base table (addr).
type candidate struct {
	id    string
	wal   *walRow
	addr  table.RowAddr
	order int // position once sorted, to put Take's rows back
}

// idHeap is a max-heap of ids, to keep the k smallest of a stream.
type idHeap []candidate

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i].id > h[j].id }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// offer keeps c if it is among the k smallest seen.
func (h *idHeap) offer(c candidate, k int) {
	if h.Len() < k {
		heap.Push(h, c)
		return
	}
	if c.id < (*h)[0].id {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}

// listByID returns the page of o: the rows with the smallest ids above
// o.After, after skipping o.Offset of them. The base table is read in two
// narrow passes: its id column (with the filter columns) to choose the
// page, then the chosen rows by address.
func (s *Store) listByID(ctx context.Context, snap *snapshot, o ListOptions) (*ListResult, error) {
	k := o.Offset + o.Limit + 1 // one more to learn has_more
	h := make(idHeap, 0, k)
	var exclude map[string]struct{}
	if o.Source != SourceFragments {
		rows, ids, err := s.walRows(ctx, snap)
		if err != nil {
			return nil, err
		}
		exclude = ids
		for i := range rows {
			r := &rows[i]
			id := r.id()
			if id <= o.After || !r.matches(o.Filters) {
				continue
			}
			h.offer(candidate{id: id, wal: r}, k)
		}
	}
	if o.Source != SourceWAL && !missingFilter(snap.base, o.Filters) {
		opts := table.ScanOptions{Columns: []string{ColID}, Where: tableFilters(o.Filters), WithRowAddr: true, Index: s.finder()}
		if len(exclude) > 0 {
			opts.In = []table.In{{Column: ColID, Values: exclude, Negate: true}}
		}
		if len(o.Filters) == 0 {
			// Unfiltered: walk the id index in order over the fragments it
			// covers, and scan only the others.
			covered, err := s.ascendIndexed(ctx, snap.base, o.After, exclude, &h, k)
			if err != nil {
				return nil, err
			}
			if covered != nil {
				opts.Fragments = roaring.New()
				for _, f := range snap.base.Fragments() {
					if !covered.Contains(uint32(f.GetId())) {
						opts.Fragments.Add(uint32(f.GetId()))
					}
				}
			}
		}
		err := snap.base.Scan(ctx, opts, func(b arrow.RecordBatch) error {
			ids, ok := b.Column(0).(interface {
				Len() int
				Value(int) string
			})
			if !ok {
				return fmt.Errorf("rollout: store %s: column id is %s, want a string column", s.name, b.Column(0).DataType())
			}
			addrs := b.Column(1).(*array.Uint64)
			for i := 0; i < ids.Len(); i++ {
				id := ids.Value(i)
				if id <= o.After || (h.Len() == k && id >= h[0].id) {
					continue
				}
				a := addrs.Value(i)
				h.offer(candidate{id: strings.Clone(id), addr: table.RowAddr{Fragment: a >> 32, Offset: uint32(a)}}, k)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	page := []candidate(h)
	slices.SortFunc(page, func(a, b candidate) int { return strings.Compare(a.id, b.id) })
	res := &ListResult{}
	if len(page) > o.Offset+o.Limit {
		res.HasMore = true
		page = page[:o.Offset+o.Limit]
	}
	page = page[min(o.Offset, len(page)):]
	out := make([]Record, len(page))
	var addrs []table.RowAddr
	var at []int
	for i := range page {
		if page[i].wal != nil {
			rec, err := page[i].wal.record()
			if err != nil {
				return nil, err
			}
			out[i] = rec
			continue
		}
		addrs = append(addrs, page[i].addr)
		at = append(at, i)
	}
	if len(addrs) > 0 {
		b, err := snap.base.TakePlain(ctx, addrs, baseColumns(snap.base, listColumns))
		if err != nil {
			return nil, err
		}
		defer b.Release()
		rs, err := recordsFromBatch(b)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			out[i] = rs[j]
		}
	}
	res.Records = out
	if res.HasMore && len(out) > 0 {
		res.NextCursor = EncodeCursor(out[len(out)-1].ID)
	}
	return res, nil
}

// ascendIndexed offers to h the live base rows above after, in id order,
// through the id index: it stops once h holds k ids below the next one, so
// it reads O(log n + k) index entries, not the id column. It returns the
// fragments the index covers (nil when it covers none: the caller scans).
func (s *Store) ascendIndexed(ctx context.Context, base *table.Dataset, after string, exclude map[string]struct{}, h *idHeap, k int) (*roaring.Bitmap, error) {
	if s.finder() == nil || !slices.Contains(s.indexColumns(), ColID) {
		return nil, nil
	}
	deleted := map[uint64]*roaring.Bitmap{}
	var werr error
	covered, err := s.opts.Indexes.Ascend(ctx, base, ColID, after, func(id string, addr uint64) bool {
		if h.Len() == k && id >= (*h)[0].id {
			return false // every later id is larger still
		}
		frag, off := addr>>32, uint32(addr)
		del, ok := deleted[frag]
		if !ok {
			if del, werr = base.DeletedRows(ctx, frag); werr != nil {
				return false
			}
			deleted[frag] = del
		}
		if del != nil && del.Contains(off) {
			return true
		}
		if _, pending := exclude[id]; pending {
			return true // a newer write waits in the WAL
		}
		h.offer(candidate{id: id, addr: table.RowAddr{Fragment: frag, Offset: off}}, k)
		return true
	})
	if werr != nil {
		return nil, werr
	}
	return covered, err
}

// missingFilter reports a filter on a column the base table does not have
// yet (see baseColumns): it matches no base row (null equals nothing).
func missingFilter(d *table.Dataset, fs []Filter) bool {
	for _, f := range fs {
		if d.Schema().Field(f.Column) == nil {
			return true
		}
	}
	return false
}
