package index

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/lance-context/lance-context/internal/bgwork"
	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// DefaultCacheBytes bounds the decoded index pages that the Finders of a
// Cache keep together (NewFinder(0) uses the default Cache), unless
// CacheOptions.Bytes (LC_INDEX_CACHE_BYTES) says otherwise. Pages stay
// Arrow arrays (one values buffer, one offsets buffer, row ids), about
// 28 bytes per entry of a 16-byte key. Measured on the 10M-row bench store
// (bench/scale), every page of its id, rollout_id and problem_id indexes
// cached: 581 MB charged, 687 MB of Go heap (the page structs are the
// difference). 1 GiB holds them, where the former 256 MiB (per store)
// held under half and a random point read decoded a cold page nearly
// every time. Lance's own default index cache is 6 GiB (LanceDB Session:
// index_cache_size_bytes). Without a size set the cache is also at most a
// quarter of the Go memory limit (GOMEMLIMIT; internal/gctune sets 3/4 of
// a container's memory), so that a small container's worker does not fill
// its memory with index pages (the prewarm fills the cache in seconds).
const DefaultCacheBytes = 1 << 30

// defaultCacheBytes is a Cache's size without one set, under a Go memory
// limit of limit bytes.
func defaultCacheBytes(limit int64) int64 {
	return min(DefaultCacheBytes, limit/4)
}

// CacheOptions configure a Cache. The zero value is the default. The
// process reads them from the environment in cmd (internal/config):
// Bytes is LC_INDEX_CACHE_BYTES (there 0 disables caching) and NoPrewarm
// LC_INDEX_PREWARM ("off", "0" or "false").
type CacheOptions struct {
	// Bytes bounds the decoded pages the Cache keeps: 0, the default
	// (DefaultCacheBytes, at most a quarter of the Go memory limit);
	// < 0, none.
	Bytes int64
	// NoPrewarm turns index prewarming off (see Finder.prewarm).
	NoPrewarm bool
}

// Cache is what the Finders made from it share: the page cache (bounded
// for all of them together; index uuids are unique, so Finders of
// different stores can share it) and the prewarms, one at a time. A
// process makes one (DefaultCache unless it installs its own with
// SetDefaultCache) and passes it to its stores; a test that must not
// share pages with others makes its own.
type Cache struct {
	pages    *pageCache
	prewarm  bool
	slot     chan struct{} // one prewarm at a time: they are background work, and a store opening several indexes at once must not take every CPU from the reads that opened them
	prewarms *bgwork.Group // prewarms started and not yet done
}

// NewCache returns a Cache with options o.
func NewCache(o CacheOptions) *Cache {
	n := o.Bytes
	switch {
	case n == 0:
		n = defaultCacheBytes(debug.SetMemoryLimit(-1))
	case n < 0:
		n = 0
	}
	return &Cache{pages: NewPageCache(n), prewarm: !o.NoPrewarm, slot: make(chan struct{}, 1), prewarms: new(bgwork.Group)}
}

// Bytes returns the most bytes of pages c keeps.
func (c *Cache) Bytes() int64 { return c.pages.max }

var defaultCache atomic.Pointer[Cache]

// The default Cache's pages are the process's index cache: the collector's
// goal leaves them out (gctune.Tune).
func init() {
	gctune.RegisterHeld(func() int64 {
		if c := defaultCache.Load(); c != nil {
			return c.pages.held()
		}
		return 0
	})
}

// DefaultCache returns the Cache of NewFinder(0): the one SetDefaultCache
// installed, else one with the zero CacheOptions.
func DefaultCache() *Cache {
	if c := defaultCache.Load(); c != nil {
		return c
	}
	defaultCache.CompareAndSwap(nil, NewCache(CacheOptions{}))
	return defaultCache.Load()
}

// SetDefaultCache makes c the Cache of NewFinder(0), for Finders made
// after it. The process calls it once at start, with the options it read
// from the environment.
func SetDefaultCache(c *Cache) { defaultCache.Store(c) }

// maxTrees bounds the opened indexes a Finder keeps (lookup tables only;
// their pages live in the page cache).
const maxTrees = 256

