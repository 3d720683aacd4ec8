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

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
)

// Listings are ordered by id, ascending, in every source. A cursor is the
// last id of a page: the next page holds the smallest ids above it. An id
// never changes when its row moves from the WAL into the base table
// (merge) or from one fragment to another (compaction), so following
// cursors returns every row that existed when the listing began exactly
// once, whatever maintenance runs in between; an offset counts rows in the
// same order and is exact only while nothing is merged.
//
// A page's base rows come from one of five strategies, all reading the base
// through the view (view.go), so all hide the same rows: a scan of the id
// and filter columns (pageBase, here), the early walk overlapping the
// pending generations' reads (cursor_early.go), the id index walk, plain or
// keeping a key filter's rows (cursor_index.go), and the deep-offset skip
// (cursor_skip.go). testdata/view states their common answers as tables.

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
func (s *Store) listByID(ctx context.Context, v *view, o ListOptions) (*ListResult, error) {
	var rows []walRow
	deep := o.Offset >= skipMinOffset && len(o.Filters) == 0 && o.Source != SourceWAL
	var early *earlyBase
	if o.Source == SourceAll && !deep && !missingFilter(v.base(), o.Filters) && !v.pendingCached() {
		// The pending generations must be read first (a cold process, or
		// new generations): walk the base at the same time, on a view of
		// the base alone, so the base's reads do not wait for theirs (as
		// get and trajectory do).
		bctx, cancel := context.WithCancel(ctx)
		early = s.startPageBase(bctx, v.baseOnly(), o, o.Offset+o.Limit+1, o.Offset == 0)
		defer func() { cancel(); early.wait() }() // no read of this call outlives it
	}
	if o.Source != SourceFragments {
		var err error
		if rows, err = v.pending(ctx); err != nil {
			return nil, err
		}
	}
	if deep {
		// A deep offset: start from a cursor whose rank the index pages
		// give, and count only what lies after it.
		var err error
		if o, err = s.skipOffset(ctx, v, o); err != nil {
			return nil, err
		}
	}
	k := o.Offset + o.Limit + 1 // one more to learn has_more
	h := make(idHeap, 0, k)
	offerWAL := func(h *idHeap) {
		for i := range rows {
			r := &rows[i]
			id := r.id()
			if id <= o.After || !r.matches(o.Filters) {
				continue
			}
			h.offer(candidate{id: id, wal: r}, k)
		}
	}
	if o.Source != SourceFragments {
		offerWAL(&h)
	}
	var verify *Filter                    // a filter rows were chosen by through its index alone
	var baseRows map[table.RowAddr]Record // base rows pageBase read whole
	if early != nil {
		ver, err := early.wait()
		if err != nil {
			return nil, err
		}
		verify = ver
		if !early.merge(&h, v, k) {
			// The pending rows took places the early walk filled: walk
			// again, through the view (rare: a page's worth of base rows
			// rewritten in the WAL).
			h = h[:0]
			offerWAL(&h)
			if verify, baseRows, err = s.pageBase(ctx, v, o, &h, k); err != nil {
				return nil, err
			}
		}
	} else if o.Source != SourceWAL && !missingFilter(v.base(), o.Filters) {
		var err error
		if verify, baseRows, err = s.pageBase(ctx, v, o, &h, k); err != nil {
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
	var at, walAt []int
	var walRows []walRow
	for i := range page {
		if page[i].wal != nil {
			walRows = append(walRows, *page[i].wal)
			walAt = append(walAt, i)
			continue
		}
		if rec, ok := early.taken(page[i].addr); ok {
			out[i] = rec
			continue
		}
		if rec, ok := baseRows[page[i].addr]; ok {
			out[i] = rec
			continue
		}
		addrs = append(addrs, page[i].addr)
		at = append(at, i)
	}
	// The pending rows' columns the generation cache does not keep are
	// read beside the base's rows.
	pending := s.startPendingRecords(ctx, walRows)
	defer pending.stop()
	if len(addrs) > 0 {
		// Rows are read in address order (TakeRows then does not reorder
		// every column) and put in id order here.
		sortByAddr(addrs, at)
		b, err := v.base().TakeRows(ctx, addrs, baseColumns(v.base(), listColumns))
		if err != nil {
			return nil, err
		}
		defer b.Release()
		if verify != nil {
			if err := checkFilter(b, *verify); err != nil {
				return nil, fmt.Errorf("rollout: store %s: %w", s.name, err)
			}
		}
		rs, err := recordsFromBatch(b)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			out[i] = rs[j]
		}
	}
	rs, err := pending.wait()
	if err != nil {
		return nil, err
	}
	for j, i := range walAt {
		out[i] = rs[j]
	}
	res.Records = out
	if res.HasMore && len(out) > 0 {
		res.NextCursor = EncodeCursor(out[len(out)-1].ID)
	}
	return res, nil
}

// pageBase offers to h the base rows v shows above o.After that match
// o.Filters, keeping the k smallest ids (by
// address: the rows are taken once the page is chosen). verify is the
// filter rows were chosen by through its index alone (walkFiltered), which
// the taken rows must be checked against. rows, when not nil, holds the
// page's rows already read, by address (a filter whose index names few
// rows: they are read whole in the scan that finds them, so the page does
// not read their id and filter columns a second time in a take).
func (s *Store) pageBase(ctx context.Context, v *view, o ListOptions, h *idHeap, k int) (verify *Filter, rows map[table.RowAddr]Record, err error) {
	base := v.base()
	opts := table.ScanOptions{Columns: []string{ColID}, Where: tableFilters(o.Filters), WithRowAddr: true, Index: s.finder()}
	wide := false // the scan reads the rows whole
	if len(o.Filters) == 0 {
		// Unfiltered: walk the id index in order over the fragments it
		// covers, and scan only the others.
		covered, err := s.ascendIndexed(ctx, v, o.After, h, k)
		if err != nil {
			return nil, nil, err
		}
		if covered != nil {
			opts.Fragments = fragmentsOutside(base, covered)
		}
	} else if len(o.Filters) == 1 {
		// One key filter: walk the id index in order, keeping the rows
		// the filter's index names, when that reads less than the
		// matching rows' ids would.
		walked, few, err := s.walkFiltered(ctx, v, o.Filters[0], o.After, h, k)
		if err != nil {
			return nil, nil, err
		}
		if walked != nil {
			verify = &o.Filters[0]
			opts.Fragments = fragmentsOutside(base, walked)
		} else if few {
			wide = true
			opts.Columns = baseColumns(base, listColumns)
			opts.PlainDictionaries = true
			rows = map[table.RowAddr]Record{}
		}
	}
	idCol := slices.Index(opts.Columns, ColID)
	err = v.scanBase(ctx, opts, func(b arrow.RecordBatch) error {
		ids, ok := b.Column(idCol).(interface {
			Len() int
			Value(int) string
		})
		if !ok {
			return fmt.Errorf("rollout: store %s: column id is %s, want a string column", s.name, b.Column(idCol).DataType())
		}
		addrCol := int(b.NumCols()) - 1
		addrs := b.Column(addrCol).(*array.Uint64)
		var recs []Record
		for i := 0; i < ids.Len(); i++ {
			id := ids.Value(i)
			if id <= o.After || (h.Len() == k && id >= (*h)[0].id) {
				continue
			}
			a := addrs.Value(i)
			addr := table.RowAddr{Fragment: a >> 32, Offset: uint32(a)}
			h.offer(candidate{id: strings.Clone(id), addr: addr}, k)
			if wide {
				if recs == nil {
					data := array.NewRecordBatch(arrow.NewSchema(b.Schema().Fields()[:addrCol], nil), b.Columns()[:addrCol], b.NumRows())
					rs, err := recordsFromBatch(data)
					data.Release()
					if err != nil {
						return err
					}
					recs = rs
				}
				rows[addr] = recs[i]
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return verify, rows, nil
}

// fewMatchRows is the most rows a filter's index may name for a filtered
// page of k rows to read them whole in the scan that finds them (one round
// trip, each range once) instead of their ids first and the page's rows
// after (two, the id and filter ranges read twice).
func fewMatchRows(k int) int { return max(2*k, 64) }

// fragmentsOutside returns the ids of base's fragments not in done (the
// ones an index walk did not cover, which the scan must read).
func fragmentsOutside(base *table.Dataset, done *roaring.Bitmap) *roaring.Bitmap {
	out := roaring.New()
	for _, f := range base.Fragments() {
		if !done.Contains(uint32(f.GetId())) {
			out.Add(uint32(f.GetId()))
		}
	}
	return out
}

// sortByAddr sorts addrs by address and at with it.
func sortByAddr(addrs []table.RowAddr, at []int) {
	idx := make([]int, len(addrs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return addrs[a].Compare(addrs[b]) })
	sa, st := make([]table.RowAddr, len(addrs)), make([]int, len(at))
	for i, j := range idx {
		sa[i], st[i] = addrs[j], at[j]
	}
	copy(addrs, sa)
	copy(at, st)
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

// checkFilter makes sure rows chosen through an index hold the filter's
// value: an index that named another row is corruption, reported, never a
// wrong row returned.
func checkFilter(b arrow.RecordBatch, f Filter) error {
	idx := b.Schema().FieldIndices(f.Column)
	if len(idx) == 0 {
		return nil
	}
	col, ok := b.Column(idx[0]).(interface {
		IsNull(int) bool
		Value(int) string
	})
	if !ok {
		return fmt.Errorf("column %s is %s, want a string column", f.Column, b.Column(idx[0]).DataType())
	}
	for i := 0; i < int(b.NumRows()); i++ {
		if col.IsNull(i) || col.Value(i) != f.Value {
			return fmt.Errorf("%w: the %s index names a row whose %s is not %q", index.ErrCorrupt, f.Column, f.Column, f.Value)
		}
	}
	return nil
}
