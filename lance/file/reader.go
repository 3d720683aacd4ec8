package file

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

// Source is random access to the bytes of one file. ReadRange must return
// exactly n bytes starting at off (or an error), in a slice the reader may
// keep: decoded arrays can point into it.
type Source interface {
	ReadRange(ctx context.Context, off, n int64) ([]byte, error)
}

// Reader reads a Lance 2.0 data file. Open loads the footer and all
// metadata; Read then fetches only the pages (and, within large pages, only
// the byte ranges) that the requested rows and columns need. A Reader is safe
// for concurrent use.
type Reader struct {
	id           uint64 // names its cached offsets (offsetsKey) without pinning the Reader
	src          Source
	size         int64
	major, minor uint16
	schema       *schema.Schema
	numRows      int64
	top          map[int32]*node
	directMin    int64 // see directReadMin
	metaBytes    int64 // the metadata bytes Open read, for cache accounting
	// tail is the end of the file Open read (metaBytes long), kept so that
	// a data page inside it is not read again (fetchNow, readAt).
	tail []byte

	io         *IO          // shared with the other Readers of its IO
	prefetched *prefetchSet // offsets buffers read in the background (prefetchOffsets)
	schemas    *schemaMemo  // the schemas of Read's batches
}

// readerIDs numbers Readers. Cache keys hold a Reader's number, not the
// Reader: a key that pointed at it kept it, and its Source, alive as long
// as the entry (a merge's generation read whole held the whole file).
var readerIDs atomic.Uint64

// prefetchSet is the offsets buffers of a Reader read in the background:
// large ones by offset (prefetchOffsets), small ones by column
// (warmColumnOffsets).
type prefetchSet struct {
	mu   sync.Mutex
	offs map[int64]struct{}
	cols map[int]struct{}
}

// MetadataBytes is the size of the footer and metadata Open read: a
// measure of the memory a Reader holds, for caches of open readers.
func (r *Reader) MetadataBytes() int64 { return r.metaBytes }

// bufRange is an absolute byte range of the file.
type bufRange struct{ off, size int64 }

// column is one physical column: its pages with the row each starts at.
type column struct {
	index  int
	pages  []*page
	starts []int64 // starts[i] is the first row of pages[i]; starts[len] is the row count
}

// page is one page of a column with its encoding parsed into a descriptor
// for the field kind that owns the column (fixedDesc, binDesc, listDesc).
type page struct {
	rows int64
	desc any
	err  error // the page cannot be decoded; returned by Read when touched
}

func (c *column) rows() int64 { return c.starts[len(c.starts)-1] }

// Open reads the footer and metadata of a file of the given size. It reads
// the last 64 KiB first and reads more only if the metadata is larger.
// The Reader shares DefaultIO (IO.Open: another IO).
func Open(ctx context.Context, src Source, size int64) (*Reader, error) {
	return DefaultIO().OpenTail(ctx, src, size, nil)
}

// TailReadSize is how much of the end of a file Open reads first: the
// footer, the column metadata and their offset tables of most files. A
// caller that does not know a file's size reads this much with the size
// (objstore.GetTail, one request on S3 and GCS) and passes it to OpenTail.
const TailReadSize = tailReadSize

// OpenTail is Open for a caller that has read the end of the file already:
// tail is its last len(tail) bytes (nil: none). It reads the rest of the
// first 64 KiB if tail is shorter, and the rest of the metadata only if it
// starts before. The Reader keeps tail and shares DefaultIO (IO.OpenTail:
// another IO).
func OpenTail(ctx context.Context, src Source, size int64, tail []byte) (*Reader, error) {
	return DefaultIO().OpenTail(ctx, src, size, tail)
}