// Finder answers key lookups through the BTree indexes of a table, for
// table.ScanOptions.Index. It caches opened indexes by uuid and decoded
// pages by (uuid, page): index files never change once written.
type Finder struct {
	owner *Cache     // its prewarm setting and slot
	cache *pageCache // owner's pages, or its own (NewFinder(n > 0))
	mu    sync.Mutex
	trees map[treeKey]*BTree
	// segs memoizes segments per opened version and column: a version is
	// immutable, and parsing its index section and fragment bitmaps on
	// every lookup cost more than the lookup itself once a table has many
	// fragments and index segments.
	segs map[segKey]segMemo
	// newest is, per table and column, the newest version whose segments
	// were opened and their uuids: when a newer version leaves one out (a
	// compaction or a rebuild replaced it), its pages are dropped from the
	// page cache (forgetDropped), where they would stay until the cache
	// filled.
	newest map[newestKey]newestSegs
}

type newestKey struct {
	store  any // the table's objstore.Store (comparable ones only)
	column string
}

type newestSegs struct {
	version uint64
	uuids   []string
}

type segKey struct {
	d      *table.Dataset
	column string
}

type segMemo struct {
	segs    []segment
	covered *roaring.Bitmap
}

// maxSegMemos bounds the memoized versions and columns (each holds its
// version alive).
const maxSegMemos = 64

// treeKey names an opened index. A uuid is unique across tables and an
// index's files never change, so the uuid alone is the key (store values
// need not be comparable).
type treeKey = string

// NewFinder returns a Finder with a page cache of its own holding up to
// cacheBytes, or, when cacheBytes <= 0, one sharing the default Cache's
// pages (see DefaultCacheBytes). Either way it prewarms as the default
// Cache says, in its slot.
func NewFinder(cacheBytes int64) *Finder {
	d := DefaultCache()
	if cacheBytes > 0 {
		return newFinder(d, NewPageCache(cacheBytes))
	}
	return d.NewFinder()
}

// NewFinder returns a Finder that keeps its pages in c.
func (c *Cache) NewFinder() *Finder { return newFinder(c, c.pages) }

func newFinder(c *Cache, pages *pageCache) *Finder {
	return &Finder{owner: c, cache: pages, trees: map[treeKey]*BTree{}, segs: map[segKey]segMemo{}, newest: map[newestKey]newestSegs{}}
}

// IsBTree reports whether m describes a BTree scalar index.
func IsBTree(m *pb.IndexMetadata) bool {
	u := m.GetIndexDetails().GetTypeUrl()
	return strings.HasSuffix(u, ".BTreeIndexDetails")
}

