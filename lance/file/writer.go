package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

// DefaultPageBytes is the target page size when WriterOptions.PageBytes is 0.
const DefaultPageBytes = 8 << 20

// WriterOptions tune a Writer.
type WriterOptions struct {
	// PageBytes is the target size of one page of one column. A column
	// buffers its encoded values until they reach this size, then writes them
	// as a page. A single value larger than this gets a page of its own.
	// 0 means DefaultPageBytes.
	PageBytes int
	// HoldValues: the caller leaves the buffers of the arrays it writes
	// unchanged until Finish, so a binary page's values are written from
	// them (the arrays retained until their page is written) instead of
	// copied. A caller that refills its buffers between Writes (the index
	// builder does) must leave it false.
	HoldValues bool
	// Base is the file offset of the first byte written to the io.Writer:
	// the file already holds Base bytes before it (WAL frames a generation
	// is made of), which the file's pages may reference (Placed). Offsets
	// in the file's metadata and Info.Size count from the file's start.
	Base int64
	// Placed, when set, is asked for every binary (utf8/binary, 32- or
	// 64-bit offsets) array written: ok means the file already holds the
	// array's value bytes, values[offsets[0]:offsets[len]], at offset off
	// (below Base). The array then gets a page of its own whose bytes
	// buffer is that range; only its end offsets are written.
	Placed func(arr arrow.Array) (off int64, ok bool)
}

// Info describes a finished file.
type Info struct {
	Rows int64 // rows written
	Size int64 // bytes written, footer included
	// FieldIDs and ColumnIndices are parallel: field FieldIDs[i] starts at
	// physical column ColumnIndices[i]. They list every field of the schema
	// in pre-order (a list field maps to its offsets column, its child to the
	// first items column; a struct maps to its header column), which is what
	// a manifest's DataFile.fields / DataFile.column_indices hold.
	FieldIDs      []int32
	ColumnIndices []int32
}

// Writer streams Arrow record batches into one Lance 2.0 data file.
//
// It holds at most about one page (PageBytes) of encoded data per physical
// column (a binary column's values as references to the appended arrays,
// which it retains until their page is written); everything else goes
// straight to the underlying io.Writer, which is written sequentially and
// never seeked. A Writer is not safe for concurrent use.
type Writer struct {
	w         io.Writer
	pos       int64
	schema    *schema.Schema
	pageBytes int
	hold      bool // WriterOptions.HoldValues
	placed    func(arrow.Array) (int64, bool)
	base      int64 // WriterOptions.Base: placed bytes lie below it
	cols      []*pb.ColumnMetadata
	fields    []colWriter
	rows      int64
	fieldIDs  []int32
	colIdx    []int32
	err       error // sticky: after a failed write the file is unusable
	finished  bool
}

// colWriter encodes one field (and its children) into pages.
type colWriter interface {
	// append encodes all rows of arr, writing pages as they fill.
	append(arr arrow.Array) error
	// flush writes any buffered rows (of this field and its children).
	flush() error
	// finish writes the pages that can only be written at the end (struct
	// header pages). It is called once, after flush.
	finish() error
}

var zeroPad [bufferAlign]byte

// NewWriter starts a Lance 2.0 file with schema s on w.
func NewWriter(w io.Writer, s *schema.Schema, opts WriterOptions) (*Writer, error) {
	if w == nil || s == nil {
		return nil, errors.New("lance/file: NewWriter needs a writer and a schema")
	}
	if opts.Base < 0 {
		return nil, errors.New("lance/file: negative Base")
	}
	fw := &Writer{w: w, pos: opts.Base, schema: s, pageBytes: opts.PageBytes, hold: opts.HoldValues, placed: opts.Placed, base: opts.Base}
	if fw.pageBytes <= 0 {
		fw.pageBytes = DefaultPageBytes
	}
	for _, f := range s.Fields {
		cw, err := fw.newColWriter(f)
		if err != nil {
			return nil, err
		}
		fw.fields = append(fw.fields, cw)
	}
	return fw, nil
}

func (w *Writer) addColumn(fieldID int32) int {
	idx := len(w.cols)
	w.cols = append(w.cols, &pb.ColumnMetadata{})
	w.fieldIDs = append(w.fieldIDs, fieldID)
	w.colIdx = append(w.colIdx, int32(idx))
	return idx
}

