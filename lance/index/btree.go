package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// File and column names of a BTree index, as Lance writes them.
const (
	PagesFile   = "page_data.lance"
	LookupFile  = "page_lookup.lance"
	IndicesDir  = "_indices/"
	valuesCol   = "values"
	idsCol      = "ids"
	batchSizeMD = "batch_size"
	// LanceBatchSize is Lance's DEFAULT_BTREE_BATCH_SIZE: the rows per
	// page of page_data.lance when page_lookup.lance carries no batch_size.
	LanceBatchSize = 4096
	// DefaultBatchSize is the rows per page of the indexes we build. Lance
	// reads batch_size from page_lookup.lance, so any size works for
	// LanceDB; a smaller page than Lance's makes a cold key lookup read and
	// decode a sixteenth of the bytes (a merge probes up to one page per
	// merged row, and at 10M rows most of those pages are not cached).
	DefaultBatchSize = 256
	// BTreeDetailsURL is the type URL of IndexMetadata.index_details for a
	// BTree index (an empty lance.table.BTreeIndexDetails message).
	BTreeDetailsURL = "/lance.table.BTreeIndexDetails"
	// btreeIndexVersion is IndexMetadata.index_version for BTree indexes.
	btreeIndexVersion = 0
)

// ErrCorrupt marks an index file that cannot be decoded as a BTree index.
var ErrCorrupt = errors.New("lance/index: corrupt index")

// BTree is an opened BTree index: its page lookup in memory, its pages read
// on demand (and cached). It is immutable, like the files it reads.
type BTree struct {
	uuid      string
	pages     *file.Reader
	valuesID  int32
	idsID     int32
	batchSize int64
	rows      int64
	// Per page of page_data: first and last value (null when the page
	// starts with nulls / is all null); pages are sorted ascending, nulls
	// first, so maxs is non-decreasing once non-null.
	mins, maxs       []string
	minNull, maxNull []bool
	// valueAt[i] estimates where page i's values start among page_data's,
	// in half bytes: each page's rows are taken at the mean length of its
	// first and last value (valueBytes).
	valueAt   []int64
	cache     *pageCache
	prewarmed atomic.Bool // a prewarm was considered (Finder.prewarm)
}

// indexDir is the directory of index files for uuid.
func indexDir(uuid string) string { return IndicesDir + uuid + "/" }

// openFile opens one Lance file of an index. Its size and its metadata come
// with one read of its tail (one request on S3 and GCS), not a Head and
// then a read that depends on it.
func openFile(ctx context.Context, store objstore.Store, key string) (*file.Reader, error) {
	tail, info, err := objstore.GetTail(ctx, store, key, file.TailReadSize)
	if err != nil {
		return nil, fmt.Errorf("lance/index: %s: %w", key, err)
	}
	r, err := file.OpenTail(ctx, table.HeldSource(store, key), info.Size, tail)
	if err != nil {
		return nil, fmt.Errorf("lance/index: open %s: %w", key, err)
	}
	return r, nil
}

