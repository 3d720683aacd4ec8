package index

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
)

// Failpoint, when set, is called at each step of an index build and
// commit with the step's name ("scanned", "page", "pages-written",
// "files-written", "committed"). Crash tests kill the process there.
var Failpoint func(step string)

func failpoint(step string) {
	if Failpoint != nil {
		Failpoint(step)
	}
}

// DefaultRunBytes bounds the (value, row address) pairs a build holds in
// memory before it sorts them and spills them to a temporary run file.
const DefaultRunBytes = 128 << 20

// BuildOptions tune a build.
type BuildOptions struct {
	// Name of the index; default "{column}_idx", the name LanceDB gives.
	Name string
	// Fragments to read values from; nil means every fragment of the
	// version.
	Fragments *roaring.Bitmap
	// Bases are existing BTree index segments on the same column whose
	// entries are carried over (for the fragments of their bitmaps that are
	// still in the version; deleted rows are dropped), merged with the
	// values read from Fragments. This is how an index is brought up to
	// date with new fragments, and segments are consolidated, without
	// re-reading the table.
	Bases []*pb.IndexMetadata
	// RunBytes bounds memory (DefaultRunBytes when 0); TempDir holds the
	// spilled runs (os.TempDir() when empty).
	RunBytes int64
	TempDir  string
	// BatchSize is the rows per page (DefaultBatchSize when 0).
	BatchSize int
	// Delta makes Update add a segment over the uncovered fragments beside
	// the existing segments instead of replacing them; once a column has
	// MaxSegments segments (default 16), it merges every segment but the
	// largest with the new fragments instead, so its cost stays O(recent
	// rows), not O(table).
	Delta       bool
	MaxSegments int
	// KeyColumns are the columns of unique keys looked up in batches (the
	// merge's check of ids): a new segment on one of them gets its key
	// filter as it is written, in Cache's pages, rather than from a read
	// of all its values on its first batch lookup.
	KeyColumns []string
	// Cache is the Cache of the Finders that will look the index up;
	// nil: DefaultCache.
	Cache *Cache
}

// entry is one indexed value and the address of its row.
type entry struct {
	v    string
	null bool
	addr uint64
}

// less orders entries as Lance sorts BTree training data: ascending, nulls
// first; ties by row address (any order is valid, this one is stable).
func less(a, b entry) bool { return cmpEntry(a, b) < 0 }