func (w *Writer) newColWriter(f *schema.Field) (colWriter, error) {
	switch t := f.Type.(type) {
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		return &binaryWriter{w: w, col: w.addColumn(f.ID)}, nil
	case *arrow.BooleanType:
		return &fixedWriter{w: w, col: w.addColumn(f.ID), bits: 1, dim: 1}, nil
	case *arrow.DictionaryType:
		if !dictTypeOK(t) {
			return nil, fmt.Errorf("%w: field %q: type %s", ErrUnsupported, f.Name, t)
		}
		return newDictWriter(w, w.addColumn(f.ID), t), nil
	case *arrow.ListType, *arrow.LargeListType:
		if len(f.Children) != 1 {
			return nil, fmt.Errorf("lance/file: list field %q has %d children, want 1", f.Name, len(f.Children))
		}
		if f.Children[0].Type.ID() == arrow.DICTIONARY {
			return nil, fmt.Errorf("%w: field %q: list of dictionaries", ErrUnsupported, f.Name)
		}
		lw := &listWriter{w: w, col: w.addColumn(f.ID)}
		child, err := w.newColWriter(f.Children[0])
		if err != nil {
			return nil, err
		}
		lw.child = child
		return lw, nil
	case *arrow.StructType:
		if isPackedStruct(f.Metadata) {
			return nil, fmt.Errorf("%w: field %q: packed struct", ErrUnsupported, f.Name)
		}
		if len(f.Children) != t.NumFields() {
			return nil, fmt.Errorf("lance/file: struct field %q has %d children, type has %d", f.Name, len(f.Children), t.NumFields())
		}
		sw := &structWriter{w: w, col: w.addColumn(f.ID)}
		for _, c := range f.Children {
			if c.Type.ID() == arrow.DICTIONARY {
				return nil, fmt.Errorf("%w: field %q: struct member %q is a dictionary", ErrUnsupported, f.Name, c.Name)
			}
			cw, err := w.newColWriter(c)
			if err != nil {
				return nil, err
			}
			sw.children = append(sw.children, cw)
		}
		return sw, nil
	case *arrow.FixedSizeListType:
		bits, ok := fixedBits(t.Elem())
		if !ok || t.Len() <= 0 {
			return nil, fmt.Errorf("%w: field %q: fixed_size_list of %s", ErrUnsupported, f.Name, t.Elem())
		}
		return &fixedWriter{w: w, col: w.addColumn(f.ID), bits: bits, dim: int(t.Len()), fsl: true}, nil
	default:
		bits, ok := fixedBits(f.Type)
		if !ok {
			return nil, fmt.Errorf("%w: field %q: type %s", ErrUnsupported, f.Name, f.Type)
		}
		return &fixedWriter{w: w, col: w.addColumn(f.ID), bits: bits, dim: 1}, nil
	}
}

// fixedBits returns the bits per value of a fixed-width, non-nested type.
func fixedBits(t arrow.DataType) (int, bool) {
	if t.ID() == arrow.BOOL {
		return 1, true
	}
	switch t.ID() {
	case arrow.FIXED_SIZE_LIST, arrow.STRUCT, arrow.DICTIONARY, arrow.EXTENSION, arrow.NULL:
		return 0, false
	}
	fw, ok := t.(arrow.FixedWidthDataType)
	if !ok {
		return 0, false
	}
	b := fw.BitWidth()
	if b <= 0 || b%8 != 0 {
		return 0, false
	}
	return b, true
}

// Write appends the rows of rec. Its columns must match the writer's schema
// (same number, same types, in schema order).
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return errors.New("lance/file: Write after Finish")
	}
	if int(rec.NumCols()) != len(w.schema.Fields) {
		return fmt.Errorf("lance/file: record has %d columns, schema has %d", rec.NumCols(), len(w.schema.Fields))
	}
	n := rec.NumRows()
	for i, f := range w.schema.Fields {
		col := rec.Column(i)
		if !compatible(col.DataType(), f.Type) {
			return fmt.Errorf("lance/file: column %d (%q) is %s, schema says %s", i, f.Name, col.DataType(), f.Type)
		}
		if int64(col.Len()) != n {
			return fmt.Errorf("lance/file: column %d (%q) has %d rows, record has %d", i, f.Name, col.Len(), n)
		}
		if !f.Nullable && col.NullN() > 0 {
			return fmt.Errorf("lance/file: column %q is not nullable but has %d nulls", f.Name, col.NullN())
		}
	}
	for i, fw := range w.fields {
		if err := fw.append(rec.Column(i)); err != nil {
			return w.fail(err)
		}
	}
	w.rows += n
	return nil
}

// compatible reports whether data of type a can be written to a column of
// type b: the same physical layout, ignoring field names and nullability of
// nested fields, or a's values for a dictionary column of them.
func compatible(a, b arrow.DataType) bool {
	if d, ok := b.(*arrow.DictionaryType); ok && a.ID() != arrow.DICTIONARY {
		return arrow.TypeEqual(a, d.ValueType) // plain values for a dictionary column
	}
	if a.ID() != b.ID() {
		return false
	}
	switch at := a.(type) {
	case *arrow.ListType:
		return compatible(at.Elem(), b.(*arrow.ListType).Elem())
	case *arrow.LargeListType:
		return compatible(at.Elem(), b.(*arrow.LargeListType).Elem())
	case *arrow.FixedSizeListType:
		bt := b.(*arrow.FixedSizeListType)
		return at.Len() == bt.Len() && compatible(at.Elem(), bt.Elem())
	case *arrow.StructType:
		bt := b.(*arrow.StructType)
		if at.NumFields() != bt.NumFields() {
			return false
		}
		for i := range at.NumFields() {
			if !compatible(at.Field(i).Type, bt.Field(i).Type) {
				return false
			}
		}
		return true
	case *arrow.TimestampType:
		return at.Unit == b.(*arrow.TimestampType).Unit
	}
	return arrow.TypeEqual(a, b)
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

func (w *Writer) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.w.Write(b)
	w.pos += int64(n)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return w.fail(fmt.Errorf("lance/file: write: %w", err))
	}
	return nil
}