func openTail(ctx context.Context, src Source, size int64, tail []byte) (*Reader, error) {
	if src == nil {
		return nil, fmt.Errorf("lance/file: Open needs a source")
	}
	if size < footerLen {
		return nil, corruptf("file too small (%d bytes)", size)
	}
	if int64(len(tail)) > size {
		return nil, fmt.Errorf("lance/file: a tail of %d bytes for a file of %d", len(tail), size)
	}
	// A caller's tail shorter than the first read is extended to it.
	t := newTail(ctx, src, size, tail)
	if err := t.ensure(size - min(size, tailReadSize)); err != nil {
		return nil, err
	}
	ft, err := parseFooter(t.b)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(ft.major, ft.minor); err != nil {
		return nil, err
	}
	end := uint64(size - footerLen)
	ngb, ncol := uint64(ft.numGlobalBufs), uint64(ft.numColumns)
	switch {
	case ngb == 0:
		return nil, corruptf("no global buffers (the schema is global buffer 0)")
	case ft.gboTableStart > end || end-ft.gboTableStart < 16*ngb:
		return nil, corruptf("global buffer table [%d, +%d) does not fit before the footer at %d", ft.gboTableStart, 16*ngb, end)
	case ft.cmoTableStart > ft.gboTableStart || ft.gboTableStart-ft.cmoTableStart < 16*ncol:
		return nil, corruptf("column metadata offset table [%d, +%d) overlaps the global buffer table at %d", ft.cmoTableStart, 16*ncol, ft.gboTableStart)
	case ft.columnMetaStart > ft.cmoTableStart:
		return nil, corruptf("column metadata start %d is after its offset table %d", ft.columnMetaStart, ft.cmoTableStart)
	}
	// The global buffer table (just before the footer, so nearly always in
	// the first read) says where global buffer 0, the schema, starts; from
	// there (or from the column metadata, if earlier) to the end is all the
	// metadata, fetched with at most one more read.
	if err := t.ensure(int64(ft.gboTableStart)); err != nil {
		return nil, err
	}
	gbufs := make([]bufRange, ngb)
	for i := range gbufs {
		e := t.at(int64(ft.gboTableStart)+16*int64(i), 16)
		gbufs[i] = bufRange{int64(binary.LittleEndian.Uint64(e)), int64(binary.LittleEndian.Uint64(e[8:]))}
		if !inFile(gbufs[i], size) {
			return nil, corruptf("global buffer %d [%d, +%d) is outside the file", i, uint64(gbufs[i].off), uint64(gbufs[i].size))
		}
	}
	gb0 := gbufs[0]
	if err := t.ensure(min(gb0.off, int64(ft.columnMetaStart))); err != nil {
		return nil, err
	}

	var fd pb.FileDescriptor
	if err := proto.Unmarshal(t.at(gb0.off, gb0.size), &fd); err != nil {
		return nil, corruptf("file descriptor: %v", err)
	}
	if fd.GetSchema() == nil {
		return nil, corruptf("file descriptor has no schema")
	}
	if fd.GetLength() > math.MaxInt64 {
		return nil, corruptf("row count %d", fd.GetLength())
	}
	sch, err := schema.FromProto(fd.GetSchema().GetFields(), fd.GetSchema().GetMetadata())
	if err != nil {
		return nil, fmt.Errorf("lance/file: file schema: %w", err)
	}

	r := &Reader{id: readerIDs.Add(1), prefetched: &prefetchSet{offs: map[int64]struct{}{}, cols: map[int]struct{}{}}, schemas: &schemaMemo{m: map[string]*arrow.Schema{}}, src: src, size: size, major: ft.major, minor: ft.minor, schema: sch,
		numRows: int64(fd.GetLength()), top: map[int32]*node{}, directMin: directReadMin, metaBytes: int64(len(t.b)), tail: t.b}
	metas := make([]*pb.ColumnMetadata, ncol)
	for i := range metas {
		e := t.at(int64(ft.cmoTableStart)+16*int64(i), 16)
		pos, n := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		if pos < ft.columnMetaStart || pos > ft.cmoTableStart || n > ft.cmoTableStart-pos {
			return nil, corruptf("column %d metadata [%d, +%d) is outside the metadata area", i, pos, n)
		}
		metas[i] = &pb.ColumnMetadata{}
		if err := proto.Unmarshal(t.at(int64(pos), int64(n)), metas[i]); err != nil {
			return nil, corruptf("column %d metadata: %v", i, err)
		}
	}
	b := &builder{r: r, metas: metas, gbufs: gbufs}
	for _, f := range sch.Fields {
		n, err := b.node(f, 0)
		if err != nil {
			return nil, err
		}
		r.top[f.ID] = n
	}
	if b.next != len(metas) {
		return nil, corruptf("the schema needs %d columns, the file has %d", b.next, len(metas))
	}
	return r, nil
}

