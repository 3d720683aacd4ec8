package file

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/pb"
)

// Dictionary-typed columns (Arrow dictionary<int, utf8|binary>, Lance logical
// type "dict:{value}:{index}:false"). Lance 2.0 stores each page as
//
//	Dictionary{indices=Nullable.no_nulls(Flat{index bits, buf 0}),
//	           items=Binary{indices=no_nulls(Flat{64, buf 1}), bytes=Flat{8, buf 2}, adj},
//	           num_dictionary_items=N}
//
// with no Nullable around it. Unlike the dictionary pages Lance picks for
// plain string columns, the indices are the Arrow keys as they are (0 is the
// first item), and a null row points at a null item: nulls live in the
// dictionary, not in the indices.

// dictTypeOK reports whether t is a dictionary this package reads and
// writes: integer keys of up to 32 bits, utf8 or binary values (not their
// 64-bit offset variants, which arrow-go cannot build dictionaries of).
func dictTypeOK(t *arrow.DictionaryType) bool {
	switch t.IndexType.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.UINT8, arrow.UINT16, arrow.UINT32:
	default:
		return false
	}
	switch t.ValueType.ID() {
	case arrow.STRING, arrow.BINARY:
		return true
	}
	return false
}

// dictPage describes one page of a dictionary-typed column.
type dictPage struct {
	allNull bool     // Nullable.all_nulls: every row null, no buffers
	indices bufRange // keys, bits wide
	bits    int
	n       int64    // dictionary items
	items   *binDesc // Binary-encoded items (nulls as end+adj)
}

func parseDictPage(e *pb.ArrayEncoding, p *pageBufs, rows int64) (*dictPage, error) {
	outer, inner, err := nullable(e, p, rows)
	if err != nil {
		return nil, err
	}
	if outer.allNull {
		return &dictPage{allNull: true}, nil
	}
	if outer.bitmap != nil {
		return nil, unsupportedf("validity bitmap around a dictionary page")
	}
	if inner == nil {
		return nil, corruptf("nullable encoding without values")
	}
	de, ok := inner.GetArrayEncoding().(*pb.ArrayEncoding_Dictionary)
	if !ok {
		return nil, unsupportedf("%s page for a dictionary field", encName(inner))
	}
	d := &dictPage{n: int64(de.Dictionary.GetNumDictionaryItems())}
	if d.items, err = parseBinaryPage(de.Dictionary.GetItems(), p, d.n); err != nil {
		return nil, fmt.Errorf("dictionary items: %w", err)
	}
	if d.items.dict != nil {
		return nil, unsupportedf("nested dictionary")
	}
	if d.items.outer.bitmap != nil {
		return nil, unsupportedf("dictionary items with a validity bitmap")
	}
	iv, ie, err := nullable(de.Dictionary.GetIndices(), p, rows)
	if err != nil {
		return nil, fmt.Errorf("dictionary indices: %w", err)
	}
	if iv.hasNulls() {
		return nil, unsupportedf("dictionary indices with nulls")
	}
	f, ok := ie.GetArrayEncoding().(*pb.ArrayEncoding_Flat)
	if !ok {
		return nil, unsupportedf("dictionary indices encoded as %s", encName(ie))
	}
	d.bits = int(f.Flat.GetBitsPerValue())
	if d.bits != 8 && d.bits != 16 && d.bits != 32 && d.bits != 64 {
		return nil, unsupportedf("dictionary indices of %d bits", f.Flat.GetBitsPerValue())
	}
	if d.indices, err = flat(ie, p, d.bits, rows); err != nil {
		return nil, fmt.Errorf("dictionary indices: %w", err)
	}
	return d, nil
}

// rawKey reads key i of a little-endian buffer of bits-wide integers.
func rawKey(b []byte, bits int, i int64) uint64 {
	switch bits {
	case 8:
		return uint64(b[i])
	case 16:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 32:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	default:
		return binary.LittleEndian.Uint64(b[8*i:])
	}
}