// writeBuffer writes one data buffer and pads the file to the next 64-byte
// boundary, so every buffer starts aligned.
func (w *Writer) writeBuffer(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := w.write(b); err != nil {
		return err
	}
	if pad := int(-w.pos & (bufferAlign - 1)); pad > 0 {
		return w.write(zeroPad[:pad])
	}
	return nil
}

// writePage writes the buffers of one page and records the page.
func (w *Writer) writePage(col, rows int, enc *pb.ArrayEncoding, bufs ...[]byte) error {
	parts := make([][][]byte, len(bufs))
	for i, b := range bufs {
		parts[i] = [][]byte{b}
	}
	return w.writePageParts(col, rows, enc, parts)
}

// writePageParts is writePage for buffers given as pieces that
// concatenate to them (a binary page's values, still in the arrays they
// came in, see binaryWriter).
func (w *Writer) writePageParts(col, rows int, enc *pb.ArrayEncoding, bufs [][][]byte) error {
	anyb, err := anyBytes(arrayEncodingURL, enc)
	if err != nil {
		return w.fail(err)
	}
	page := &pb.ColumnMetadata_Page{
		BufferOffsets: make([]uint64, len(bufs)),
		BufferSizes:   make([]uint64, len(bufs)),
		Length:        uint64(rows),
		Encoding:      directEncoding(anyb),
	}
	for i, parts := range bufs {
		page.BufferOffsets[i] = uint64(w.pos)
		start := w.pos
		for _, b := range parts {
			if len(b) > 0 {
				if err := w.write(b); err != nil {
					return err
				}
			}
		}
		page.BufferSizes[i] = uint64(w.pos - start)
		if pad := int(-w.pos & (bufferAlign - 1)); pad > 0 && w.pos > start {
			if err := w.write(zeroPad[:pad]); err != nil {
				return err
			}
		}
	}
	w.cols[col].Pages = append(w.cols[col].Pages, page)
	return nil
}

// Finish flushes all columns and writes global buffer 0 (the schema and row
// count), the column metadata, the offset tables and the footer. The
// underlying writer is not closed.
func (w *Writer) Finish() (Info, error) {
	if w.err != nil {
		return Info{}, w.err
	}
	if w.finished {
		return Info{}, errors.New("lance/file: Finish called twice")
	}
	w.finished = true
	for _, f := range w.fields {
		if err := f.flush(); err != nil {
			return Info{}, w.fail(err)
		}
	}
	for _, f := range w.fields {
		if err := f.finish(); err != nil {
			return Info{}, w.fail(err)
		}
	}
	// Global buffer 0: the FileDescriptor. It must precede the column
	// metadata (Lance reads from here to the end as one block).
	fd, err := proto.Marshal(&pb.FileDescriptor{
		Schema: &pb.Schema{Fields: w.schema.Proto(), Metadata: w.schema.Metadata},
		Length: uint64(w.rows),
	})
	if err != nil {
		return Info{}, w.fail(err)
	}
	gb0 := [2]uint64{uint64(w.pos), uint64(len(fd))}
	if err := w.write(fd); err != nil {
		return Info{}, err
	}
	colEnc, err := anyBytes(columnEncodingURL, &pb.ColumnEncoding{
		ColumnEncoding: &pb.ColumnEncoding_Values{Values: &pb.SimpleStruct{}},
	})
	if err != nil {
		return Info{}, w.fail(err)
	}
	ft := footer{columnMetaStart: uint64(w.pos), numGlobalBufs: 1, numColumns: uint32(len(w.cols)),
		major: writeMajor, minor: writeMinor}
	cmo := make([]byte, 0, 16*len(w.cols))
	for _, cm := range w.cols {
		cm.Encoding = directEncoding(colEnc)
		b, err := proto.Marshal(cm)
		if err != nil {
			return Info{}, w.fail(err)
		}
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(w.pos))
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(len(b)))
		if err := w.write(b); err != nil {
			return Info{}, err
		}
	}
	w.cols = nil // no longer needed once written
	ft.cmoTableStart = uint64(w.pos)
	if err := w.write(cmo); err != nil {
		return Info{}, err
	}
	ft.gboTableStart = uint64(w.pos)
	tail := make([]byte, 0, 16+footerLen)
	tail = binary.LittleEndian.AppendUint64(tail, gb0[0])
	tail = binary.LittleEndian.AppendUint64(tail, gb0[1])
	tail = ft.appendTo(tail)
	if err := w.write(tail); err != nil {
		return Info{}, err
	}
	return Info{
		Rows:          w.rows,
		Size:          w.pos,
		FieldIDs:      append([]int32(nil), w.fieldIDs...),
		ColumnIndices: append([]int32(nil), w.colIdx...),
	}, nil
}

// ---------------------------------------------------------------- bitmaps