func inFile(b bufRange, size int64) bool {
	return b.off >= 0 && b.size >= 0 && b.off <= size && b.size <= size-b.off
}

// tail holds the bytes [start, size) of the file, read from the end.
type tail struct {
	ctx   context.Context
	src   Source
	size  int64
	start int64
	b     []byte
}

// newTail returns a tail holding b, the last len(b) bytes of the file
// (none when b is nil).
func newTail(ctx context.Context, src Source, size int64, b []byte) *tail {
	t := &tail{ctx: ctx, src: src, size: size}
	if b != nil {
		t.b, t.start = b, size-int64(len(b))
	}
	return t
}

// ensure extends the buffer down to file offset from.
func (t *tail) ensure(from int64) error {
	if t.b != nil && from >= t.start {
		return nil
	}
	if from < 0 || from > t.size {
		return corruptf("metadata offset %d outside the file", from)
	}
	to := t.size
	if t.b != nil {
		to = t.start
	}
	got, err := readExact(t.ctx, t.src, from, to-from)
	if err != nil {
		return err
	}
	if t.b == nil {
		t.b = got
	} else {
		t.b = append(got, t.b...)
	}
	t.start = from
	return nil
}

// at returns n bytes at file offset off; the caller has ensured they are held.
func (t *tail) at(off, n int64) []byte {
	return t.b[off-t.start : off-t.start+n]
}

// readAt reads n bytes at off, taking what Open's tail holds from it.
func (r *Reader) readAt(ctx context.Context, off, n int64) ([]byte, error) {
	ts := r.size - int64(len(r.tail))
	switch {
	case len(r.tail) == 0 || off+n <= ts:
		return readExact(ctx, r.src, off, n)
	case off >= ts:
		return r.tail[off-ts : off-ts+n : off-ts+n], nil
	}
	head, err := readExact(ctx, r.src, off, ts-off)
	if err != nil {
		return nil, err
	}
	return append(head[:len(head):len(head)], r.tail[:off+n-ts]...), nil
}

func readExact(ctx context.Context, src Source, off, n int64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	b, err := src.ReadRange(ctx, off, n)
	if err != nil {
		return nil, fmt.Errorf("lance/file: read [%d, +%d): %w", off, n, err)
	}
	if int64(len(b)) != n {
		return nil, corruptf("short read at %d: got %d bytes, want %d", off, len(b), n)
	}
	return b, nil
}

// Schema returns the file's schema (from global buffer 0).
func (r *Reader) Schema() *schema.Schema { return r.schema }

// NumRows returns the number of rows in the file.
func (r *Reader) NumRows() int64 { return r.numRows }

// Size returns the file's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// Version returns the footer's format version: 0.3 for files written as
// format 2.0 (by this package and by Lance), or 2.0.
func (r *Reader) Version() (major, minor uint16) { return r.major, r.minor }

// ---------------------------------------------------------------- field tree

type nodeKind int

const (
	kindFixed nodeKind = iota
	kindBinary
	kindList
	kindStruct
	kindDict
	kindUnsupported
)

// node maps one schema field to its column(s) and knows how to decode it.
type node struct {
	f        *schema.Field
	kind     nodeKind
	col      *column
	children []*node
	err      error // kindUnsupported: why

	bits, dim int     // kindFixed: bits per item, items per row
	itemBase  []int64 // kindList: first item of each page in the items column
}

type builder struct {
	r     *Reader
	metas []*pb.ColumnMetadata
	gbufs []bufRange
	next  int
}