// BTreeIndexes returns the BTree indexes of d on column (a single-column
// index on that field). LanceDB may keep several (delta segments).
func BTreeIndexes(d *table.Dataset, column string) ([]*pb.IndexMetadata, error) {
	f := d.Schema().Field(column)
	if f == nil {
		return nil, nil
	}
	all, err := d.Indexes()
	if err != nil {
		return nil, err
	}
	var out []*pb.IndexMetadata
	for _, m := range all {
		if len(m.GetFields()) == 1 && m.GetFields()[0] == f.ID && IsBTree(m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// liveFragments returns the fragment ids of d.
func liveFragments(d *table.Dataset) *roaring.Bitmap {
	bm := roaring.New()
	for _, f := range d.Fragments() {
		bm.Add(uint32(f.GetId()))
	}
	return bm
}

// Covered returns the fragments of d that BTree indexes on column cover.
func Covered(d *table.Dataset, column string) (*roaring.Bitmap, error) {
	idxs, err := BTreeIndexes(d, column)
	if err != nil {
		return nil, err
	}
	out := roaring.New()
	for _, m := range idxs {
		bm, err := table.FragmentBitmap(m)
		if err != nil {
			return nil, err
		}
		out.Or(bm)
	}
	out.And(liveFragments(d))
	return out, nil
}

func (f *Finder) tree(ctx context.Context, store objstore.Store, uuid string) (*BTree, error) {
	return f.treeSized(ctx, store, uuid, 0)
}

// treeOf opens index m of d, its page_data file's size guessed from the
// rows of d's fragments it covers.
func (f *Finder) treeOf(ctx context.Context, d *table.Dataset, m *pb.IndexMetadata) (*BTree, error) {
	return f.treeSized(ctx, d.Store(), uuidString(m), indexRows(d, m))
}

// indexRows is the rows of d's fragments in m's bitmap: about the rows of
// its page_data file (0 when unknown).
func indexRows(d *table.Dataset, m *pb.IndexMetadata) int64 {
	bm, err := table.FragmentBitmap(m)
	if err != nil {
		return 0
	}
	var n int64
	for _, fr := range d.Fragments() {
		if bm.Contains(uint32(fr.GetId())) {
			n += int64(fr.GetPhysicalRows())
		}
	}
	return n
}

// The speculative tail of a page_data file expected to be large: what
// its opener reads first (lance/file reads a file's last 64 KiB for its
// footer and metadata) and no more. Ours write each column as one Lance
// page (529 bytes of metadata at a million rows); a writer that makes a
// Lance page of each index page (LanceDB's 4,096 rows) adds up to
// pageMetaBytes a page and column. A file of fewer than largePagesRows
// rows (under ~1 MiB) is read whole instead, as small index files are.
const (
	largePagesRows = 1 << 16
	pageMetaBytes  = 48
	footerSlack    = 64 << 10
)

// pagesTail is the tail to preload of a page_data file of about rows rows,
// 0 to let the store read it as it reads small files.
func pagesTail(rows int64) int64 {
	if rows < largePagesRows {
		return 0
	}
	return footerSlack + 2*pageMetaBytes*(rows/LanceBatchSize+1)
}

func (f *Finder) treeSized(ctx context.Context, store objstore.Store, uuid string, rows int64) (*BTree, error) {
	k := uuid
	f.mu.Lock()
	t, ok := f.trees[k]
	f.mu.Unlock()
	if ok {
		return t, nil
	}
	// Both files of the index are needed; a store that reads small files
	// whole reads them in one round trip, not one after the other.
	if p, ok := store.(preloader); ok {
		if tail := pagesTail(rows); tail > 0 {
			// A large page_data file: its metadata, beside the lookup
			// file read whole (a 10M-row store's cold get read a MiB
			// of each of its 11 segments' files, 13.7 MB in all).
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); p.PreloadTails(ctx, tail, indexDir(uuid)+PagesFile) }()
			p.Preload(ctx, indexDir(uuid)+LookupFile)
			wg.Wait()
		} else {
			p.Preload(ctx, indexDir(uuid)+LookupFile, indexDir(uuid)+PagesFile)
		}
	}
	t, err := OpenBTree(ctx, store, uuid, f.cache)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if o, ok := f.trees[k]; ok { // opened meanwhile by another lookup
		f.mu.Unlock()
		return o, nil
	}
	if len(f.trees) >= maxTrees {
		for k := range f.trees { // evict an arbitrary one; reopening is cheap
			delete(f.trees, k)
			break
		}
	}
	f.trees[k] = t
	f.mu.Unlock()
	return t, nil
}

// preloader is a store that can read several small objects ahead in one
// round trip (objstore.SmallFiles).
type preloader interface {
	Preload(ctx context.Context, keys ...string)
	PreloadTails(ctx context.Context, tail int64, keys ...string)
}

// Warm opens the BTree indexes of d on columns (those covering a live
// fragment) in parallel and keeps them, so that a first lookup after a new
// version finds them open. Errors are left to the lookups.
func (f *Finder) Warm(ctx context.Context, d *table.Dataset, columns ...string) {
	var wg sync.WaitGroup
	for _, c := range columns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = f.segments(ctx, d, c)
		}()
	}
	wg.Wait()
}

// segment is one BTree index of a column (the whole index or a delta) and
// the live fragments of a version it answers for.
type segment struct {
	t  *BTree
	bm *roaring.Bitmap
}