// growBits extends bitmap b with zero bytes so that it holds n bits.
// reserve returns b with room for n more bytes. When it must grow it at
// least doubles the capacity, but not past limit (a page's size) unless n
// needs it: past 256 bytes append grows by a quarter, so filling a page
// buffer of n bytes allocated and copied about 4n bytes (most of what a
// small index build allocated), and plain doubling could hold twice a page.
func reserve(b []byte, n, limit int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	// make, not slices.Grow: append's growth rounds a doubling up by
	// further quarter steps, past the page.
	nb := make([]byte, len(b), len(b)+max(n, min(cap(b), limit-len(b))))
	copy(nb, b)
	return nb
}

func growBits(b []byte, n int) []byte {
	need := (n + 7) / 8
	for len(b) < need {
		b = append(b, 0)
	}
	return b
}

// appendValidity appends n validity bits of arr (starting at its logical row
// off) to dst, which holds have bits, and returns dst and the number of nulls
// appended.
func appendValidity(dst []byte, have int, arr arrow.Array, off, n int) ([]byte, int) {
	dst = growBits(dst, have+n)
	if arr.NullN() == 0 || arr.NullBitmapBytes() == nil {
		bitutil.SetBitsTo(dst, int64(have), int64(n), true)
		return dst, 0
	}
	bitutil.CopyBitmap(arr.NullBitmapBytes(), arr.Data().Offset()+off, n, dst, have)
	return dst, n - bitutil.CountSetBits(dst, have, n)
}

// ---------------------------------------------------------------- fixed width

// fixedWriter encodes fixed-width values (bool as bits) and fixed-size lists
// of them into one column.
type fixedWriter struct {
	w    *Writer
	col  int
	bits int  // bits per item
	dim  int  // items per row
	fsl  bool // fixed_size_list: rows and items are distinct

	rows, rowNulls int
	rowValid       []byte
	itemNulls      int
	itemValid      []byte // fsl only
	values         []byte
	// lazyNulls: the page so far is this many null rows and nothing else,
	// with no validity or values built for them (an all-null page has no
	// buffers); they are built if a value follows on the page.
	lazyNulls int
}

func (c *fixedWriter) size() int { return len(c.values) + len(c.rowValid) + len(c.itemValid) }