// node builds the decoder for f, consuming its columns in pre-order the way
// Lance 2.0 assigns them: one column per field, except that a
// fixed_size_list has no child column and a packed struct is one column.
func (b *builder) node(f *schema.Field, depth int) (*node, error) {
	if depth > 32 {
		return nil, corruptf("field %q nests too deeply", f.Name)
	}
	if b.next >= len(b.metas) {
		return nil, corruptf("the schema needs more columns than the file's %d", len(b.metas))
	}
	n := &node{f: f}
	colIdx := b.next
	b.next++
	switch t := f.Type.(type) {
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		n.kind = kindBinary
	case *arrow.DictionaryType:
		// Top level only: a plain read changes the field's type, which a
		// list or struct type could not reflect.
		if dictTypeOK(t) && depth == 0 {
			n.kind = kindDict
		} else {
			n.kind, n.err = kindUnsupported, unsupportedf("field %q: type %s", f.Name, t)
		}
	case *arrow.FixedSizeListType:
		bits, ok := fixedBits(t.Elem())
		if !ok {
			n.kind, n.err = kindUnsupported, unsupportedf("field %q: fixed_size_list of %s", f.Name, t.Elem())
		} else {
			n.kind, n.bits, n.dim = kindFixed, bits, int(t.Len())
		}
	case *arrow.ListType, *arrow.LargeListType:
		n.kind = kindList
	case *arrow.StructType:
		if isPackedStruct(f.Metadata) {
			n.kind, n.err = kindUnsupported, unsupportedf("field %q: packed struct", f.Name)
		} else {
			n.kind = kindStruct
		}
	default:
		bits, ok := fixedBits(f.Type)
		if !ok {
			n.kind, n.err = kindUnsupported, unsupportedf("field %q: type %s", f.Name, f.Type)
		} else {
			n.kind, n.bits, n.dim = kindFixed, bits, 1
		}
	}
	col, err := b.column(colIdx, n)
	if err != nil {
		return nil, err
	}
	n.col = col
	switch n.kind {
	case kindList:
		if len(f.Children) != 1 {
			return nil, corruptf("list field %q has %d children", f.Name, len(f.Children))
		}
		c, err := b.node(f.Children[0], depth+1)
		if err != nil {
			return nil, err
		}
		n.children = []*node{c}
	case kindStruct:
		for _, cf := range f.Children {
			c, err := b.node(cf, depth+1)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
		}
	}
	return n, nil
}

// column parses the pages of column idx for a field of n's kind.
func (b *builder) column(idx int, n *node) (*column, error) {
	cm := b.metas[idx]
	size := b.r.size
	if len(cm.GetBufferOffsets()) != len(cm.GetBufferSizes()) {
		return nil, corruptf("column %d: %d buffer offsets but %d sizes", idx, len(cm.GetBufferOffsets()), len(cm.GetBufferSizes()))
	}
	colBufs := make([]bufRange, len(cm.GetBufferOffsets()))
	for i := range colBufs {
		colBufs[i] = bufRange{int64(cm.GetBufferOffsets()[i]), int64(cm.GetBufferSizes()[i])}
		if !inFile(colBufs[i], size) {
			return nil, corruptf("column %d buffer %d is outside the file", idx, i)
		}
	}
	c := &column{index: idx, starts: []int64{0}}
	var items int64 // kindList: running item count
	if n.kind == kindList {
		n.itemBase = []int64{0}
	}
	for pi, pm := range cm.GetPages() {
		if pm.GetLength() == 0 {
			continue // Lance skips empty pages too
		}
		if pm.GetLength() > math.MaxInt64 {
			return nil, corruptf("column %d page %d: length %d", idx, pi, pm.GetLength())
		}
		p := &page{rows: int64(pm.GetLength())}
		last := c.starts[len(c.starts)-1]
		if p.rows > math.MaxInt64-last {
			return nil, corruptf("column %d: row count overflows", idx)
		}
		if len(pm.GetBufferOffsets()) != len(pm.GetBufferSizes()) {
			return nil, corruptf("column %d page %d: %d buffer offsets but %d sizes", idx, pi, len(pm.GetBufferOffsets()), len(pm.GetBufferSizes()))
		}
		bufs := &pageBufs{page: make([]bufRange, len(pm.GetBufferOffsets())), column: colBufs, file: b.gbufs}
		for i := range bufs.page {
			bufs.page[i] = bufRange{int64(pm.GetBufferOffsets()[i]), int64(pm.GetBufferSizes()[i])}
			if !inFile(bufs.page[i], size) {
				return nil, corruptf("column %d page %d buffer %d [%d, +%d) is outside the file", idx, pi, i, pm.GetBufferOffsets()[i], pm.GetBufferSizes()[i])
			}
		}
		enc, err := pageEncoding(pm.GetEncoding())
		if err != nil {
			p.err = fmt.Errorf("column %d page %d: %w", idx, pi, err)
		} else {
			switch n.kind {
			case kindFixed:
				p.desc, p.err = parseFixed(enc, bufs, p.rows, n.bits, n.dim)
			case kindBinary:
				p.desc, p.err = parseBinaryPage(enc, bufs, p.rows)
			case kindDict:
				p.desc, p.err = parseDictPage(enc, bufs, p.rows)
			case kindList:
				var d *listDesc
				d, p.err = parseList(enc, bufs, p.rows)
				p.desc = d
				if d != nil {
					if d.numItems > uint64(math.MaxInt64-items) {
						return nil, corruptf("column %d: item count overflows", idx)
					}
					items += int64(d.numItems)
				}
			case kindStruct:
				if _, ok := enc.GetArrayEncoding().(*pb.ArrayEncoding_Struct); !ok {
					p.err = corruptf("struct header page has encoding %s", encName(enc))
				}
			}
			if p.err != nil {
				p.err = fmt.Errorf("column %d page %d (field %q): %w", idx, pi, n.f.Name, p.err)
			}
		}
		c.pages = append(c.pages, p)
		c.starts = append(c.starts, last+p.rows)
		if n.kind == kindList {
			n.itemBase = append(n.itemBase, items)
		}
	}
	return c, nil
}