// OpenBTree opens the BTree index stored under _indices/{uuid}/.
func OpenBTree(ctx context.Context, store objstore.Store, uuid string, cache *pageCache) (*BTree, error) {
	// The two files open in parallel: one round trip, not one each.
	var (
		lookup *file.Reader
		lerr   error
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		lookup, lerr = openFile(ctx, store, indexDir(uuid)+LookupFile)
	}()
	pages, err := openFile(ctx, store, indexDir(uuid)+PagesFile)
	wg.Wait()
	if lerr != nil {
		return nil, lerr
	}
	if err != nil {
		return nil, err
	}
	t := &BTree{uuid: uuid, pages: pages, batchSize: LanceBatchSize, rows: pages.NumRows(), cache: cache}
	if bs, ok := lookup.Schema().Metadata[batchSizeMD]; ok {
		n, err := strconv.ParseInt(string(bs), 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: %s: batch_size %q", ErrCorrupt, uuid, bs)
		}
		t.batchSize = n
	}
	ps := pages.Schema()
	if len(ps.Fields) != 2 || !isString(ps.Fields[0].Type) || ps.Fields[1].Type.ID() != arrow.UINT64 {
		return nil, fmt.Errorf("%w: %s: page_data is not (string values, uint64 ids); only string keys are supported", ErrCorrupt, uuid)
	}
	t.valuesID, t.idsID = ps.Fields[0].ID, ps.Fields[1].ID
	ls := lookup.Schema()
	if len(ls.Fields) < 4 || !isString(ls.Fields[0].Type) || !isString(ls.Fields[1].Type) {
		return nil, fmt.Errorf("%w: %s: page_lookup is not (min, max, null_count, page_idx)", ErrCorrupt, uuid)
	}
	n := lookup.NumRows()
	rec, err := lookup.Read(ctx, []int32{ls.Fields[0].ID, ls.Fields[1].ID, ls.Fields[3].ID}, 0, n)
	if err != nil {
		return nil, fmt.Errorf("lance/index: read %s lookup: %w", uuid, err)
	}
	defer rec.Release()
	mins, maxs := strs(rec.Column(0)), strs(rec.Column(1))
	idx, ok := rec.Column(2).(*array.Uint32)
	if !ok {
		return nil, fmt.Errorf("%w: %s: page_idx is %s", ErrCorrupt, uuid, rec.Column(2).DataType())
	}
	// Lance writes one lookup row per page, page_idx ascending from 0.
	for i := 0; i < int(n); i++ {
		if int(idx.Value(i)) != i {
			return nil, fmt.Errorf("%w: %s: lookup row %d names page %d", ErrCorrupt, uuid, i, idx.Value(i))
		}
		t.mins = append(t.mins, mins.value(i))
		t.maxs = append(t.maxs, maxs.value(i))
		t.minNull = append(t.minNull, mins.IsNull(i))
		t.maxNull = append(t.maxNull, maxs.IsNull(i))
	}
	if want := (t.rows + t.batchSize - 1) / t.batchSize; want != n {
		return nil, fmt.Errorf("%w: %s: %d lookup rows for %d values in pages of %d", ErrCorrupt, uuid, n, t.rows, t.batchSize)
	}
	t.valueAt = make([]int64, n+1)
	for i := range int(n) {
		rows := min(t.batchSize, t.rows-int64(i)*t.batchSize)
		t.valueAt[i+1] = t.valueAt[i] + rows*t.rowWidth(i)
	}
	return t, nil
}

// rowWidth is twice the estimated length of page i's values: the sum of
// its first and last value's.
func (t *BTree) rowWidth(i int) int64 { return int64(len(t.mins[i]) + len(t.maxs[i])) }

// valueBytes is the pages' file.ReadOptions.ValueBytes: where the values of
// rows [lo, hi) lie among page_data's, from the lookup's page bounds.
// Sorted keys whose length changes along the index (ids of 10, then 11
// characters) sit far from where the file's mean length puts them: a cold
// get at 10M rows read an index page's bytes in a second round trip.
func (t *BTree) valueBytes(field int32, lo, hi int64) (start, end int64, ok bool) {
	if field != t.valuesID || lo < 0 || hi <= lo || hi > t.rows || len(t.valueAt) == 0 {
		return 0, 0, false
	}
	at := func(row int64) int64 {
		i := min(int(row/t.batchSize), len(t.mins)-1)
		return t.valueAt[i] + (row-int64(i)*t.batchSize)*t.rowWidth(i)
	}
	return at(lo), at(hi), true
}

func isString(t arrow.DataType) bool {
	return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING
}

// strArr is a string or large-string array.
type strArr struct {
	arrow.Array
	value func(int) string
}

func strs(a arrow.Array) strArr {
	switch s := a.(type) {
	case *array.String:
		return strArr{a, s.Value}
	case *array.LargeString:
		return strArr{a, s.Value}
	}
	return strArr{a, func(int) string { return "" }}
}

// page is one decoded page of page_data, kept as Arrow arrays (values are
// compared in place, without a Go string per value). Row ids are read only
// when a search matches in the page: most probes of a merge's check find
// nothing, and skip that read.
type page struct {
	start  int64 // row of page_data where the page starts
	index  int   // page number
	values strArr
	bytes  int64

	mu  sync.Mutex
	ids *array.Uint64 // nil until first needed
}

func (p *page) size() int64 { return p.bytes }

func (p *page) len() int { return p.values.Len() }