func (c *fixedWriter) append(arr arrow.Array) error {
	n := arr.Len()
	if n == 0 {
		return nil
	}
	rowBits := c.bits*c.dim + 1
	if c.fsl {
		rowBits += c.dim
	}
	if c.rowNulls == c.rows && arr.NullN() == n {
		// Nulls on a page of nulls: only counted (a sparse schema's
		// unused columns cost a seal nothing per row).
		c.rows += n
		c.rowNulls += n
		c.itemNulls += n * c.dim
		c.lazyNulls += n
		return nil
	}
	if c.lazyNulls > 0 {
		if c.lazyNulls*rowBits/8+c.size() > c.w.pageBytes {
			if err := c.flush(); err != nil {
				return err
			}
		} else {
			// Build what the counted nulls stand for: unset validity
			// bits and zero values.
			c.rowValid = growBits(c.rowValid, c.rows)
			if c.fsl {
				c.itemValid = growBits(c.itemValid, c.rows*c.dim)
			}
			if c.bits == 1 {
				c.values = growBits(c.values, c.rows*c.dim)
			} else {
				c.values = append(c.values, make([]byte, c.rows*c.dim*c.bits/8-len(c.values))...)
			}
			c.lazyNulls = 0
		}
	}
	for off := 0; off < n; {
		k := (c.w.pageBytes - c.size()) * 8 / rowBits
		if k <= 0 {
			if c.rows > 0 {
				if err := c.flush(); err != nil {
					return err
				}
				continue
			}
			k = 1
		}
		k = min(k, n-off)
		if err := c.appendRows(arr, off, k); err != nil {
			return err
		}
		off += k
		if c.size() >= c.w.pageBytes {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *fixedWriter) appendRows(arr arrow.Array, off, k int) error {
	var nulls int
	c.rowValid, nulls = appendValidity(c.rowValid, c.rows, arr, off, k)
	c.rowNulls += nulls
	vals := arr
	itemOff, nItems := off, k
	firstItem := c.rows // index of the first new item in this page
	if c.fsl {
		fsl, ok := arr.(*array.FixedSizeList)
		if !ok {
			return fmt.Errorf("lance/file: expected a fixed_size_list array, got %T", arr)
		}
		vals = fsl.ListValues()
		itemOff = (arr.Data().Offset() + off) * c.dim
		nItems = k * c.dim
		firstItem = c.rows * c.dim
		if itemOff+nItems > vals.Len() {
			return fmt.Errorf("lance/file: fixed_size_list child too short (%d < %d)", vals.Len(), itemOff+nItems)
		}
		var itemNulls int
		c.itemValid, itemNulls = appendValidity(c.itemValid, firstItem, vals, itemOff, nItems)
		if nulls > 0 { // items of null rows are null too
			for r := range k {
				if !bitutil.BitIsSet(c.rowValid, c.rows+r) {
					bitutil.SetBitsTo(c.itemValid, int64(firstItem+r*c.dim), int64(c.dim), false)
				}
			}
		}
		if nulls > 0 || itemNulls > 0 {
			itemNulls = nItems - bitutil.CountSetBits(c.itemValid, firstItem, nItems)
		}
		c.itemNulls += itemNulls
	}
	data := vals.Data()
	var src []byte
	if len(data.Buffers()) > 1 && data.Buffers()[1] != nil {
		src = data.Buffers()[1].Bytes()
	}
	start := data.Offset() + itemOff
	// Which bitmap says whether item i of this chunk is valid.
	valid, validBase := c.rowValid, c.rows
	if c.fsl {
		valid, validBase = c.itemValid, firstItem
	}
	anyNull := nulls > 0 || (c.fsl && vals.NullN() > 0)
	if c.bits == 1 {
		if len(src)*8 < start+nItems {
			return fmt.Errorf("lance/file: boolean values buffer too short")
		}
		c.values = growBits(c.values, firstItem+nItems)
		bitutil.CopyBitmap(src, start, nItems, c.values, firstItem)
		if anyNull {
			for i := range nItems {
				if !bitutil.BitIsSet(valid, validBase+i) {
					bitutil.ClearBit(c.values, firstItem+i)
				}
			}
		}
	} else {
		width := c.bits / 8
		lo, hi := start*width, (start+nItems)*width
		if hi > len(src) {
			return fmt.Errorf("lance/file: values buffer too short (%d < %d)", len(src), hi)
		}
		base := len(c.values)
		c.values = append(reserve(c.values, hi-lo, c.w.pageBytes), src[lo:hi]...)
		if anyNull { // null slots hold zeros
			for i := range nItems {
				if !bitutil.BitIsSet(valid, validBase+i) {
					clear(c.values[base+i*width : base+(i+1)*width])
				}
			}
		}
	}
	c.rows += k
	return nil
}

func (c *fixedWriter) flush() error {
	if c.rows == 0 {
		return nil
	}
	rows := c.rows
	nItems := rows * c.dim
	var (
		enc  *pb.ArrayEncoding
		bufs [][]byte
	)
	switch {
	case c.rowNulls == rows:
		enc = encAllNulls()
	case !c.fsl && c.rowNulls == 0:
		enc, bufs = encNoNulls(encFlat(uint64(c.bits), 0)), [][]byte{c.values}
	case !c.fsl:
		enc, bufs = encSomeNulls(encFlat(1, 0), encFlat(uint64(c.bits), 1)), [][]byte{c.rowValid, c.values}
	default:
		next := uint32(0)
		if c.rowNulls > 0 {
			next = 1
			bufs = append(bufs, c.rowValid)
		}
		var items *pb.ArrayEncoding
		switch c.itemNulls {
		case 0:
			items = encNoNulls(encFlat(uint64(c.bits), next))
			bufs = append(bufs, c.values)
		case nItems:
			items = encAllNulls()
		default:
			items = encSomeNulls(encFlat(1, next), encFlat(uint64(c.bits), next+1))
			bufs = append(bufs, c.itemValid, c.values)
		}
		enc = encFSL(uint32(c.dim), items)
		if c.rowNulls == 0 {
			enc = encNoNulls(enc)
		} else {
			enc = encSomeNulls(encFlat(1, 0), enc)
		}
	}
	if err := c.w.writePage(c.col, rows, enc, bufs...); err != nil {
		return err
	}
	c.rows, c.rowNulls, c.itemNulls, c.lazyNulls = 0, 0, 0, 0
	c.rowValid, c.itemValid, c.values = c.rowValid[:0], c.itemValid[:0], c.values[:0]
	return nil
}

func (c *fixedWriter) finish() error { return nil }

// ---------------------------------------------------------------- binary

// binaryWriter encodes utf8/binary (32- or 64-bit offsets alike) as Lance's
// Binary encoding: u64 end offsets relative to the page, then the bytes.
// The bytes are not copied: a page's values are runs of the appended
// arrays' value buffers (held until the page is written), which go to the
// file as they are. Copying them cost a seal more than encoding the rest.
type binaryWriter struct {
	w           *Writer
	col         int
	rows, nulls int
	valid       []byte
	ends        []byte   // u64 little-endian end offsets, nulls not yet adjusted
	data        [][]byte // the page's values: runs of held arrays' value bytes
	copied      []byte   // or, without HoldValues, the values copied
	dataLen     int
	held        []arrow.Array // the arrays data points into, retained
	// lazyNulls: the page so far is this many nulls and nothing else, with
	// no end offsets or validity built for them (an all-null page has no
	// buffers); they are built if a value follows on the page.
	lazyNulls int
}

func (c *binaryWriter) size() int { return c.dataLen + len(c.ends) + len(c.valid) }

// addData appends v (a run of arr's value bytes) to the page's values,
// extending the last run when v continues it.
func (c *binaryWriter) addData(arr arrow.Array, v []byte) {
	if len(v) == 0 {
		return
	}
	c.dataLen += len(v)
	if !c.w.hold {
		c.copied = append(reserve(c.copied, len(v), c.w.pageBytes), v...)
		return
	}
	if n := len(c.data); n > 0 {
		last := c.data[n-1]
		if cap(last)-len(last) >= len(v) && unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), len(last)) == unsafe.Pointer(unsafe.SliceData(v)) {
			c.data[n-1] = last[:len(last)+len(v)]
			return
		}
	}
	if k := len(c.held); k == 0 || c.held[k-1] != arr {
		arr.Retain()
		c.held = append(c.held, arr)
	}
	c.data = append(c.data, v)
}