// maxDictItems is how many distinct items keys of type t can address.
func maxDictItems(t arrow.DataType) int64 {
	switch t.ID() {
	case arrow.INT8:
		return math.MaxInt8 + 1
	case arrow.UINT8:
		return math.MaxUint8 + 1
	case arrow.INT16:
		return math.MaxInt16 + 1
	case arrow.UINT16:
		return math.MaxUint16 + 1
	case arrow.INT32:
		return math.MaxInt32 + 1
	default: // uint32
		return math.MaxUint32 + 1
	}
}

func putKey(b []byte, bytes int, i int64, k uint64) {
	switch bytes {
	case 1:
		b[i] = byte(k)
	case 2:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(k))
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(k))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], k)
	}
}

// decodeDict reads rows of a dictionary-typed column into one Arrow
// dictionary array. Pages have dictionaries of their own; the output's
// dictionary is their union without duplicates (in first-seen order), so it
// fails with ErrUnsupported only if the distinct values of the rows read
// exceed what the index type addresses.
func (rc *readCtx) decodeDict(n *node, ranges []rowRange) (arrow.ArrayData, error) {
	dt := n.f.Type.(*arrow.DictionaryType)
	ps, rows, err := touched(n, ranges)
	if err != nil {
		return nil, err
	}
	// Round 1: keys and item offsets.
	reqs := make([]bufRange, 2*len(ps))
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*dictPage)
		if d.allNull {
			continue
		}
		w := int64(d.bits / 8)
		reqs[2*i] = bufRange{d.indices.off + p.lo*w, (p.hi - p.lo) * w}
		if !d.items.outer.allNull {
			reqs[2*i+1] = bufRange{d.items.indices.off, 8 * d.n}
		}
	}
	got, err := rc.fetch(reqs, nil)
	if err != nil {
		return nil, err
	}
	// Round 2: item bytes.
	ends := make([][]uint64, len(ps))
	valid := make([][]bool, len(ps))
	reqs2 := make([]bufRange, len(ps))
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*dictPage)
		if d.allNull || d.items.outer.allNull {
			continue
		}
		if ends[i], valid[i], err = itemOffsets(got[2*i+1], d.items.adj, d.n); err != nil {
			return nil, err
		}
		if ends[i][d.n] > uint64(d.items.bytes.size) {
			return nil, corruptf("field %q: dictionary items end at %d, beyond their %d bytes", n.f.Name, ends[i][d.n], d.items.bytes.size)
		}
		reqs2[i] = bufRange{d.items.bytes.off, int64(ends[i][d.n])}
	}
	got2, err := rc.fetch(reqs2, nil)
	if err != nil {
		return nil, err
	}

	if rc.plainDicts {
		return rc.plainDict(n, dt, ps, rows, got, got2, ends, valid)
	}
	kw := int64(dt.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8)
	keys, err := rc.alloc(rows * kw)
	if err != nil {
		return nil, err
	}
	limit := maxDictItems(dt.IndexType)
	lv := &lazyValidity{rc: rc, n: rows}
	pos := map[string]uint64{}
	var (
		vals     []byte
		valEnds  []int64
		out      int64
		itemKeys []int64 // page item -> output key, -1 for a null item, -2 unseen
	)
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*dictPage)
		cnt := p.hi - p.lo
		if d.allNull || d.items.outer.allNull {
			for k := range cnt {
				if err := lv.null(out + k); err != nil {
					return nil, err
				}
			}
			out += cnt
			continue
		}
		itemKeys = append(itemKeys[:0], make([]int64, d.n)...)
		for k := range itemKeys {
			itemKeys[k] = -2
		}
		idx, data := got[2*i], got2[i]
		for r := range cnt {
			k := rawKey(idx, d.bits, r)
			if k >= uint64(d.n) {
				return nil, corruptf("field %q: dictionary key %d of %d items", n.f.Name, k, d.n)
			}
			ok := itemKeys[k]
			if ok == -2 {
				ok = -1
				if valid[i][k] {
					item := data[ends[i][k]:ends[i][k+1]]
					v, seen := pos[string(item)]
					if !seen {
						v = uint64(len(valEnds))
						if int64(v) >= limit {
							return nil, fmt.Errorf("%w: field %q: more than %d distinct values for %s keys in the rows read", ErrUnsupported, n.f.Name, limit, dt.IndexType)
						}
						pos[string(item)] = v
						vals = append(vals, item...)
						valEnds = append(valEnds, int64(len(vals)))
					}
					ok = int64(v)
				}
				itemKeys[k] = ok
			}
			if ok < 0 {
				if err := lv.null(out + r); err != nil {
					return nil, err
				}
				continue
			}
			lv.valid(out + r)
			putKey(keys, int(kw), out+r, uint64(ok))
		}
		out += cnt
	}
	dict, err := rc.dictValues(dt.ValueType, vals, valEnds)
	if err != nil {
		return nil, err
	}
	defer dict.Release()
	return array.NewDataWithDictionary(dt, int(rows), []*memory.Buffer{bufOf(lv.bits), memory.NewBufferBytes(keys)},
		nullCount(lv.bits), 0, dict.(*array.Data)), nil
}