func (t *BTree) readPage(ctx context.Context, i int) (*page, error) {
	return t.readPageOf(ctx, i, false)
}

// readPageOf returns page i from the cache, or reads it: its values, and
// with withIDs its row ids in the same read. A lookup of one value reads
// both at once, so that a cold get waits for one round trip, not a
// second one for the ids of the page its search matched.
func (t *BTree) readPageOf(ctx context.Context, i int, withIDs bool) (*page, error) {
	key := pageKey{uuid: t.uuid, page: i}
	if p, ok := t.cache.get(key); ok {
		return p, nil
	}
	s := int64(i) * t.batchSize
	e := min(s+t.batchSize, t.rows)
	cols := []int32{t.valuesID}
	if withIDs {
		cols = append(cols, t.idsID)
	}
	rec, err := t.pages.ReadWith(ctx, cols, s, e, file.ReadOptions{ValueBytes: t.valueBytes})
	if err != nil {
		return nil, fmt.Errorf("lance/index: read %s page %d: %w", t.uuid, i, err)
	}
	defer rec.Release()
	if !isString(rec.Column(0).DataType()) {
		return nil, fmt.Errorf("%w: %s page %d: values are %s", ErrCorrupt, t.uuid, i, rec.Column(0).DataType())
	}
	// The arrays outlive the record (they are retained by the page); memory
	// comes from the Go allocator and is reclaimed by the GC.
	vals := strs(rec.Column(0))
	vals.Retain()
	// The row ids are counted when read (most probed pages never need
	// them): a 10M-row id index then fits the default cache.
	p := &page{start: s, values: vals, index: i}
	for _, b := range vals.Data().Buffers() {
		if b != nil {
			p.bytes += int64(b.Len())
		}
	}
	if withIDs {
		ids, ok := rec.Column(1).(*array.Uint64)
		if !ok || ids.NullN() > 0 || int64(ids.Len()) != e-s {
			vals.Release()
			return nil, fmt.Errorf("%w: %s page %d: bad row ids", ErrCorrupt, t.uuid, i)
		}
		ids.Retain()
		p.ids = ids
		p.bytes += (e - s) * 8
	}
	t.cache.put(key, p)
	return p, nil
}

// valuesBytes is what a page's values are charged in the cache when they
// share buffers with other pages: their bytes and an offset each.
func valuesBytes(vals strArr) int64 {
	n := int64(8 * (vals.Len() + 1))
	for j := 0; j < vals.Len(); j++ {
		n += int64(len(vals.value(j)))
	}
	return n
}

// rowIDs returns the page's row ids, reading them on first use.
func (t *BTree) rowIDs(ctx context.Context, p *page) (*array.Uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids != nil {
		return p.ids, nil
	}
	n := int64(p.len())
	rec, err := t.pages.Read(ctx, []int32{t.idsID}, p.start, p.start+n)
	if err != nil {
		return nil, fmt.Errorf("lance/index: read %s row ids at %d: %w", t.uuid, p.start, err)
	}
	defer rec.Release()
	ids, ok := rec.Column(0).(*array.Uint64)
	if !ok || ids.NullN() > 0 || int64(ids.Len()) != n {
		return nil, fmt.Errorf("%w: %s page at row %d: bad row ids", ErrCorrupt, t.uuid, p.start)
	}
	ids.Retain()
	p.ids = ids
	t.cache.grow(pageKey{uuid: t.uuid, page: p.index}, n*8)
	return ids, nil
}

// search returns the first row of the page whose value is >= v (nulls
// sort first).
func (p *page) search(v string) int {
	return sort.Search(p.len(), func(j int) bool { return !p.values.IsNull(j) && p.values.value(j) >= v })
}

// entry returns row j of the page, given its row ids.
func (p *page) entry(j int, ids *array.Uint64) entry {
	if p.values.IsNull(j) {
		return entry{null: true, addr: ids.Value(j)}
	}
	return entry{v: p.values.value(j), addr: ids.Value(j)}
}

// pagesOf returns the pages that may hold v: [lo, hi).
func (t *BTree) pagesOf(v string) (lo, hi int) {
	np := len(t.maxs)
	// First page whose max >= v (null maxes come first and are below v).
	lo = sort.Search(np, func(i int) bool { return !t.maxNull[i] && t.maxs[i] >= v })
	hi = lo
	for hi < np && (t.minNull[hi] || t.mins[hi] <= v) {
		hi++
	}
	return lo, hi
}