// pageEncoding unwraps a page's Encoding (direct, an Any around a 2.0
// ArrayEncoding).
func pageEncoding(e *pb.Encoding) (*pb.ArrayEncoding, error) {
	d, ok := e.GetLocation().(*pb.Encoding_Direct)
	if !ok {
		return nil, unsupportedf("page encoding is not stored directly")
	}
	var a pb.AnyMsg
	if err := proto.Unmarshal(d.Direct.GetEncoding(), &a); err != nil {
		return nil, corruptf("page encoding: %v", err)
	}
	url := a.GetTypeUrl()
	if url != arrayEncodingURL && !strings.HasSuffix(url, arrayEncodingURL) {
		if strings.Contains(url, "encodings21") {
			return nil, fmt.Errorf("%w: page layout %q belongs to format 2.1", ErrUnsupportedVersion, url)
		}
		return nil, unsupportedf("page encoding type %q", url)
	}
	var enc pb.ArrayEncoding
	if err := proto.Unmarshal(a.GetValue(), &enc); err != nil {
		return nil, corruptf("page encoding: %v", err)
	}
	return &enc, nil
}

// ---------------------------------------------------------------- page descriptors

// pageBufs resolves pb.Buffer references of one page.
type pageBufs struct {
	page, column, file []bufRange
}

func (p *pageBufs) resolve(b *pb.Buffer) (bufRange, error) {
	if b == nil {
		return bufRange{}, corruptf("flat encoding without a buffer")
	}
	var list []bufRange
	switch b.GetBufferType() {
	case pb.Buffer_page:
		list = p.page
	case pb.Buffer_column:
		list = p.column
	case pb.Buffer_file:
		list = p.file
	default:
		return bufRange{}, corruptf("buffer type %d", b.GetBufferType())
	}
	if int(b.GetBufferIndex()) >= len(list) {
		return bufRange{}, corruptf("buffer index %d of %d", b.GetBufferIndex(), len(list))
	}
	return list[b.GetBufferIndex()], nil
}

func encName(e *pb.ArrayEncoding) string {
	if e == nil || e.GetArrayEncoding() == nil {
		return "none"
	}
	s := fmt.Sprintf("%T", e.GetArrayEncoding())
	return strings.TrimPrefix(s, "*pb.ArrayEncoding_")
}

// bitsBytes returns the bytes needed for n values of bits each, or -1 on
// overflow.
func bitsBytes(n int64, bits int) int64 {
	if n < 0 || (bits > 0 && n > (math.MaxInt64-7)/int64(bits)) {
		return -1
	}
	return (n*int64(bits) + 7) / 8
}

// flat resolves a Flat encoding of exactly bits per value holding n values.
func flat(e *pb.ArrayEncoding, p *pageBufs, bits int, n int64) (bufRange, error) {
	f, ok := e.GetArrayEncoding().(*pb.ArrayEncoding_Flat)
	if !ok {
		return bufRange{}, unsupportedf("%s where a flat buffer of %d bits was expected", encName(e), bits)
	}
	if f.Flat.GetCompression() != nil && f.Flat.GetCompression().GetScheme() != "" {
		return bufRange{}, unsupportedf("compressed buffer (%s)", f.Flat.GetCompression().GetScheme())
	}
	if f.Flat.GetBitsPerValue() != uint64(bits) {
		return bufRange{}, unsupportedf("flat buffer of %d bits per value, want %d", f.Flat.GetBitsPerValue(), bits)
	}
	b, err := p.resolve(f.Flat.GetBuffer())
	if err != nil {
		return bufRange{}, err
	}
	need := bitsBytes(n, bits)
	if need < 0 || b.size < need {
		return bufRange{}, corruptf("flat buffer of %d bytes holds fewer than %d values of %d bits", b.size, n, bits)
	}
	return b, nil
}