func cmpEntry(a, b entry) int {
	if a.null != b.null {
		if a.null {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.v, b.v); c != 0 {
		return c
	}
	return cmp.Compare(a.addr, b.addr)
}

// Build writes a BTree index over column of ds under _indices/{uuid}/ and
// returns its metadata, ready to commit (see Commit). It does not commit.
// Memory is bounded by about twice opts.RunBytes (a run held in memory is
// copied in index order before the merge) plus one page per spilled run.
func Build(ctx context.Context, ds *table.Dataset, column string, opts BuildOptions) (*pb.IndexMetadata, error) {
	f := ds.Schema().Field(column)
	if f == nil {
		return nil, fmt.Errorf("lance/index: no column %q", column)
	}
	if !isString(f.Type) {
		return nil, fmt.Errorf("lance/index: column %q is %s; only string columns can be indexed", column, f.Type)
	}
	if opts.Name == "" {
		opts.Name = column + "_idx"
	}
	if opts.RunBytes <= 0 {
		opts.RunBytes = DefaultRunBytes
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	live := roaring.New()
	for _, fr := range ds.Fragments() {
		live.Add(uint32(fr.GetId()))
	}
	scan := live.Clone()
	if opts.Fragments != nil {
		scan.And(opts.Fragments)
	}
	covered := scan.Clone()

	var sources []source2
	var rows int64 // an upper bound of the entries: sizes the key filter
	defer func() {
		for _, s := range sources {
			s.close()
		}
	}()
	for _, base := range opts.Bases {
		bm, err := table.FragmentBitmap(base)
		if err != nil {
			return nil, err
		}
		bm.And(live)
		// Fragments scanned afresh, or taken from an earlier segment (two
		// segments may overlap), are not carried over twice.
		bm.AndNot(covered)
		if !bm.IsEmpty() {
			bt, err := OpenBTree(ctx, ds.Store(), uuidString(base), nil)
			if err != nil {
				return nil, err
			}
			sources = append(sources, &baseSource{ctx: ctx, ds: ds, t: bt, keep: bm, dels: map[uint64]*roaring.Bitmap{}})
			rows += bt.rows
			covered.Or(bm)
		}
	}

	// Read the new fragments' values, spilling sorted runs past RunBytes.
	var toScan int64
	for _, fr := range ds.Fragments() {
		if scan.Contains(uint32(fr.GetId())) {
			toScan += int64(fr.GetPhysicalRows())
		}
	}
	// One allocation for the run buffer (growing it copies it each time).
	buf := make([]entry, 0, min(toScan, opts.RunBytes/48+1))
	var bufBytes int64
	spilled := false
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		r, err := spill(opts.TempDir, buf, sortEntries(buf))
		if err != nil {
			return err
		}
		sources = append(sources, r)
		buf, bufBytes, spilled = buf[:0], 0, true
		return nil
	}
	if !scan.IsEmpty() {
		err := ds.Scan(ctx, table.ScanOptions{Columns: []string{column}, WithRowAddr: true, Fragments: scan}, func(b arrow.RecordBatch) error {
			vals, addrs := strs(b.Column(0)), b.Column(1).(*array.Uint64)
			// The batch's values are copied into one string the entries
			// slice: a copy per value was a third of a small build's
			// allocations, and garbage collection went with them.
			nb := 0
			for i := 0; i < int(b.NumRows()); i++ {
				if !vals.IsNull(i) {
					nb += len(vals.value(i))
				}
			}
			var sb strings.Builder
			sb.Grow(nb)
			for i := 0; i < int(b.NumRows()); i++ {
				if !vals.IsNull(i) {
					sb.WriteString(vals.value(i))
				}
			}
			arena, off := sb.String(), 0
			for i := 0; i < int(b.NumRows()); i++ {
				e := entry{addr: addrs.Value(i), null: vals.IsNull(i)}
				if !e.null {
					k := len(vals.value(i))
					e.v = arena[off : off+k]
					off += k
				}
				buf = append(buf, e)
				bufBytes += int64(len(e.v)) + 48
				if bufBytes >= opts.RunBytes {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("lance/index: read %s: %w", column, err)
		}
	}
	if !spilled {
		// Sort in memory when nothing was spilled.
		sources = append(sources, &sliceSource{s: gather(buf, sortEntries(buf))})
		buf = nil
	} else if err := flush(); err != nil {
		return nil, err
	}

	failpoint("scanned")
	id := uuid.New()
	var keys *keyFilter
	if rows += toScan; rows >= keyFilterMinRows && slices.Contains(opts.KeyColumns, column) {
		keys = newKeyFilter(rows)
	}
	if err := writeBTree(ctx, ds, id.String(), f, sources, opts.BatchSize, keys); err != nil {
		return nil, err
	}
	if keys != nil {
		// Keyed by the new uuid: an index that is never committed leaves
		// an entry no lookup asks for, evicted in time.
		c := opts.Cache
		if c == nil {
			c = DefaultCache()
		}
		c.pages.putFilter(id.String(), keys)
	}
	bitmap, err := table.EncodeFragmentBitmap(covered)
	if err != nil {
		return nil, err
	}
	version := int32(btreeIndexVersion)
	created := uint64(time.Now().UnixMilli())
	return &pb.IndexMetadata{
		Uuid:           &pb.UUID{Uuid: id[:]},
		Fields:         []int32{f.ID},
		Name:           opts.Name,
		DatasetVersion: ds.Version(),
		FragmentBitmap: bitmap,
		IndexDetails:   &pb.AnyMsg{TypeUrl: BTreeDetailsURL},
		IndexVersion:   &version,
		CreatedAt:      &created,
	}, nil
}

// uuidString formats IndexMetadata.uuid (16 raw bytes) as the directory
// name Lance uses.
func uuidString(m *pb.IndexMetadata) string {
	u, err := uuid.FromBytes(m.GetUuid().GetUuid())
	if err != nil {
		return fmt.Sprintf("%x", m.GetUuid().GetUuid())
	}
	return u.String()
}

// UUID returns the index's uuid as Lance's directory name.
func UUID(m *pb.IndexMetadata) string { return uuidString(m) }

// writeBTree merges the sorted sources into page_data.lance, page by page,
// and writes page_lookup.lance with each page's min, max and null count.
func writeBTree(ctx context.Context, ds *table.Dataset, id string, f *schema.Field, sources []source2, batchSize int, keys *keyFilter) (err error) {
	store := ds.Store()
	pagesSchema, err := schema.FromArrow(arrow.NewSchema([]arrow.Field{
		{Name: valuesCol, Type: f.Type, Nullable: true},
		{Name: idsCol, Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
	}, nil), 0)
	if err != nil {
		return err
	}
	obj, err := store.Create(ctx, indexDir(id)+PagesFile)
	if err != nil {
		return fmt.Errorf("lance/index: create %s: %w", PagesFile, err)
	}
	defer func() {
		if err != nil {
			_ = obj.Abort()
		}
	}()
	w, err := file.NewWriter(obj, pagesSchema, file.WriterOptions{})
	if err != nil {
		return err
	}
	var h mergeHeap
	for _, s := range sources {
		e, ok, err := s.next()
		if err != nil {
			return err
		}
		if ok {
			h = append(h, headItem{e, s})
		}
	}
	h.init()

	var mins, maxs []entry
	var nulls []uint32
	var first, last entry
	var pageNulls uint32
	n := 0 // rows of the current index page
	pb := pageBuf{large: f.Type.ID() == arrow.LARGE_STRING}
	write := func() error {
		if len(pb.ids) == 0 {
			return nil
		}
		rec := pb.record(pagesSchema.Arrow())
		werr := w.Write(rec)
		rec.Release()
		pb.reset()
		if werr != nil {
			return werr
		}
		failpoint("page")
		return nil
	}
	for i := 0; len(h) > 0; i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		top := h[0]
		e := top.e
		if nx, ok, err := top.src.next(); err != nil {
			return err
		} else if ok {
			h[0].e = nx
		} else {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		h.down(0)
		if n == 0 {
			first = e
		}
		last = e
		pb.add(e)
		if e.null {
			pageNulls++
		} else if keys != nil {
			keys.add(e.v)
		}
		if n++; n == batchSize {
			mins, maxs, nulls = append(mins, first), append(maxs, last), append(nulls, pageNulls)
			n, pageNulls = 0, 0
			if len(pb.ids) >= writeRows || len(pb.data) >= writeBytes {
				if err := write(); err != nil {
					return err
				}
			}
		}
	}
	if n > 0 {
		mins, maxs, nulls = append(mins, first), append(maxs, last), append(nulls, pageNulls)
	}
	if err := write(); err != nil {
		return err
	}
	if _, err := w.Finish(); err != nil {
		return err
	}
	if err := obj.Close(); err != nil {
		return fmt.Errorf("lance/index: write %s: %w", PagesFile, err)
	}
	failpoint("pages-written")

	lookupArrow := arrow.NewSchema([]arrow.Field{
		{Name: "min", Type: f.Type, Nullable: true},
		{Name: "max", Type: f.Type, Nullable: true},
		{Name: "null_count", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "page_idx", Type: arrow.PrimitiveTypes.Uint32},
	}, func() *arrow.Metadata {
		m := arrow.NewMetadata([]string{batchSizeMD}, []string{strconv.Itoa(batchSize)})
		return &m
	}())
	lookupSchema, err := schema.FromArrow(lookupArrow, 0)
	if err != nil {
		return err
	}
	alloc := memory.DefaultAllocator
	minB, maxB := newStringBuilder(alloc, f.Type), newStringBuilder(alloc, f.Type)
	nb, pb2 := array.NewUint32Builder(alloc), array.NewUint32Builder(alloc)
	for i := range mins {
		for _, x := range []struct {
			b stringBuilder
			e entry
		}{{minB, mins[i]}, {maxB, maxs[i]}} {
			if x.e.null {
				x.b.AppendNull()
			} else {
				x.b.Append(x.e.v)
			}
		}
		nb.Append(nulls[i])
		pb2.Append(uint32(i))
	}
	cols := []arrow.Array{minB.NewArray(), maxB.NewArray(), nb.NewArray(), pb2.NewArray()}
	rec := array.NewRecordBatch(lookupArrow, cols, int64(len(mins)))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	lobj, err := store.Create(ctx, indexDir(id)+LookupFile)
	if err != nil {
		return fmt.Errorf("lance/index: create %s: %w", LookupFile, err)
	}
	lw, err := file.NewWriter(lobj, lookupSchema, file.WriterOptions{})
	if err == nil && len(mins) > 0 {
		err = lw.Write(rec)
	}
	if err == nil {
		_, err = lw.Finish()
	}
	if err != nil {
		_ = lobj.Abort()
		return err
	}
	if err := lobj.Close(); err != nil {
		return fmt.Errorf("lance/index: write %s: %w", LookupFile, err)
	}
	failpoint("files-written")
	return nil
}

// writeRows and writeBytes bound the rows of page_data handed to the file
// writer at once: whole index pages, which the writer packs into its own
// pages.
const (
	writeRows  = 16 * DefaultBatchSize
	writeBytes = 8 << 20
)

// pageBuf holds the rows of page_data not yet written as the Arrow buffers
// of its two columns, reused from one write to the next (Arrow builders
// start empty after each array and grew again for every index page: they
// were most of a small build's allocations).
type pageBuf struct {
	large bool // values are large_string (int64 offsets)
	data  []byte
	ends  []int64 // end of each row's value in data
	valid []byte  // validity bitmap of the values
	nulls int
	ids   []uint64
}

func (p *pageBuf) add(e entry) {
	i := len(p.ids)
	if i%8 == 0 {
		p.valid = append(p.valid, 0)
	}
	if e.null {
		p.nulls++
	} else {
		p.valid[i/8] |= 1 << (i % 8)
		p.data = append(p.data, e.v...)
	}
	p.ends = append(p.ends, int64(len(p.data)))
	p.ids = append(p.ids, e.addr)
}

func (p *pageBuf) reset() {
	p.data, p.ends, p.valid, p.ids, p.nulls = p.data[:0], p.ends[:0], p.valid[:0], p.ids[:0], 0
}

// record returns the buffered rows as a batch of (values, ids) that shares
// p's memory: it must be written before p changes.
func (p *pageBuf) record(sc *arrow.Schema) arrow.RecordBatch {
	n := len(p.ids)
	var offs []byte
	if p.large {
		o := make([]int64, n+1)
		copy(o[1:], p.ends)
		offs = arrow.Int64Traits.CastToBytes(o)
	} else {
		o := make([]int32, n+1)
		for i, e := range p.ends {
			o[i+1] = int32(e)
		}
		offs = arrow.Int32Traits.CastToBytes(o)
	}
	var valid *memory.Buffer
	if p.nulls > 0 {
		valid = memory.NewBufferBytes(p.valid)
	}
	vd := array.NewData(sc.Field(0).Type, n, []*memory.Buffer{valid, memory.NewBufferBytes(offs), memory.NewBufferBytes(p.data)}, nil, p.nulls, 0)
	id := array.NewData(arrow.PrimitiveTypes.Uint64, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Uint64Traits.CastToBytes(p.ids))}, nil, 0, 0)
	va, ia := array.MakeFromData(vd), array.MakeFromData(id)
	vd.Release()
	id.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{va, ia}, int64(n))
	va.Release()
	ia.Release()
	return rec
}

type stringBuilder interface {
	Append(string)
	AppendNull()
	NewArray() arrow.Array
	Release()
}

func newStringBuilder(alloc memory.Allocator, t arrow.DataType) stringBuilder {
	if t.ID() == arrow.LARGE_STRING {
		return array.NewLargeStringBuilder(alloc)
	}
	return array.NewStringBuilder(alloc)
}

// source2 yields entries in ascending order.
type source2 interface {
	next() (entry, bool, error)
	close()
}

// sliceSource yields entries already in index order.
type sliceSource struct {
	s []entry
	i int
}

func (s *sliceSource) next() (entry, bool, error) {
	if s.i >= len(s.s) {
		return entry{}, false, nil
	}
	s.i++
	return s.s[s.i-1], true, nil
}

func (s *sliceSource) close() {}

// gather returns es in the given order, their values copied into one
// string in that order. The merge then reads entries and values
// sequentially: read through order, each entry and each value was a cache
// miss inside the merge loop (two fifths of a 1M-row build's CPU), where
// this loop's independent reads overlap.
func gather(es []entry, order []uint32) []entry {
	out := make([]entry, len(order))
	n := 0
	for i := range es {
		n += len(es[i].v)
	}
	var sb strings.Builder
	sb.Grow(n)
	for i, p := range order {
		out[i] = es[p]
		sb.WriteString(es[p].v)
	}
	all, off := sb.String(), 0
	for i := range out {
		k := len(out[i].v)
		out[i].v = all[off : off+k]
		off += k
	}
	return out
}

// runSource reads a spilled run: [u8 null][u32 len][bytes][u64 addr]...
type runSource struct {
	f *os.File
	r *bufio.Reader
}

func spill(dir string, es []entry, order []uint32) (*runSource, error) {
	f, err := os.CreateTemp(dir, "lance-index-run-*")
	if err != nil {
		return nil, fmt.Errorf("lance/index: spill: %w", err)
	}
	// Unlinked at once: the run lives only as long as the open file, so a
	// crash leaves nothing behind.
	_ = os.Remove(f.Name())
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr [13]byte
	for _, p := range order {
		e := &es[p]
		hdr[0] = 0
		if e.null {
			hdr[0] = 1
		}
		binary.LittleEndian.PutUint32(hdr[1:], uint32(len(e.v)))
		binary.LittleEndian.PutUint64(hdr[5:], e.addr)
		if _, err := w.Write(hdr[:]); err != nil {
			f.Close()
			return nil, fmt.Errorf("lance/index: spill: %w", err)
		}
		if _, err := w.WriteString(e.v); err != nil {
			f.Close()
			return nil, fmt.Errorf("lance/index: spill: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("lance/index: spill: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("lance/index: spill: %w", err)
	}
	return &runSource{f: f, r: bufio.NewReaderSize(f, 64<<10)}, nil
}

func (s *runSource) next() (entry, bool, error) {
	var hdr [13]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return entry{}, false, nil
		}
		return entry{}, false, fmt.Errorf("lance/index: read run: %w", err)
	}
	v := make([]byte, binary.LittleEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(s.r, v); err != nil {
		return entry{}, false, fmt.Errorf("lance/index: read run: %w", err)
	}
	return entry{v: string(v), null: hdr[0] == 1, addr: binary.LittleEndian.Uint64(hdr[5:])}, true, nil
}
func (s *runSource) close() { s.f.Close() }

// baseSource streams an existing index's entries, page by page, keeping
// only live rows of the fragments in keep.
type baseSource struct {
	ctx  context.Context
	ds   *table.Dataset
	t    *BTree
	keep *roaring.Bitmap
	dels map[uint64]*roaring.Bitmap
	pg   *page
	ids  *array.Uint64
	p, i int
}

func (s *baseSource) next() (entry, bool, error) {
	for {
		if s.pg == nil || s.i >= s.pg.len() {
			if s.pg != nil {
				s.p++
			}
			if s.p >= len(s.t.maxs) {
				return entry{}, false, nil
			}
			pg, err := s.t.readPage(s.ctx, s.p)
			if err != nil {
				return entry{}, false, err
			}
			ids, err := s.t.rowIDs(s.ctx, pg)
			if err != nil {
				return entry{}, false, err
			}
			s.pg, s.ids, s.i = pg, ids, 0
		}
		i := s.i
		s.i++
		e := s.pg.entry(i, s.ids)
		addr := e.addr
		frag := addr >> 32
		if !s.keep.Contains(uint32(frag)) {
			continue
		}
		del, ok := s.dels[frag]
		if !ok {
			var err error
			if del, err = s.ds.DeletedRows(s.ctx, frag); err != nil {
				return entry{}, false, err
			}
			s.dels[frag] = del
		}
		if del != nil && del.Contains(uint32(addr)) {
			continue
		}
		e.v = strings.Clone(e.v) // outlives the page in the merge heap
		return e, true, nil
	}
}
func (s *baseSource) close() {}

type headItem struct {
	e   entry
	src source2
}

// mergeHeap is a min-heap of the sources' next entries, typed rather than
// container/heap: every entry of an index passes through it, and an
// interface call per comparison bought nothing.
type mergeHeap []headItem

func (h mergeHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down moves item i below its smaller children.
func (h mergeHeap) down(i int) {
	for {
		m := 2*i + 1
		if m >= len(h) {
			return
		}
		if r := m + 1; r < len(h) && less(h[r].e, h[m].e) {
			m = r
		}
		if !less(h[m].e, h[i].e) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