// prefetchParallelism bounds the concurrent ReadRanges of one lookup.
const prefetchParallelism = 4

// prefetch reads the pages that may hold any of values into the cache,
// concurrently: a lookup of many keys (a merge's superseded-row check)
// then waits for about one page read, not one per key.
func (t *BTree) prefetch(ctx context.Context, values []string) error {
	if t.cache == nil || len(values) < 2 {
		return nil
	}
	seen := map[int]bool{}
	var want []int
	for _, v := range values {
		lo, hi := t.pagesOf(v)
		for p := lo; p < hi; p++ {
			if !seen[p] {
				seen[p] = true
				if _, ok := t.cache.get(pageKey{uuid: t.uuid, page: p}); !ok {
					want = append(want, p)
				}
			}
		}
	}
	if len(want) < 2 {
		return nil
	}
	// Pages are read prefetchChunk at a time with one ReadRanges each: one
	// decode setup and one wave of reads for many pages, where a Read per
	// page paid both per page (a merge at 10M rows probes ~1,000 pages).
	slices.Sort(want)
	sem := make(chan struct{}, prefetchParallelism)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for i := 0; i < len(want); i += prefetchChunk {
		ps := want[i:min(i+prefetchChunk, len(want))]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := t.readPages(ctx, ps); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// prefetchChunk is the most pages one ReadRanges of prefetch reads; the
// pages of a chunk share its buffers until all of them leave the cache.
const prefetchChunk = 64

// readPages reads the values of pages ps (ascending, distinct) in one
// ReadRanges and caches each page (without row ids).
func (t *BTree) readPages(ctx context.Context, ps []int) error {
	ranges := make([][2]int64, len(ps))
	for k, p := range ps {
		s := int64(p) * t.batchSize
		ranges[k] = [2]int64{s, min(s+t.batchSize, t.rows)}
	}
	rec, err := t.pages.ReadRanges(ctx, []int32{t.valuesID}, ranges, file.ReadOptions{})
	if err != nil {
		return fmt.Errorf("lance/index: read %s pages %d-%d: %w", t.uuid, ps[0], ps[len(ps)-1], err)
	}
	defer rec.Release()
	col := rec.Column(0)
	if !isString(col.DataType()) {
		return fmt.Errorf("%w: %s pages %d-%d: values are %s", ErrCorrupt, t.uuid, ps[0], ps[len(ps)-1], col.DataType())
	}
	var off int64
	for k, p := range ps {
		n := ranges[k][1] - ranges[k][0]
		if off+n > int64(col.Len()) {
			return fmt.Errorf("%w: %s pages %d-%d: %d values read, want more", ErrCorrupt, t.uuid, ps[0], ps[len(ps)-1], col.Len())
		}
		vals := strs(array.NewSlice(col, off, off+n))
		pg := &page{start: ranges[k][0], index: p, values: vals, bytes: valuesBytes(vals)}
		t.cache.put(pageKey{uuid: t.uuid, page: p}, pg)
		off += n
	}
	if off != int64(col.Len()) {
		return fmt.Errorf("%w: %s pages %d-%d: %d values read, want %d", ErrCorrupt, t.uuid, ps[0], ps[len(ps)-1], col.Len(), off)
	}
	return nil
}

// Equal appends to out the row addresses (fragment id << 32 | offset) of
// the rows whose value is v.
func (t *BTree) Equal(ctx context.Context, v string, out []uint64) ([]uint64, error) {
	np := len(t.maxs)
	// First page whose max >= v (null maxes come first and are below v).
	p := sort.Search(np, func(i int) bool { return !t.maxNull[i] && t.maxs[i] >= v })
	for ; p < np; p++ {
		if !t.minNull[p] && t.mins[p] > v {
			break
		}
		if t.only(p, v) {
			// A run of pages holding v alone (a frequent value): their row
			// ids are all that is needed, read in one range.
			q := p + 1
			for q < np && t.only(q, v) {
				q++
			}
			var err error
			if out, err = t.onlyIDs(ctx, p, q, out); err != nil {
				return out, err
			}
			p = q - 1
			continue
		}
		pg, err := t.readPageOf(ctx, p, true)
		if err != nil {
			return out, err
		}
		j := pg.search(v)
		if j >= pg.len() || pg.values.IsNull(j) || pg.values.value(j) != v {
			continue
		}
		ids, err := t.rowIDs(ctx, pg)
		if err != nil {
			return out, err
		}
		for ; j < pg.len() && !pg.values.IsNull(j) && pg.values.value(j) == v; j++ {
			out = append(out, ids.Value(j))
		}
	}
	return out, nil
}

// cached reports whether a lookup of v (Equal) finds its first page in
// the cache, or has no page to read: then it makes no request.
func (t *BTree) cached(v string) bool {
	np := len(t.maxs)
	p := sort.Search(np, func(i int) bool { return !t.maxNull[i] && t.maxs[i] >= v })
	if p >= np || (!t.minNull[p] && t.mins[p] > v) {
		return true
	}
	if _, ok := t.cache.get(pageKey{uuid: t.uuid, page: p}); ok {
		return true
	}
	_, ok := t.cache.get(pageKey{uuid: t.uuid, page: p, idsOnly: true})
	return ok
}

// only reports whether every row of page p holds v: its first and last
// values are v (pages are sorted, nulls first).
func (t *BTree) only(p int, v string) bool {
	return !t.minNull[p] && !t.maxNull[p] && t.mins[p] == v && t.maxs[p] == v
}

// onlyIDs appends to out the row ids of pages [p, q), pages that hold one
// value each: from the cache (a whole page or its row ids alone), the
// others read as few ranges of the ids column, without their values.
func (t *BTree) onlyIDs(ctx context.Context, p, q int, out []uint64) ([]uint64, error) {
	for p < q {
		if ids, ok, err := t.cachedIDs(ctx, p); err != nil {
			return out, err
		} else if ok {
			out = append(out, ids.Uint64Values()...)
			p++
			continue
		}
		// Pages [p, e) are not cached: one read.
		e := p + 1
		for e < q {
			if _, ok := t.cache.get(pageKey{uuid: t.uuid, page: e}); ok {
				break
			}
			if _, ok := t.cache.get(pageKey{uuid: t.uuid, page: e, idsOnly: true}); ok {
				break
			}
			e++
		}
		s, end := int64(p)*t.batchSize, min(int64(e)*t.batchSize, t.rows)
		rec, err := t.pages.Read(ctx, []int32{t.idsID}, s, end)
		if err != nil {
			return out, fmt.Errorf("lance/index: read %s row ids of pages %d-%d: %w", t.uuid, p, e-1, err)
		}
		ids, ok := rec.Column(0).(*array.Uint64)
		if !ok || ids.NullN() > 0 || int64(ids.Len()) != end-s {
			rec.Release()
			return out, fmt.Errorf("%w: %s pages %d-%d: bad row ids", ErrCorrupt, t.uuid, p, e-1)
		}
		out = append(out, ids.Uint64Values()...)
		// Each page's slice shares the one buffer; it is counted per page.
		for i := p; i < e; i++ {
			ps, pe := int64(i)*t.batchSize-s, min(int64(i+1)*t.batchSize, t.rows)-s
			sl := array.NewSlice(ids, ps, pe).(*array.Uint64)
			t.cache.put(pageKey{uuid: t.uuid, page: i, idsOnly: true}, &page{start: s + ps, index: i, ids: sl, bytes: (pe - ps) * 8})
		}
		rec.Release()
		p = e
	}
	return out, nil
}

// cachedIDs returns page p's row ids when the cache holds them.
func (t *BTree) cachedIDs(ctx context.Context, p int) (*array.Uint64, bool, error) {
	if pg, ok := t.cache.get(pageKey{uuid: t.uuid, page: p, idsOnly: true}); ok {
		return pg.ids, true, nil
	}
	if pg, ok := t.cache.get(pageKey{uuid: t.uuid, page: p}); ok {
		ids, err := t.rowIDs(ctx, pg)
		return ids, err == nil, err
	}
	return nil, false, nil
}

// Rows returns the number of values the index holds.
func (t *BTree) Rows() int64 { return t.rows }