func (c *binaryWriter) release() {
	for _, a := range c.held {
		a.Release()
	}
	clear(c.held)
	c.held = c.held[:0]
	clear(c.data)
	c.data, c.dataLen = c.data[:0], 0
	c.copied = c.copied[:0]
}

func (c *binaryWriter) append(arr arrow.Array) error {
	n := arr.Len()
	if n == 0 {
		return nil
	}
	if c.nulls == c.rows && arr.NullN() == n {
		// Nulls on a page of nulls: only counted (a sparse schema's unused
		// text columns cost a seal nothing per row).
		c.rows += n
		c.nulls += n
		c.lazyNulls += n
		return nil
	}
	if c.lazyNulls > 0 {
		if 8*c.lazyNulls+c.size() > c.w.pageBytes {
			if err := c.flush(); err != nil {
				return err
			}
		} else {
			c.ends = append(c.ends, make([]byte, 8*c.lazyNulls)...)
			c.valid = growBits(c.valid, c.rows)
			c.lazyNulls = 0
		}
	}
	data := arr.Data()
	bufs := data.Buffers()
	if len(bufs) < 3 || bufs[1] == nil {
		return fmt.Errorf("lance/file: malformed %s array", arr.DataType())
	}
	if c.w.placed != nil {
		if off, ok := c.w.placed(arr); ok {
			if err := c.flush(); err != nil {
				return err
			}
			if arr.DataType().ID() == arrow.STRING || arr.DataType().ID() == arrow.BINARY {
				offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())
				return c.writePlaced(arr, offs, off)
			}
			return c.writePlaced(arr, arrow.Int64Traits.CastFromBytes(bufs[1].Bytes()), off)
		}
	}
	var values []byte
	if bufs[2] != nil {
		values = bufs[2].Bytes()
	}
	switch arr.DataType().ID() {
	case arrow.STRING, arrow.BINARY:
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())
		if len(offs) < data.Offset()+n+1 {
			return fmt.Errorf("lance/file: offsets buffer too short")
		}
		return appendBinary(c, arr, offs[data.Offset():data.Offset()+n+1], values)
	default:
		offs := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())
		if len(offs) < data.Offset()+n+1 {
			return fmt.Errorf("lance/file: offsets buffer too short")
		}
		return appendBinary(c, arr, offs[data.Offset():data.Offset()+n+1], values)
	}
}

func appendBinary[T int32 | int64](c *binaryWriter, arr arrow.Array, offs []T, values []byte) error {
	n := len(offs) - 1
	var nullBits []byte
	nullOff := arr.Data().Offset()
	if arr.NullN() > 0 {
		nullBits = arr.NullBitmapBytes()
	}
	limit := c.w.pageBytes
	for r := 0; r < n; {
		if nullBits != nil {
			// Row by row: null rows contribute no bytes.
			valid := bitutil.BitIsSet(nullBits, nullOff+r)
			l := 0
			if valid {
				l = int(offs[r+1] - offs[r])
			}
			if c.rows > 0 && c.size()+l+8 > limit {
				if err := c.flush(); err != nil {
					return err
				}
			}
			c.valid = growBits(c.valid, c.rows+1)
			if valid {
				lo, hi := int(offs[r]), int(offs[r+1])
				if lo < 0 || hi < lo || hi > len(values) {
					return fmt.Errorf("lance/file: bad offsets in %s array", arr.DataType())
				}
				c.addData(arr, values[lo:hi])
				bitutil.SetBit(c.valid, c.rows)
			} else {
				c.nulls++
			}
			c.ends = binary.LittleEndian.AppendUint64(reserve(c.ends, 8, c.w.pageBytes), uint64(c.dataLen))
			c.rows++
			r++
		} else {
			// A run of rows that fits in the page (at least one row).
			room := limit - c.size()
			j := r + 1
			for j < n && int(offs[j+1]-offs[r])+8*(j+1-r) <= room {
				j++
			}
			if c.rows > 0 && int(offs[j]-offs[r])+8*(j-r) > room {
				if err := c.flush(); err != nil {
					return err
				}
				continue
			}
			lo, hi := int(offs[r]), int(offs[j])
			if lo < 0 || hi < lo || hi > len(values) {
				return fmt.Errorf("lance/file: bad offsets in %s array", arr.DataType())
			}
			base := uint64(c.dataLen) - uint64(lo)
			c.addData(arr, values[lo:hi])
			c.ends = reserve(c.ends, 8*(j-r), c.w.pageBytes)
			for q := r; q < j; q++ {
				c.ends = binary.LittleEndian.AppendUint64(c.ends, base+uint64(offs[q+1]))
			}
			c.valid = growBits(c.valid, c.rows+j-r)
			bitutil.SetBitsTo(c.valid, int64(c.rows), int64(j-r), true)
			c.rows += j - r
			r = j
		}
		if c.size() >= limit {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *binaryWriter) flush() error {
	if c.rows == 0 {
		return nil
	}
	var err error
	if c.nulls == c.rows {
		// No bytes at all for a page of nulls, as LanceDB writes it (a
		// sparse schema's unused text columns would cost 8 bytes a row).
		err = c.w.writePage(c.col, c.rows, encAllNulls())
	} else {
		adj := uint64(c.dataLen) + 1
		if c.nulls > 0 {
			for i := range c.rows {
				if !bitutil.BitIsSet(c.valid, i) {
					p := c.ends[8*i : 8*i+8]
					binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)+adj)
				}
			}
		}
		enc := encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), adj)
		data := c.data
		if !c.w.hold {
			data = [][]byte{c.copied}
		}
		err = c.w.writePageParts(c.col, c.rows, enc, [][][]byte{{c.ends}, data})
	}
	c.release()
	if err != nil {
		return err
	}
	c.rows, c.nulls, c.lazyNulls = 0, 0, 0
	c.valid, c.ends = c.valid[:0], c.ends[:0]
	return nil
}