// validity is the null state of a page (or of FSL items): no nulls, all null,
// or a bitmap.
type validity struct {
	allNull bool
	bitmap  *bufRange
}

func (v validity) hasNulls() bool { return v.allNull || v.bitmap != nil }

// nullable peels a Nullable wrapper off e; an encoding without one has no
// nulls.
func nullable(e *pb.ArrayEncoding, p *pageBufs, n int64) (validity, *pb.ArrayEncoding, error) {
	nl, ok := e.GetArrayEncoding().(*pb.ArrayEncoding_Nullable)
	if !ok {
		return validity{}, e, nil
	}
	switch x := nl.Nullable.GetNullability().(type) {
	case *pb.Nullable_NoNulls:
		return validity{}, x.NoNulls.GetValues(), nil
	case *pb.Nullable_AllNulls:
		return validity{allNull: true}, nil, nil
	case *pb.Nullable_SomeNulls:
		b, err := flat(x.SomeNulls.GetValidity(), p, 1, n)
		if err != nil {
			return validity{}, nil, fmt.Errorf("validity: %w", err)
		}
		return validity{bitmap: &b}, x.SomeNulls.GetValues(), nil
	default:
		return validity{}, nil, corruptf("nullable encoding without a variant")
	}
}

// fixedDesc describes a page of fixed-width values or fixed-size lists.
type fixedDesc struct {
	rows   validity
	items  validity // fixed_size_list items
	values bufRange
}

func parseFixed(e *pb.ArrayEncoding, p *pageBufs, rows int64, bits, dim int) (*fixedDesc, error) {
	d := &fixedDesc{}
	var err error
	d.rows, e, err = nullable(e, p, rows)
	if err != nil || d.rows.allNull {
		return d, err
	}
	items := rows
	if e == nil {
		return nil, corruptf("nullable encoding without values")
	}
	if fe, ok := e.GetArrayEncoding().(*pb.ArrayEncoding_FixedSizeList); ok {
		if int64(fe.FixedSizeList.GetDimension()) != int64(dim) {
			return nil, corruptf("fixed_size_list dimension %d, schema says %d", fe.FixedSizeList.GetDimension(), dim)
		}
		if dim > 0 && rows > math.MaxInt64/int64(dim) {
			return nil, corruptf("fixed_size_list page too large")
		}
		items = rows * int64(dim)
		d.items, e, err = nullable(fe.FixedSizeList.GetItems(), p, items)
		if err != nil || d.items.allNull {
			return d, err
		}
		if e == nil {
			return nil, corruptf("nullable encoding without values")
		}
	} else if dim != 1 {
		return nil, unsupportedf("%s page for a fixed_size_list field", encName(e))
	}
	d.values, err = flat(e, p, bits, items)
	return d, err
}

// binDesc describes a page of a string/binary column: Binary (u64 end
// offsets + bytes), or Dictionary (indices + Binary items).
type binDesc struct {
	outer   validity // a Nullable around the whole page (Lance writes none)
	indices bufRange // u64 end offsets, nulls as end+adj
	bytes   bufRange
	adj     uint64
	dict    *dictDesc
}

type dictDesc struct {
	indices bufRange
	bits    int
	n       int64 // dictionary items
	items   *binDesc
}

