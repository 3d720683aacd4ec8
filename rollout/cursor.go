package rollout

import (
	"container/heap"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

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

// earlyBase is a pageBase run on a view of the base alone, started before
// the pending rows are known; with take, it also takes the rows it chose, so
// that the page's base rows are read in the same round trip as the pending
// generations (most of them stay on the page: pending rows displace only
// those above the pending ids that fall among them).
type earlyBase struct {
	done   chan struct{}
	h      idHeap
	k      int
	verify *Filter
	err    error
	rows   map[table.RowAddr]Record // the rows taken ahead, by address
}

func (s *Store) startPageBase(ctx context.Context, v *view, o ListOptions, k int, take bool) *earlyBase {
	e := &earlyBase{done: make(chan struct{}), h: make(idHeap, 0, k), k: k}
	go func() {
		defer close(e.done)
		var rows map[table.RowAddr]Record
		if e.verify, rows, e.err = s.pageBase(ctx, v, o, &e.h, k); e.err != nil || !take || e.h.Len() == 0 {
			return
		}
		if rows != nil {
			e.rows = rows // read whole by the scan
			return
		}
		addrs := make([]table.RowAddr, len(e.h))
		for i, c := range e.h {
			addrs[i] = c.addr
		}
		// In address order TakeRows does not reorder (the rows are kept by address).
		slices.SortFunc(addrs, table.RowAddr.Compare)
		b, err := v.base().TakeRows(ctx, addrs, baseColumns(v.base(), listColumns))
		if err != nil {
			e.err = err
			return
		}
		defer b.Release()
		if e.verify != nil {
			if err := checkFilter(b, *e.verify); err != nil {
				e.err = fmt.Errorf("rollout: store %s: %w", s.name, err)
				return
			}
		}
		rs, err := recordsFromBatch(b)
		if err != nil {
			e.err = err
			return
		}
		e.rows = make(map[table.RowAddr]Record, len(rs))
		for i := range rs {
			e.rows[addrs[i]] = rs[i]
		}
	}()
	return e
}

func (e *earlyBase) wait() (*Filter, error) {
	<-e.done
	return e.verify, e.err
}

// taken returns the row at addr if it was taken ahead (e may be nil).
func (e *earlyBase) taken(addr table.RowAddr) (Record, bool) {
	if e == nil {
		return Record{}, false
	}
	r, ok := e.rows[addr]
	return r, ok
}

// merge offers to h the early walk's rows that v shows. It reports
// whether h now holds the page: the early walk kept the k smallest base
// ids, up to its largest t; without the hidden ones they are every base
// row v shows up to t, so h is exact unless the walk was full and h is
// short of k or reaches above t (base rows above t may belong).
func (e *earlyBase) merge(h *idHeap, v *view, k int) bool {
	full := e.h.Len() == e.k
	var t string
	if full {
		t = e.h[0].id
	}
	for _, c := range e.h {
		if !v.hides(c.id) {
			h.offer(c, k)
		}
	}
	return !full || (h.Len() == k && (*h)[0].id <= t)
}

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

// ascendIndexed offers to h the base rows v shows above after, in id
// order, through the id index: it stops once h holds k ids below the next
// one, so it reads O(log n + k) index entries, not the id column. It
// returns the fragments the index covers (nil when it covers none: the
// caller scans).
func (s *Store) ascendIndexed(ctx context.Context, v *view, after string, h *idHeap, k int) (*roaring.Bitmap, error) {
	if s.finder() == nil || !slices.Contains(s.indexColumns(), ColID) {
		return nil, nil
	}
	return v.ascendBase(ctx, after, nil, h.full(k), func(id string, addr table.RowAddr) bool {
		h.offer(candidate{id: strings.Clone(id), addr: addr}, k)
		return true
	})
}

// full returns whether h holds k ids all below id (a walk in id order
// then ends: every later id is larger still).
func (h *idHeap) full(k int) func(id string) bool {
	return func(id string) bool { return h.Len() == k && id >= (*h)[0].id }
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

// skipMinOffset is the smallest offset skipOffset turns into a cursor; a
// smaller one is cheaper to count through.
var skipMinOffset = 2048

// offsetSkips counts the listings skipOffset moved forward (tests check
// that the skip is exercised).
var offsetSkips atomic.Int64

// skipOffset returns o with After moved forward and Offset reduced by the
// rows in between, so that it names the same page: a deep offset then costs
// O(log n) index page reads instead of a walk over offset ids. It counts
// exactly the rows the listing counts: live base rows of the fragments the
// id index covers (Ranker), less the ones v hides, the rows of the other
// fragments v shows (scanned), plus the pending rows (source all; v has
// read them). When the index cannot rank exactly, o is returned as is.
func (s *Store) skipOffset(ctx context.Context, v *view, o ListOptions) (ListOptions, error) {
	base := v.base()
	if s.finder() == nil || !slices.Contains(s.indexColumns(), ColID) {
		return o, nil
	}
	rk, err := s.opts.Indexes.Ranker(ctx, base, ColID)
	if err != nil || rk == nil {
		return o, err
	}
	// Rows outside the ranked fragments, and WAL rows: sorted ids.
	var uncovered int64
	var others []string
	for _, f := range base.Fragments() {
		if !rk.Covered().Contains(uint32(f.GetId())) {
			uncovered += int64(f.GetPhysicalRows())
		}
	}
	if uncovered > maxSkipScan {
		return o, nil
	}
	if uncovered > 0 {
		frags := roaring.New()
		for _, f := range base.Fragments() {
			if !rk.Covered().Contains(uint32(f.GetId())) {
				frags.Add(uint32(f.GetId()))
			}
		}
		// The id column alone, the hidden ids dropped here (not by the
		// scan, which would read the column twice).
		opts := table.ScanOptions{Columns: []string{ColID}, Fragments: frags}
		err := base.Scan(ctx, opts, func(b arrow.RecordBatch) error {
			ids, ok := b.Column(0).(interface {
				Len() int
				Value(int) string
			})
			if !ok {
				return fmt.Errorf("rollout: store %s: column id is %s, want a string column", s.name, b.Column(0).DataType())
			}
			for i := 0; i < ids.Len(); i++ {
				if !v.hides(ids.Value(i)) {
					others = append(others, strings.Clone(ids.Value(i)))
				}
			}
			return nil
		})
		if err != nil {
			return o, err
		}
	}
	for _, r := range v.rows {
		others = append(others, r.id())
	}
	slices.Sort(others)
	// Base rows of ranked fragments the view hides are not listed: their
	// ids, sorted.
	hidden, err := v.hiddenBaseIDs(ctx, rk.Covered())
	if err != nil {
		return o, err
	}
	// upTo is the number of listed rows whose id is <= id.
	upTo := func(id string) (int64, error) {
		succ := id + "\x00" // the smallest string above id
		n, err := rk.Below(ctx, succ)
		if err != nil {
			return 0, err
		}
		n -= int64(sort.SearchStrings(hidden, succ))
		n += int64(sort.SearchStrings(others, succ))
		return n, nil
	}
	var before int64
	if o.After != "" {
		if before, err = upTo(o.After); err != nil {
			return o, err
		}
	}
	target := before + int64(o.Offset) // rows at or below the page's predecessor
	// The last pivot at or below target: binary search (upTo is monotone).
	pivots := rk.Pivots()
	lo, hi := sort.SearchStrings(pivots, o.After+"\x00"), len(pivots) // pivots above After
	best, bestN := "", int64(-1)
	var serr error
	i := sort.Search(hi-lo, func(i int) bool {
		if serr != nil {
			return true
		}
		n, err := upTo(pivots[lo+i])
		if err != nil {
			serr = err
			return true
		}
		if n <= target {
			return false
		}
		return true
	})
	if serr != nil {
		return o, serr
	}
	if i == 0 {
		return o, nil // no pivot between After and the page
	}
	best = pivots[lo+i-1]
	if bestN, err = upTo(best); err != nil {
		return o, err
	}
	o.After, o.Offset = best, int(target-bestN)
	offsetSkips.Add(1)
	return o, nil
}

// maxSkipScan bounds the rows of fragments no index covers that skipOffset
// reads to count them; beyond it the listing counts through as before.
const maxSkipScan = 1 << 20

// walkFiltered offers to h the base rows v shows above after whose column
// f.Column holds f.Value, in id order, by walking the id index and keeping
// the rows the filter column's index names. A filtered page then costs
// O(k · rows/matches) index entries, which stays flat as the table grows,
// instead of reading the id of every matching row (O(matches)); it is
// used only when it is the cheaper of the two. It returns the fragments it
// answered for (nil: it did not walk, the caller scans as before), and
// when it did not walk, few: the filter's index covers every fragment and
// names at most fewMatchRows(k) rows (the scan may read them whole).
func (s *Store) walkFiltered(ctx context.Context, v *view, f Filter, after string, h *idHeap, k int) (walked *roaring.Bitmap, few bool, err error) {
	base := v.base()
	cols := s.indexColumns()
	if s.finder() == nil || !slices.Contains(cols, f.Column) {
		return nil, false, nil
	}
	if fd := base.Schema().Field(f.Column); fd == nil || !isStringField(fd.Type) {
		return nil, false, nil
	}
	coveredF, all, err := s.opts.Indexes.Addrs(ctx, base, f.Column, f.Value)
	if err != nil || coveredF == nil {
		return nil, false, err
	}
	few = len(all) <= fewMatchRows(k) && fragmentsOutside(base, coveredF).IsEmpty()
	if !slices.Contains(cols, ColID) {
		return nil, few, nil
	}
	byID, err := index.Covered(base, ColID)
	if err != nil || byID.IsEmpty() {
		return nil, few, err
	}
	both := roaring.And(byID, coveredF)
	var runs, indexed int64
	for _, fr := range base.Fragments() {
		if both.Contains(uint32(fr.GetId())) {
			indexed += int64(fr.GetPhysicalRows())
		}
	}
	// The matches of fragments both indexes cover, ascending.
	match := all[:0]
	lastFrag, lastIn := uint64(1<<63), false
	for _, a := range all {
		if frag := a >> 32; frag != lastFrag {
			lastFrag, lastIn = frag, both.Contains(uint32(frag))
		}
		if !lastIn {
			continue
		}
		if len(match) == 0 || a != match[len(match)-1]+1 {
			runs++
		}
		match = append(match, a)
	}
	matches := int64(len(match))
	if matches == 0 {
		return nil, few, nil // the scan answers from the index alone
	}
	// Expected entries walked for k matches, against the reads of the
	// matching rows (about one range read per run of consecutive rows and
	// column, worth ~walkEntriesPerRun entries of the walk).
	if walk := int64(k) * indexed / matches; walk > runs*walkEntriesPerRun {
		return nil, few, nil
	}
	_, err = v.ascendBase(ctx, after, index.NewAddrSet(match), h.full(k), func(id string, addr table.RowAddr) bool {
		h.offer(candidate{id: strings.Clone(id), addr: addr}, k)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	filteredWalks.Add(1)
	return both, false, nil
}

// walkEntriesPerRun is how many id index entries a walk reads for the cost
// of reading one run of matching rows (measured: a run costs two range
// reads and their decoding, an entry a map probe).
var walkEntriesPerRun int64 = 1000

// filteredWalks counts the listings walkFiltered answered (for tests).
var filteredWalks atomic.Int64

func isStringField(t arrow.DataType) bool {
	return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING
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