func (c *binaryWriter) finish() error { return nil }

// writePlaced writes arr as one page whose bytes buffer is already in the
// file at off (WriterOptions.Placed): only its end offsets are written.
func (c *binaryWriter) writePlaced(arr arrow.Array, offs any, off int64) error {
	n, at := arr.Len(), arr.Data().Offset()
	var ends []byte
	var total int64
	var err error
	switch o := offs.(type) {
	case []int32:
		ends, total, err = placedEnds(arr, o, at, n)
	case []int64:
		ends, total, err = placedEnds(arr, o, at, n)
	}
	if err != nil {
		return err
	}
	if total < 0 || off < 0 || off+total > c.w.base {
		return fmt.Errorf("lance/file: placed values of %d bytes at %d are not before the writer's base %d", total, off, c.w.base)
	}
	adj := uint64(total) + 1
	enc := encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), adj)
	anyb, err := anyBytes(arrayEncodingURL, enc)
	if err != nil {
		return c.w.fail(err)
	}
	page := &pb.ColumnMetadata_Page{
		BufferOffsets: []uint64{uint64(c.w.pos), uint64(off)},
		BufferSizes:   []uint64{uint64(len(ends)), uint64(total)},
		Length:        uint64(n),
		Encoding:      directEncoding(anyb),
	}
	if err := c.w.writeBuffer(ends); err != nil {
		return err
	}
	c.w.cols[c.col].Pages = append(c.w.cols[c.col].Pages, page)
	return nil
}

// placedEnds returns a placed page's end offsets (u64, relative to its
// first value; a null row's plus total+1) and its values' total size.
func placedEnds[T int32 | int64](arr arrow.Array, offs []T, at, n int) ([]byte, int64, error) {
	if len(offs) < at+n+1 {
		return nil, 0, fmt.Errorf("lance/file: offsets buffer too short")
	}
	offs = offs[at : at+n+1]
	first := offs[0]
	total := int64(offs[n] - first)
	ends := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(ends[8*i:], uint64(offs[i+1]-first))
	}
	if arr.NullN() > 0 {
		adj := uint64(total) + 1
		bits := arr.NullBitmapBytes()
		for i := range n {
			if !bitutil.BitIsSet(bits, at+i) {
				p := ends[8*i:]
				binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)+adj)
			}
		}
	}
	return ends, total, nil
}

// ---------------------------------------------------------------- list

// listWriter encodes list / large_list offsets and validity into one column
// and hands the items to the child writer (the following column(s)).
type listWriter struct {
	w           *Writer
	col         int
	child       colWriter
	rows, nulls int
	valid       []byte
	ends        []byte // u64 little-endian end offsets relative to the page
	items       uint64 // items referenced by the buffered rows
	// lazyNulls: the page so far is this many null lists and nothing
	// else, with no offsets or validity built for them yet.
	lazyNulls int
}

func (c *listWriter) size() int { return len(c.ends) + len(c.valid) }