// plainDict assembles the fetched pieces of a dictionary-typed column as a
// plain array of its value type (utf8 or binary: 32-bit offsets).
func (rc *readCtx) plainDict(n *node, dt *arrow.DictionaryType, ps []piece, rows int64, got, got2 [][]byte, ends [][]uint64, valid [][]bool) (arrow.ArrayData, error) {
	// First pass: check every key and size the output.
	var total uint64
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*dictPage)
		if d.allNull || d.items.outer.allNull {
			continue
		}
		for r := range p.hi - p.lo {
			k := rawKey(got[2*i], d.bits, r)
			if k >= uint64(d.n) {
				return nil, corruptf("field %q: dictionary key %d of %d items", n.f.Name, k, d.n)
			}
			total += ends[i][k+1] - ends[i][k]
		}
	}
	if total > math.MaxInt32 {
		return nil, fmt.Errorf("%w: field %q: %d bytes exceed 32-bit offsets", ErrTooLarge, n.f.Name, total)
	}
	data, err := rc.alloc(int64(total))
	if err != nil {
		return nil, err
	}
	offsBytes, err := rc.alloc((rows + 1) * 4)
	if err != nil {
		return nil, err
	}
	offs := arrow.Int32Traits.CastFromBytes(offsBytes)
	lv := &lazyValidity{rc: rc, n: rows}
	var out int64
	var cur int32
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*dictPage)
		for r := range p.hi - p.lo {
			null := d.allNull || d.items.outer.allNull
			var k uint64
			if !null {
				k = rawKey(got[2*i], d.bits, r)
				null = !valid[i][k]
			}
			if null {
				if err := lv.null(out); err != nil {
					return nil, err
				}
			} else {
				lv.valid(out)
				cur += int32(copy(data[cur:], got2[i][ends[i][k]:ends[i][k+1]]))
			}
			out++
			offs[out] = cur
		}
	}
	return array.NewData(dt.ValueType, int(rows), []*memory.Buffer{bufOf(lv.bits), memory.NewBufferBytes(offsBytes), memory.NewBufferBytes(data)},
		nil, nullCount(lv.bits), 0), nil
}

// dictValues builds the dictionary array of a decoded column.
func (rc *readCtx) dictValues(t arrow.DataType, vals []byte, ends []int64) (arrow.ArrayData, error) {
	large := t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY
	if !large && len(vals) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d bytes of dictionary values exceed 32-bit offsets", ErrTooLarge, len(vals))
	}
	w := int64(4)
	if large {
		w = 8
	}
	offs, err := rc.alloc((int64(len(ends)) + 1) * w)
	if err != nil {
		return nil, err
	}
	for i, e := range ends {
		if large {
			binary.LittleEndian.PutUint64(offs[8*(i+1):], uint64(e))
		} else {
			binary.LittleEndian.PutUint32(offs[4*(i+1):], uint32(e))
		}
	}
	if vals == nil {
		vals = []byte{}
	}
	return array.NewData(t, len(ends), []*memory.Buffer{nil, memory.NewBufferBytes(offs), memory.NewBufferBytes(vals)}, nil, 0, 0), nil
}

// ---------------------------------------------------------------- writer