func parseBinaryPage(e *pb.ArrayEncoding, p *pageBufs, rows int64) (*binDesc, error) {
	outer, inner, err := nullable(e, p, rows)
	if err != nil {
		return nil, err
	}
	if outer.allNull {
		return &binDesc{outer: outer}, nil
	}
	if inner == nil {
		return nil, corruptf("nullable encoding without values")
	}
	if de, ok := inner.GetArrayEncoding().(*pb.ArrayEncoding_Dictionary); ok {
		n := int64(de.Dictionary.GetNumDictionaryItems())
		ib, err := parseBinaryPage(de.Dictionary.GetItems(), p, n)
		if err != nil {
			return nil, fmt.Errorf("dictionary items: %w", err)
		}
		if ib.dict != nil {
			return nil, unsupportedf("nested dictionary")
		}
		iv, ie, err := nullable(de.Dictionary.GetIndices(), p, rows)
		if err != nil {
			return nil, fmt.Errorf("dictionary indices: %w", err)
		}
		if iv.hasNulls() {
			return nil, unsupportedf("dictionary indices with a validity bitmap")
		}
		f, ok := ie.GetArrayEncoding().(*pb.ArrayEncoding_Flat)
		if !ok {
			return nil, unsupportedf("dictionary indices encoded as %s", encName(ie))
		}
		bits := int(f.Flat.GetBitsPerValue())
		if bits != 8 && bits != 16 && bits != 32 {
			return nil, unsupportedf("dictionary indices of %d bits", f.Flat.GetBitsPerValue())
		}
		ib2, err := flat(ie, p, bits, rows)
		if err != nil {
			return nil, fmt.Errorf("dictionary indices: %w", err)
		}
		return &binDesc{outer: outer, dict: &dictDesc{indices: ib2, bits: bits, n: n, items: ib}}, nil
	}
	be, ok := inner.GetArrayEncoding().(*pb.ArrayEncoding_Binary)
	if !ok {
		return nil, unsupportedf("%s page for a string/binary field", encName(inner))
	}
	d := &binDesc{outer: outer, adj: be.Binary.GetNullAdjustment()}
	iv, ie, err := nullable(be.Binary.GetIndices(), p, rows)
	if err != nil {
		return nil, fmt.Errorf("binary indices: %w", err)
	}
	if iv.hasNulls() {
		return nil, unsupportedf("binary indices with nulls")
	}
	if d.indices, err = flat(ie, p, 64, rows); err != nil {
		return nil, fmt.Errorf("binary indices: %w", err)
	}
	bv, bytesEnc, err := nullable(be.Binary.GetBytes(), p, 0)
	if err != nil {
		return nil, fmt.Errorf("binary bytes: %w", err)
	}
	if bv.hasNulls() {
		return nil, unsupportedf("binary bytes with nulls")
	}
	if d.bytes, err = flat(bytesEnc, p, 8, 0); err != nil {
		return nil, fmt.Errorf("binary bytes: %w", err)
	}
	return d, nil
}

// listDesc describes a page of a list offsets column.
type listDesc struct {
	offsets  bufRange // u64 end offsets relative to the page, nulls as end+adj
	adj      uint64
	numItems uint64
}

func parseList(e *pb.ArrayEncoding, p *pageBufs, rows int64) (*listDesc, error) {
	le, ok := e.GetArrayEncoding().(*pb.ArrayEncoding_List)
	if !ok {
		return nil, unsupportedf("%s page for a list field", encName(e))
	}
	d := &listDesc{adj: le.List.GetNullOffsetAdjustment(), numItems: le.List.GetNumItems()}
	v, oe, err := nullable(le.List.GetOffsets(), p, rows)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	if v.hasNulls() {
		return nil, unsupportedf("list offsets with a validity bitmap")
	}
	if d.offsets, err = flat(oe, p, 64, rows); err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	return d, nil
}

// pieces maps sorted, disjoint row ranges of column c to page-local ranges.
type piece struct {
	page   int
	lo, hi int64 // rows within the page
}

type rowRange struct{ lo, hi int64 }

func (c *column) pieces(ranges []rowRange) ([]piece, error) {
	out := make([]piece, 0, len(ranges))
	for _, rg := range ranges {
		if rg.lo >= rg.hi {
			continue
		}
		if rg.lo < 0 || rg.hi > c.rows() {
			return nil, corruptf("column %d has %d rows, rows [%d, %d) requested", c.index, c.rows(), rg.lo, rg.hi)
		}
		i := sort.Search(len(c.pages), func(i int) bool { return c.starts[i+1] > rg.lo })
		for pos := rg.lo; pos < rg.hi; i++ {
			start := c.starts[i]
			hi := min(rg.hi, c.starts[i+1])
			out = append(out, piece{page: i, lo: pos - start, hi: hi - start})
			pos = hi
		}
	}
	return out, nil
}