func (c *listWriter) append(arr arrow.Array) error {
	n := arr.Len()
	if n == 0 {
		return nil
	}
	ll, ok := arr.(array.ListLike)
	if !ok {
		return fmt.Errorf("lance/file: expected a list array, got %T", arr)
	}
	if c.nulls == c.rows && arr.NullN() == n && c.rows+n <= c.w.pageBytes/9 {
		// Nulls on a page of nulls: only counted until a value or the
		// flush needs their offsets.
		c.rows += n
		c.nulls += n
		c.lazyNulls += n
		return nil
	}
	c.buildLazy()
	data := arr.Data()
	if len(data.Buffers()) < 2 || data.Buffers()[1] == nil {
		return fmt.Errorf("lance/file: malformed %s array", arr.DataType())
	}
	var offs []int64
	switch arr.DataType().ID() {
	case arrow.LIST:
		o32 := arrow.Int32Traits.CastFromBytes(data.Buffers()[1].Bytes())
		if len(o32) < data.Offset()+n+1 {
			return fmt.Errorf("lance/file: list offsets buffer too short")
		}
		o32 = o32[data.Offset() : data.Offset()+n+1]
		offs = make([]int64, len(o32))
		for i, v := range o32 {
			offs[i] = int64(v)
		}
	case arrow.LARGE_LIST:
		o64 := arrow.Int64Traits.CastFromBytes(data.Buffers()[1].Bytes())
		if len(o64) < data.Offset()+n+1 {
			return fmt.Errorf("lance/file: list offsets buffer too short")
		}
		offs = o64[data.Offset() : data.Offset()+n+1]
	default:
		return fmt.Errorf("lance/file: unsupported list type %s", arr.DataType())
	}
	values := ll.ListValues()
	for r := 0; r < n; {
		k := (c.w.pageBytes - c.size()) / 9
		if k <= 0 {
			if c.rows > 0 {
				if err := c.flush(); err != nil {
					return err
				}
				continue
			}
			k = 1
		}
		k = min(k, n-r)
		first, last := offs[r], offs[r+k]
		if first < 0 || last < first || last > int64(values.Len()) {
			return fmt.Errorf("lance/file: bad list offsets")
		}
		var nulls int
		c.valid, nulls = appendValidity(c.valid, c.rows, arr, r, k)
		c.nulls += nulls
		c.ends = reserve(c.ends, 8*k, c.w.pageBytes)
		for q := r; q < r+k; q++ {
			c.ends = binary.LittleEndian.AppendUint64(c.ends, c.items+uint64(offs[q+1]-first))
		}
		c.items += uint64(last - first)
		c.rows += k
		if last > first {
			items := array.NewSlice(values, first, last)
			err := c.child.append(items)
			items.Release()
			if err != nil {
				return err
			}
		}
		r += k
		if c.size() >= c.w.pageBytes {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the buffered offsets as a page, then flushes the items: Lance
// readers expect an items page never to be shared by two offsets pages.
func (c *listWriter) flush() error {
	c.buildLazy()
	if c.rows > 0 {
		adj := c.items + 1
		if c.nulls > 0 {
			for i := range c.rows {
				if !bitutil.BitIsSet(c.valid, i) {
					p := c.ends[8*i : 8*i+8]
					binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)+adj)
				}
			}
		}
		enc := encList(encNoNulls(encFlat(64, 0)), adj, c.items)
		if err := c.w.writePage(c.col, c.rows, enc, c.ends); err != nil {
			return err
		}
		c.rows, c.nulls, c.items = 0, 0, 0
		c.valid, c.ends = c.valid[:0], c.ends[:0]
	}
	return c.child.flush()
}

// buildLazy builds the offsets and validity of the counted null lists
// (all before any item: end offset 0, not valid).
func (c *listWriter) buildLazy() {
	if c.lazyNulls == 0 {
		return
	}
	c.valid = growBits(c.valid, c.rows)
	c.ends = append(c.ends, make([]byte, 8*c.rows-len(c.ends))...)
	c.lazyNulls = 0
}

func (c *listWriter) finish() error { return c.child.finish() }

// ---------------------------------------------------------------- struct

// structWriter writes the struct's header column (one page, no buffers, at
// the end) and hands each member to its own writer. Lance 2.0 stores no
// struct-level validity, so the struct's nulls are pushed into its members:
// a null struct row reads back as a struct whose members are all null.
type structWriter struct {
	w        *Writer
	col      int
	children []colWriter
	rows     int
}

func (c *structWriter) append(arr arrow.Array) error {
	s, ok := arr.(*array.Struct)
	if !ok {
		return fmt.Errorf("lance/file: expected a struct array, got %T", arr)
	}
	if s.NumField() != len(c.children) {
		return fmt.Errorf("lance/file: struct array has %d fields, want %d", s.NumField(), len(c.children))
	}
	members := structMembers(s)
	defer func() {
		for _, m := range members {
			m.Release()
		}
	}()
	for i, cw := range c.children {
		if err := cw.append(members[i]); err != nil {
			return err
		}
	}
	c.rows += arr.Len()
	return nil
}

// structMembers returns the members of s (sliced to s's rows) with s's nulls
// pushed into each member's validity. The caller releases them.
func structMembers(s *array.Struct) []arrow.Array {
	out := make([]arrow.Array, s.NumField())
	for i := range out {
		m := s.Field(i)
		if s.NullN() == 0 {
			m.Retain()
			out[i] = m
			continue
		}
		md := m.Data()
		n, off := md.Len(), md.Offset()
		bits := make([]byte, (off+n+7)/8)
		sv := s.NullBitmapBytes()
		if m.NullN() == 0 || m.NullBitmapBytes() == nil {
			bitutil.CopyBitmap(sv, s.Data().Offset(), n, bits, off)
		} else {
			bitutil.BitmapAnd(sv, m.NullBitmapBytes(), int64(s.Data().Offset()), int64(off), bits, int64(off), int64(n))
		}
		bufs := append([]*memory.Buffer{memory.NewBufferBytes(bits)}, md.Buffers()[1:]...)
		d := array.NewData(md.DataType(), n, bufs, md.Children(), array.UnknownNullCount, off)
		out[i] = array.MakeFromData(d)
		d.Release()
	}
	return out
}

func (c *structWriter) flush() error {
	for _, cw := range c.children {
		if err := cw.flush(); err != nil {
			return err
		}
	}
	return nil
}

func (c *structWriter) finish() error {
	for _, cw := range c.children {
		if err := cw.finish(); err != nil {
			return err
		}
	}
	return c.w.writePage(c.col, c.rows, encStruct())
}