// segments opens the BTree indexes on column that cover a live fragment of
// d; covered is the union of their fragments, nil when there is none. An
// index answers only for the fragments of its bitmap: rows it holds for
// others (removed by a compaction) are ignored by every caller.
func (f *Finder) segments(ctx context.Context, d *table.Dataset, column string) (segs []segment, covered *roaring.Bitmap, err error) {
	k := segKey{d, column}
	f.mu.Lock()
	m, ok := f.segs[k]
	f.mu.Unlock()
	if ok {
		return m.segs, m.covered, nil
	}
	if segs, covered, err = f.openSegments(ctx, d, column); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	if len(f.segs) >= maxSegMemos {
		for k := range f.segs { // evict an arbitrary one; recomputing is cheap
			delete(f.segs, k)
			break
		}
	}
	f.segs[k] = segMemo{segs, covered}
	dropped := f.noteNewest(d, column, segs)
	f.mu.Unlock()
	f.cache.forget(dropped)
	return segs, covered, nil
}

// maxNewest bounds the tables and columns noteNewest follows.
const maxNewest = 4096

// noteNewest records segs as the segments of d's column when d is the
// newest version of its table seen, and returns the uuids the version it
// follows had and it has not. f.mu is held.
func (f *Finder) noteNewest(d *table.Dataset, column string, segs []segment) map[string]bool {
	st := any(d.Store())
	if st == nil || !reflect.TypeOf(st).Comparable() {
		return nil
	}
	k := newestKey{st, column}
	prev, ok := f.newest[k]
	if ok && d.Version() <= prev.version {
		return nil
	}
	uuids := make([]string, len(segs))
	for i, s := range segs {
		uuids[i] = s.t.uuid
	}
	if !ok && len(f.newest) >= maxNewest {
		for k := range f.newest { // forget an arbitrary table: its next version only drops nothing
			delete(f.newest, k)
			break
		}
	}
	f.newest[k] = newestSegs{d.Version(), uuids}
	var dropped map[string]bool
	for _, u := range prev.uuids {
		if !slices.Contains(uuids, u) {
			if dropped == nil {
				dropped = map[string]bool{}
			}
			dropped[u] = true
			delete(f.trees, u)
		}
	}
	return dropped
}

// openSegments is segments without the memo. The bitmaps it returns are
// shared by every later call: callers only read them.
func (f *Finder) openSegments(ctx context.Context, d *table.Dataset, column string) (segs []segment, covered *roaring.Bitmap, err error) {
	idxs, err := BTreeIndexes(d, column)
	if err != nil || len(idxs) == 0 {
		return nil, nil, err
	}
	live := liveFragments(d)
	covered = roaring.New()
	var metas []*pb.IndexMetadata // of segs
	for _, m := range idxs {
		bm, err := table.FragmentBitmap(m)
		if err != nil {
			return nil, nil, err
		}
		bm.And(live)
		// Each fragment is answered by one index: two may cover it (a
		// user's index of another name, or a table an older build left
		// with overlapping segments), and a walk would give its rows twice.
		bm.AndNot(covered)
		if bm.IsEmpty() {
			continue
		}
		segs = append(segs, segment{bm: bm})
		metas = append(metas, m)
		covered.Or(bm)
	}
	if covered.IsEmpty() {
		return nil, nil, nil
	}
	// The segments open at once: a cold lookup waits for one open, not
	// one per segment of an index that deltas have split.
	errs := make([]error, len(segs))
	eachAtOnce(len(segs), nil, func(i int) {
		segs[i].t, errs[i] = f.treeOf(ctx, d, metas[i])
	})
	for i, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("lance/index: index %s on %s: %w", metas[i].GetName(), column, err)
		}
	}
	return segs, covered, nil
}