// dictWriter encodes a dictionary-typed column the way Lance 2.0 does (see
// above), from dictionary arrays or plain arrays of the values. Each page gets a dictionary of its own holding the distinct values
// of its rows, plus one null item when a row is null; a page is written when
// it reaches the page size or when a new value would need a key the index
// type cannot hold. Whatever dictionaries the input arrays carry, the page
// dictionaries never repeat a value.
type dictWriter struct {
	w        *Writer
	col      int
	keyBytes int
	maxItems int64

	rows     int
	keys     []byte
	pos      map[string]uint64
	itemEnds []byte // u64 end offsets of the items, nulls not yet adjusted
	itemData []byte
	items    int64
	nullItem int64 // -1: none yet
}

func newDictWriter(w *Writer, col int, t *arrow.DictionaryType) *dictWriter {
	return &dictWriter{w: w, col: col, keyBytes: t.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8,
		maxItems: maxDictItems(t.IndexType), pos: map[string]uint64{}, nullItem: -1}
}

func (c *dictWriter) size() int { return len(c.keys) + len(c.itemEnds) + len(c.itemData) }

// valueBytes returns element i of a string or binary array as bytes.
func valueBytes(a arrow.Array) (func(int) []byte, bool) {
	switch v := a.(type) {
	case *array.String:
		return func(i int) []byte { return unsafe.Slice(unsafe.StringData(v.Value(i)), len(v.Value(i))) }, true
	case *array.LargeString:
		return func(i int) []byte { return unsafe.Slice(unsafe.StringData(v.Value(i)), len(v.Value(i))) }, true
	case *array.Binary:
		return v.Value, true
	case *array.LargeBinary:
		return v.Value, true
	}
	return nil, false
}

func (c *dictWriter) append(arr arrow.Array) error {
	if arr.Len() == 0 {
		return nil
	}
	// A dictionary array, or a plain array of the dictionary's values.
	dict, index := arr, func(i int) int { return i }
	if d, ok := arr.(*array.Dictionary); ok {
		dict, index = d.Dictionary(), d.GetValueIndex
	}
	value, ok := valueBytes(dict)
	if !ok {
		return fmt.Errorf("lance/file: dictionary of %s is not supported", dict.DataType())
	}
	for i := 0; i < arr.Len(); i++ {
		var item []byte
		null := arr.IsNull(i)
		if !null {
			j := index(i)
			if j < 0 || j >= dict.Len() {
				return fmt.Errorf("lance/file: dictionary index %d of %d values", j, dict.Len())
			}
			if null = dict.IsNull(j); !null {
				item = value(j)
			}
		}
		k, err := c.key(item, null)
		if err != nil {
			return err
		}
		c.keys = append(c.keys, make([]byte, c.keyBytes)...)
		putKey(c.keys, c.keyBytes, int64(c.rows), k)
		c.rows++
		if c.size() >= c.w.pageBytes {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// key returns the page key of a value, adding it to the page dictionary
// (after writing the page, if the dictionary is full).
func (c *dictWriter) key(item []byte, null bool) (uint64, error) {
	if null && c.nullItem >= 0 {
		return uint64(c.nullItem), nil
	}
	if !null {
		if k, ok := c.pos[string(item)]; ok {
			return k, nil
		}
	}
	if c.items >= c.maxItems {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	k := c.items
	c.items++
	if null {
		c.nullItem = k
	} else {
		c.itemData = append(c.itemData, item...)
		c.pos[string(item)] = uint64(k)
	}
	c.itemEnds = binary.LittleEndian.AppendUint64(c.itemEnds, uint64(len(c.itemData)))
	return uint64(k), nil
}

func (c *dictWriter) flush() error {
	if c.rows == 0 {
		return nil
	}
	adj := uint64(len(c.itemData)) + 1
	if c.nullItem >= 0 {
		p := c.itemEnds[8*c.nullItem:]
		binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)+adj)
	}
	items := encBinary(encNoNulls(encFlat(64, 1)), encFlat(8, 2), adj)
	enc := encDictionary(encNoNulls(encFlat(uint64(8*c.keyBytes), 0)), items, uint32(c.items))
	if err := c.w.writePage(c.col, c.rows, enc, c.keys, c.itemEnds, c.itemData); err != nil {
		return err
	}
	c.rows, c.items, c.nullItem = 0, 0, -1
	c.keys, c.itemEnds, c.itemData = c.keys[:0], c.itemEnds[:0], c.itemData[:0]
	clear(c.pos)
	return nil
}

func (c *dictWriter) finish() error { return nil }