// eachAtOnce runs fn(0) ... fn(n-1) and waits for them: concurrently when
// more than one of them reads (reads(i)), so a segment's reads wait for
// no other segment's; else in turn on the caller's goroutine (a lookup in
// cached pages takes less than starting goroutines for it: 1.3 µs against
// 3.4 µs over three segments). A nil reads counts every i as reading.
func eachAtOnce(n int, reads func(i int) bool, fn func(i int)) {
	cold := 0
	for i := 0; i < n && cold < 2; i++ {
		if reads == nil || reads(i) {
			cold++
		}
	}
	if cold < 2 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

// Find implements table.RowFinder: the fragments of d that BTree indexes
// on column cover, and in them the offsets of rows whose value is one of
// values (deleted rows included; the scan drops them). covered is nil when
// no index covers any fragment of d.
func (f *Finder) Find(ctx context.Context, d *table.Dataset, column string, values []string) (*roaring.Bitmap, map[uint64][]uint32, error) {
	segs, covered, err := f.segments(ctx, d, column)
	if err != nil || covered == nil {
		return nil, nil, err
	}
	found := make([][]uint64, len(segs))
	errs := make([]error, len(segs))
	if len(values) < keyFilterMinValues {
		// A reader's lookup: every segment at once, so a cold get waits
		// for one page read, not one per segment (a 10M-row store's id
		// index had 11 after its merges).
		reads := func(i int) bool {
			for _, v := range values {
				if !segs[i].t.cached(v) {
					return true
				}
			}
			return false
		}
		eachAtOnce(len(segs), reads, func(i int) {
			t := segs[i].t
			f.prewarm(t)
			if errs[i] = t.prefetch(ctx, values); errs[i] != nil {
				return
			}
			for _, v := range values {
				if found[i], errs[i] = t.Equal(ctx, v, found[i]); errs[i] != nil {
					return
				}
			}
		})
	} else {
		// A batch (a merge's check), one segment after another (each
		// prefetches its pages in parallel): the values the segment's key
		// filter rules out are not looked up; it starts no prewarm.
		var maybe []string
		for i, sg := range segs {
			t := sg.t
			look := values
			if kf := t.keyFilter(ctx); kf != nil {
				maybe = maybe[:0]
				for _, v := range values {
					if kf.mayHold(v) {
						maybe = append(maybe, v)
					}
				}
				look = maybe
			}
			if err := t.prefetch(ctx, look); err != nil {
				return nil, nil, err
			}
			for _, v := range look {
				if found[i], err = t.Equal(ctx, v, found[i]); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	rows := map[uint64][]uint32{}
	for i, sg := range segs {
		if errs[i] != nil {
			return nil, nil, errs[i]
		}
		for _, a := range found[i] {
			// An index answers only for the fragments of its bitmap; rows it
			// holds for other fragments (removed by a compaction) are ignored.
			if frag := a >> 32; sg.bm.Contains(uint32(frag)) {
				rows[frag] = append(rows[frag], uint32(a))
			}
		}
	}
	for k, offs := range rows {
		slices.Sort(offs)
		rows[k] = slices.Compact(offs)
	}
	return covered, rows, nil
}

// Addrs returns the fragments of d that BTree indexes on column cover,
// and in them the row addresses (fragment id << 32 | offset) of the rows
// whose value is v, ascending (deleted rows included; the caller drops
// them). covered is nil when no index covers any fragment of d. It is Find
// for one value, without a map per fragment.
func (f *Finder) Addrs(ctx context.Context, d *table.Dataset, column, v string) (covered *roaring.Bitmap, addrs []uint64, err error) {
	segs, covered, err := f.segments(ctx, d, column)
	if err != nil || covered == nil {
		return nil, nil, err
	}
	// Each segment's lookup reads its own page: all of them at once, so a
	// cold get waits for one page read, not one per segment.
	found := make([][]uint64, len(segs))
	errs := make([]error, len(segs))
	look := func(i int) {
		f.prewarm(segs[i].t)
		found[i], errs[i] = segs[i].t.Equal(ctx, v, nil)
	}
	eachAtOnce(len(segs), func(i int) bool { return !segs[i].t.cached(v) }, look)
	for i, sg := range segs {
		if errs[i] != nil {
			return nil, nil, errs[i]
		}
		lastFrag, lastIn := uint64(1<<63), false
		for _, a := range found[i] {
			// An index answers only for the fragments of its bitmap.
			if frag := a >> 32; frag != lastFrag {
				lastFrag, lastIn = frag, sg.bm.Contains(uint32(frag))
			}
			if lastIn {
				addrs = append(addrs, a)
			}
		}
	}
	if !slices.IsSorted(addrs) {
		slices.Sort(addrs)
	}
	return covered, slices.Compact(addrs), nil
}

// Result says what Update did.
type Result struct {
	Column   string
	Built    bool   // a new index was committed
	Index    string // uuid of the index now covering the column
	Version  uint64 // table version committed (0 when nothing changed)
	NewRows  int64  // rows of fragments newly covered
	Replaced int    // index segments replaced
}

// Update brings the BTree index on column up to date with the latest
// version of the table at store: it builds one when there is none, or
// merges the existing index with the fragments it does not cover yet,
// writes the new index files and commits them in place of the old index
// (one CreateIndex commit, the same name). With nothing to do it returns
// Built=false. A concurrent commit that replaced the index first makes it
// fail with table.ErrConflict; the files it wrote are then removed.
func Update(ctx context.Context, store objstore.Store, column string, opts BuildOptions) (*Result, error) {
	res, err := UpdateColumns(ctx, store, []string{column}, opts)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// UpdateColumns is Update for several columns at once: it builds each
// column's new index files, then commits them all in one CreateIndex
// commit (one manifest write instead of one per column).
//
// A conflict (another writer replaced an index this update folds, or
// indexed a fragment it covers first) builds again against the new
// latest version, a few times: usually there is nothing left to do.
func UpdateColumns(ctx context.Context, store objstore.Store, columns []string, opts BuildOptions) ([]*Result, error) {
	var err error
	for range updateAttempts {
		var res []*Result
		if res, err = updateOnce(ctx, store, columns, opts); !errors.Is(err, table.ErrConflict) {
			return res, err
		}
	}
	return nil, err
}

// updateAttempts bounds UpdateColumns' builds: each conflict means another
// writer indexed what this one would have.
const updateAttempts = 3

// updateOnce is one attempt of UpdateColumns against the latest version.
func updateOnce(ctx context.Context, store objstore.Store, columns []string, opts BuildOptions) ([]*Result, error) {
	ds, err := table.Open(ctx, store)
	if err != nil {
		return nil, err
	}
	var results []*Result
	var pend []*pending
	// Files of indexes that are certainly not committed (a build failed, or
	// the commit lost to a conflicting one) are removed. After any other
	// commit error the manifest may have been written: the files stay.
	maybeCommitted := false
	defer func() {
		if maybeCommitted {
			return
		}
		for _, p := range pend {
			if !p.committed {
				Remove(context.WithoutCancel(ctx), store, uuidString(p.add))
			}
		}
	}()
	out := prepareEach(ctx, ds, columns, opts)
	var firstErr error
	for _, b := range out {
		if b.err != nil && firstErr == nil {
			firstErr = b.err
		}
		results = append(results, b.res)
		if b.p != nil {
			pend = append(pend, b.p)
		}
	}
	if firstErr != nil {
		return nil, firstErr // the deferred cleanup removes what was built
	}
	if len(pend) == 0 {
		return results, nil
	}
	ch := &table.Change{Kind: table.KindCreateIndex}
	for _, p := range pend {
		ch.IndexAdd = append(ch.IndexAdd, p.add)
		ch.IndexRemove = append(ch.IndexRemove, p.remove...)
	}
	nd, err := table.Commit(ctx, store, func(ctx context.Context, latest *table.Dataset) (*table.Change, error) {
		return ch, nil
	})
	if err != nil {
		maybeCommitted = !errors.Is(err, table.ErrConflict)
		return nil, fmt.Errorf("lance/index: commit indexes on %v: %w", columns, err)
	}
	for _, p := range pend {
		p.committed = true
		p.res.Built, p.res.Version = true, nd.Version()
	}
	failpoint("committed")
	return results, nil
}

// built is one column's outcome of prepareEach.
type built struct {
	res *Result
	p   *pending
	err error
}

// prepareEach prepares every column's index update against ds. Columns
// are built concurrently, as many at once as there are CPUs, sharing one
// memory budget (RunBytes is split between them).
func prepareEach(ctx context.Context, ds *table.Dataset, columns []string, opts BuildOptions) []built {
	par := max(1, min(len(columns), runtime.GOMAXPROCS(0)))
	if opts.RunBytes <= 0 {
		opts.RunBytes = DefaultRunBytes
	}
	opts.RunBytes = max(opts.RunBytes/int64(par), 1<<20)
	out := make([]built, len(columns))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, col := range columns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, p, err := prepare(ctx, ds, col, opts)
			out[i] = built{res, p, err}
		}()
	}
	wg.Wait()
	return out
}

// pending is an index built but not yet committed.
type pending struct {
	res       *Result
	add       *pb.IndexMetadata
	remove    [][]byte
	committed bool
}

// prepare plans and builds one column's index update against ds; p is nil
// when there is nothing to do.
func prepare(ctx context.Context, ds *table.Dataset, column string, opts BuildOptions) (*Result, *pending, error) {
	var err error
	res := &Result{Column: column}
	idxs, err := BTreeIndexes(ds, column)
	if err != nil {
		return nil, nil, err
	}
	live := liveFragments(ds)
	covered := roaring.New()
	for _, m := range idxs {
		bm, err := table.FragmentBitmap(m)
		if err != nil {
			return nil, nil, err
		}
		covered.Or(bm)
	}
	missing := live.Clone()
	missing.AndNot(covered)
	stale := false // an index claims fragments that are gone
	for _, m := range idxs {
		bm, _ := table.FragmentBitmap(m)
		if roaring.AndNot(bm, live).GetCardinality() > 0 {
			stale = true
		}
	}
	if opts.MaxSegments <= 0 {
		opts.MaxSegments = 16
	}
	if len(idxs) > 0 && opts.Name == "" {
		opts.Name = idxs[0].GetName()
	}
	opts.Fragments = missing
	switch {
	case len(idxs) == 0:
		opts.Bases, opts.Fragments = nil, nil // a first build over everything
	case opts.Delta && missing.IsEmpty(), !opts.Delta && missing.IsEmpty() && !stale && len(idxs) == 1:
		res.Index = uuidString(idxs[len(idxs)-1])
		return res, nil, nil
	case opts.Delta && len(idxs) < opts.MaxSegments:
		// A new segment over the uncovered fragments only, beside the
		// existing ones: cost O(new rows).
		opts.Bases, idxs = nil, nil
	case opts.Delta:
		// Merge every segment but the largest into the new one.
		largest, most := 0, int64(-1)
		for i, m := range idxs {
			bm, _ := table.FragmentBitmap(m)
			var rows int64
			for _, fr := range ds.Fragments() {
				if bm.Contains(uint32(fr.GetId())) {
					rows += int64(fr.GetPhysicalRows())
				}
			}
			if rows > most {
				largest, most = i, rows
			}
		}
		idxs = append(slices.Clone(idxs[:largest]), idxs[largest+1:]...)
		opts.Bases = idxs
	default:
		// One segment covering every fragment: the existing segments'
		// entries merged with the uncovered fragments' values.
		opts.Bases = idxs
	}
	for _, fr := range ds.Fragments() {
		if opts.Fragments == nil || opts.Fragments.Contains(uint32(fr.GetId())) {
			res.NewRows += int64(fr.GetPhysicalRows())
		}
	}
	m, err := Build(ctx, ds, column, opts)
	if err != nil {
		return nil, nil, err
	}
	remove := make([][]byte, len(idxs))
	for i, x := range idxs {
		remove[i] = x.GetUuid().GetUuid()
	}
	res.Index, res.Replaced = uuidString(m), len(idxs)
	return res, &pending{res: res, add: m, remove: remove}, nil
}

// Remove deletes the files of an index that no manifest names (best
// effort; Lance's cleanup also removes such files).
func Remove(ctx context.Context, store objstore.Store, uuid string) {
	_ = store.Delete(ctx, indexDir(uuid)+PagesFile)
	_ = store.Delete(ctx, indexDir(uuid)+LookupFile)
}

// Stats returns the entries (pages and key filters) c holds and the bytes
// charged for them.
func (c *Cache) Stats() (entries int, bytes int64) {
	c.pages.mu.Lock()
	defer c.pages.mu.Unlock()
	return len(c.pages.m), c.pages.bytes
}
