package row

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// Conform turns an appended batch whose columns are any subset of
// Schema's (matched by name, in any order) into a batch with exactly Schema,
// validated by the same validate as JSON records and with the same
// defaults (both from the column table, columns.go). It returns the batch
// (release it) and the ids in row order.
//
// Columns already of the schema's type are shared with rec, not copied;
// a column is rebuilt only when some row needs a default (created_at: now,
// in microseconds). Other types are accepted as toSchemaType converts
// them. Bad input is a *ValidationError.
func Conform(rec arrow.RecordBatch, now time.Time) (arrow.RecordBatch, []string, error) {
	out, ids, err := ConformPart(rec, now, 0)
	if err == nil && out == nil {
		err = Invalidf("no records: send at least one")
	}
	return out, ids, err
}

// ConformPart is Conform for one of the batches of an append whose rows
// start at row base of the request (for messages): a batch of zero rows
// whose columns are acceptable gives a nil batch and no error.
func ConformPart(rec arrow.RecordBatch, now time.Time, base int) (arrow.RecordBatch, []string, error) {
	return conformArrow(memory.DefaultAllocator, rec, now, base)
}

// conformArrow is Conform allocating from mem. base is added to row
// indexes in messages, for batches after the first of one append. A batch
// of zero rows whose columns are acceptable gives a nil batch and no error.
func conformArrow(mem memory.Allocator, rec arrow.RecordBatch, now time.Time, base int) (out arrow.RecordBatch, ids []string, err error) {
	// The batch comes from a client's IPC stream: buffers may disagree with
	// their offsets. Structural checks first; a panic on a shape they miss
	// (non-monotonic offsets, say) is still the client's bad input.
	defer func() {
		if r := recover(); r != nil {
			out, ids, err = nil, nil, Invalidf("invalid Arrow data: %v", r)
		}
	}()
	for ci, f := range rec.Schema().Fields() {
		if err := validateArray(rec.Column(ci)); err != nil {
			return nil, nil, Invalidf("column %q: invalid Arrow data: %v", f.Name, err)
		}
	}
	n := int(rec.NumRows())
	cols := make([]arrow.Array, Schema.NumFields())
	defer func() {
		// NewRecordBatch retains what it keeps; these are our references.
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for ci, f := range rec.Schema().Fields() {
		i, ok := schemaIndex[f.Name]
		if !ok {
			return nil, nil, Invalidf("unknown column %q: the rollout schema has no such column", f.Name)
		}
		if cols[i] != nil {
			return nil, nil, Invalidf("column %q appears twice", f.Name)
		}
		_, ref := columns[i].field.(refField)
		if _, sys := columns[i].field.(systemField); sys || ref {
			// The store sets it (lc_shard, lc_seq, payload_ref): a value
			// sent, say in rows exported from another store, is dropped
			// (a payload_ref sent would name another store's object).
			cols[i] = array.MakeArrayOfNull(mem, columns[i].typ, n)
			continue
		}
		col := rec.Column(ci)
		if col.Len() > n {
			col = array.NewSlice(col, 0, int64(n))
			defer col.Release()
		}
		c, err := toSchemaType(mem, &columns[i], col)
		if err != nil {
			return nil, nil, err
		}
		cols[i] = c
	}
	if n == 0 {
		return nil, nil, nil
	}
	rs := &arrowRows{n: n, cols: cols}
	if err := validate(rs, base); err != nil {
		return nil, nil, err
	}
	fillDefaults(mem, rs, now)
	nullColumns(mem, cols, n)

	// One copy for all ids: they outlive the batch's buffers.
	idArr := cols[idCol].(*array.String)
	all, offs := string(idArr.ValueBytes()), idArr.ValueOffsets()
	ids = make([]string, n)
	for i := range ids {
		ids[i] = all[offs[i]-offs[0] : offs[i+1]-offs[0]]
	}
	return array.NewRecordBatch(Schema, cols, int64(n)), ids, nil
}

// nullColumns fills the absent columns with nulls. Their buffers are all
// slices of one zeroed buffer: one allocation instead of one or more per
// column (array.MakeArrayOfNull makes one per column).
func nullColumns(mem memory.Allocator, cols []arrow.Array, n int) {
	if !slices.Contains(cols, nil) {
		return
	}
	zero := memory.NewResizableBuffer(mem)
	defer zero.Release()
	zero.Resize(arrow.Int64Traits.BytesRequired(n + 1)) // the widest buffer: large offsets
	clear(zero.Bytes())
	for i, c := range cols {
		if c == nil {
			d := nullData(Schema.Field(i).Type, n, zero)
			cols[i] = array.MakeFromData(d)
			d.Release()
		}
	}
}

// nullData is an all-null array of dt whose buffers are slices of zero,
// each as long as dt's layout needs (the WAL counts buffer lengths).
func nullData(dt arrow.DataType, n int, zero *memory.Buffer) arrow.ArrayData {
	bufs := []*memory.Buffer{memory.SliceBuffer(zero, 0, int(bitutil.BytesForBits(int64(n))))}
	var kids []arrow.ArrayData
	switch t := dt.(type) {
	case arrow.FixedWidthDataType:
		bufs = append(bufs, memory.SliceBuffer(zero, 0, int(bitutil.BytesForBits(int64(t.BitWidth()*n)))))
	case *arrow.ListType:
		bufs = append(bufs, memory.SliceBuffer(zero, 0, t.OffsetTypeTraits().BytesRequired(n+1)))
		kids = append(kids, nullData(t.Elem(), 0, zero))
	case arrow.OffsetsDataType: // utf8, binary and their large kinds
		bufs = append(bufs, memory.SliceBuffer(zero, 0, t.OffsetTypeTraits().BytesRequired(n+1)), memory.SliceBuffer(zero, 0, 0))
	case *arrow.StructType:
		for _, f := range t.Fields() {
			kids = append(kids, nullData(f.Type, n, zero))
		}
	default:
		panic(fmt.Sprintf("row: no null array for %s", dt))
	}
	d := array.NewData(dt, n, bufs, kids, n, 0)
	for _, b := range bufs {
		b.Release()
	}
	for _, k := range kids {
		k.Release()
	}
	return d
}

func replace(cols []arrow.Array, i int, a arrow.Array) {
	if cols[i] != nil {
		cols[i].Release()
	}
	cols[i] = a
}

// fillDefaults fills, column by column, what the column table gives rows
// without a value (rs is validated: rollout_id is there).
func fillDefaults(mem memory.Allocator, rs *arrowRows, now time.Time) {
	cols, n := rs.cols, rs.n
	for _, ci := range defaulted {
		c := &columns[ci]
		switch c.def.kind {
		case defaultNewID, defaultText, defaultCopy:
			a, _ := cols[ci].(*array.String)
			if a != nil && !hasBlank(a) {
				continue
			}
			switch c.def.kind {
			case defaultNewID:
				replace(cols, ci, fillStrings(mem, a, n, 36, func(int) string { return uuid.Must(uuid.NewV7()).String() }))
			case defaultCopy:
				src := cols[c.def.fromCol].(*array.String)
				if a == nil {
					src.Retain() // share the source column
					cols[ci] = src
				} else {
					replace(cols, ci, fillStrings(mem, a, n, 0, src.Value))
				}
			default:
				if a == nil {
					cols[ci] = constStrings(mem, c.def.text, n)
				} else {
					replace(cols, ci, fillStrings(mem, a, n, len(c.def.text), func(int) string { return c.def.text }))
				}
			}
		case defaultNow:
			if a, _ := cols[ci].(*array.Timestamp); a == nil {
				cols[ci] = constFixed(mem, tsUTC, arrow.Timestamp(now.UnixMicro()), n)
			} else if a.NullN() > 0 {
				replace(cols, ci, fillTimestamps(mem, a, n, arrow.Timestamp(now.UnixMicro())))
			}
		case defaultZero:
			if a, _ := cols[ci].(*array.Int32); a == nil {
				cols[ci] = constFixed(mem, arrow.PrimitiveTypes.Int32, int32(0), n)
			} else if a.NullN() > 0 {
				replace(cols, ci, fillInt32(mem, a, n))
			}
		case defaultSize:
			if p, _ := cols[payloadCol].(*array.LargeBinary); p != nil {
				size, _ := cols[ci].(*array.Int64)
				if payloadSizeChanges(p, size) {
					replace(cols, ci, payloadSizes(mem, p, size))
				}
			}
		case defaultSum:
			if p, _ := cols[payloadCol].(*array.LargeBinary); p != nil {
				sum, _ := cols[ci].(*array.String)
				if payloadSumChanges(p, sum) {
					replace(cols, ci, payloadSums(mem, rs, p, sum))
				}
			}
		}
	}
}

// toSchemaType returns col (a new reference) as an array of column c's
// type. These are the types a column is accepted in, appended or read:
// its own; utf8 and large_utf8 for each other (value bytes shared),
// string_view (copied), a dictionary of strings (decoded: a reference
// table's role); any timestamp unit and time zone, or none (a reference
// table's created_at), as UTC microseconds; binary for the payload
// (shared; binary_view and fixed_size_binary copied); lists whose item
// field differs only in name or nullability; relationships' struct fields
// by position. Anything else is a *ValidationError naming the column.
func toSchemaType(mem memory.Allocator, c *column, col arrow.Array) (arrow.Array, error) {
	if dt := col.DataType(); dt == c.typ || arrow.TypeEqual(dt, c.typ) {
		return retained(col), nil // the common case: Schema's own type
	}
	f := arrow.Field{Name: c.name, Type: c.typ}
	if c.name == ColRelationships {
		return conformRelations(f, col)
	}
	switch f.Type.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		switch a := col.(type) {
		case *array.String:
			if f.Type.ID() == arrow.STRING {
				return retained(a), nil
			}
			return reoffset[int32, int64](mem, f, a, a.ValueOffsets)
		case *array.LargeString:
			if f.Type.ID() == arrow.LARGE_STRING {
				return retained(a), nil
			}
			return reoffset[int64, int32](mem, f, a, a.ValueOffsets)
		case *array.Dictionary:
			if out := decodeDictionary(mem, a, f.Type); out != nil {
				return out, nil
			}
		case interface{ Value(int) string }: // string_view
			b := array.NewBuilder(mem, f.Type)
			defer b.Release()
			b.Reserve(col.Len())
			for i := range col.Len() {
				if col.IsNull(i) {
					b.AppendNull()
				} else {
					appendString(b, a.Value(i))
				}
			}
			return b.NewArray(), nil
		}
	case arrow.LARGE_BINARY:
		switch a := col.(type) {
		case *array.LargeBinary:
			return retained(a), nil
		case *array.Binary:
			return reoffset[int32, int64](mem, f, a, a.ValueOffsets)
		case interface{ Value(int) []byte }: // binary_view, fixed_size_binary
			b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.LargeBinary)
			defer b.Release()
			b.Reserve(col.Len())
			for i := range col.Len() {
				if col.IsNull(i) {
					b.AppendNull()
				} else {
					b.Append(a.Value(i))
				}
			}
			return b.NewArray(), nil
		}
	case arrow.TIMESTAMP:
		if a, ok := col.(*array.Timestamp); ok {
			return conformTimestamps(mem, a), nil
		}
	case arrow.LIST:
		// The item field's name and nullability may differ; its type not.
		if a, ok := col.(*array.List); ok && arrow.TypeEqual(a.ListValues().DataType(), f.Type.(*arrow.ListType).Elem()) {
			return retypedAs(a, f.Type), nil
		}
	default:
		if arrow.TypeEqual(col.DataType(), f.Type) {
			return retained(col), nil
		}
	}
	return nil, Invalidf("column %q: want %s, got %s", f.Name, wantType(f.Type), col.DataType())
}

// wantType names the types a column of type t is accepted in, for
// messages.
func wantType(t arrow.DataType) string {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return "utf8 or large_utf8"
	case arrow.LARGE_BINARY:
		return "large_binary or binary"
	case arrow.TIMESTAMP:
		return "timestamp (any unit)"
	}
	return t.String()
}

func retained(a arrow.Array) arrow.Array {
	a.Retain()
	return a
}

// conformRelations accepts list<struct<utf8, utf8, float32>> with any field
// names, by position.
func conformRelations(f arrow.Field, col arrow.Array) (arrow.Array, error) {
	l, ok := col.(*array.List)
	var st *array.Struct
	if ok {
		st, ok = l.ListValues().(*array.Struct)
	}
	if !ok || st.NumField() != 3 || st.Field(0).DataType().ID() != arrow.STRING || st.Field(1).DataType().ID() != arrow.STRING || st.Field(2).DataType().ID() != arrow.FLOAT32 {
		return nil, Invalidf("column %q: want list<struct<target_id: utf8, relation: utf8, weight: float32>>, got %s", f.Name, col.DataType())
	}
	return retypedAs(l, f.Type), nil
}

// retypedAs returns a sharing its buffers, typed as t, which has a's
// layout but may name or mark nullable its nested fields differently.
func retypedAs(a arrow.Array, t arrow.DataType) arrow.Array {
	if arrow.TypeEqual(a.DataType(), t) {
		return retained(a)
	}
	d := retype(a.Data(), t)
	defer d.Release()
	return array.MakeFromData(d)
}

func retype(d arrow.ArrayData, t arrow.DataType) arrow.ArrayData {
	var kids []arrow.ArrayData
	switch t := t.(type) {
	case *arrow.ListType:
		kids = []arrow.ArrayData{retype(d.Children()[0], t.Elem())}
	case *arrow.StructType:
		for i, f := range t.Fields() {
			kids = append(kids, retype(d.Children()[i], f.Type))
		}
	}
	out := array.NewData(t, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
	for _, k := range kids {
		k.Release()
	}
	return out
}

// reoffset returns the string or binary array a, whose offsets valueOffsets
// returns, as f's type, whose offsets have another width: only the offsets
// are rewritten, the value bytes are shared.
func reoffset[From, To int32 | int64](mem memory.Allocator, f arrow.Field, a arrow.Array, valueOffsets func() []From) (arrow.Array, error) {
	d, n := a.Data(), a.Len()
	if n == 0 {
		return array.MakeArrayOfNull(mem, f.Type, 0), nil // an empty array may have no offsets
	}
	offs := valueOffsets()
	start, end := offs[0], offs[n]
	if span := int64(end - start); span != int64(To(span)) {
		return nil, Invalidf("column %q: %d bytes do not fit %s", f.Name, span, f.Type)
	}
	var zero To
	ob := memory.NewResizableBuffer(mem)
	defer ob.Release()
	ob.Resize((n + 1) * int(unsafe.Sizeof(zero)))
	newOffs := unsafe.Slice((*To)(unsafe.Pointer(unsafe.SliceData(ob.Bytes()))), n+1)
	for i, o := range offs {
		newOffs[i] = To(o - start)
	}
	bufs := []*memory.Buffer{nil, ob, nil}
	if vb := d.Buffers()[2]; vb != nil {
		bufs[2] = memory.SliceBuffer(vb, int(start), int(end-start))
		defer bufs[2].Release()
	}
	nulls := a.NullN() // counts them if not known yet
	if nulls > 0 {
		bufs[0] = sliceBitmap(mem, d.Buffers()[0], d.Offset(), n)
		defer bufs[0].Release()
	}
	out := array.NewData(f.Type, n, bufs, nil, nulls, 0)
	defer out.Release()
	return array.MakeFromData(out), nil
}

// sliceBitmap returns bits [offset, offset+n) of bm as a bitmap starting at
// bit 0, shared when offset is a whole byte.
func sliceBitmap(mem memory.Allocator, bm *memory.Buffer, offset, n int) *memory.Buffer {
	if offset%8 == 0 {
		return memory.SliceBuffer(bm, offset/8, int(bitutil.BytesForBits(int64(n))))
	}
	out := memory.NewResizableBuffer(mem)
	out.Resize(int(bitutil.BytesForBits(int64(n))))
	bitutil.CopyBitmap(bm.Bytes(), offset, n, out.Bytes(), 0)
	return out
}

// conformTimestamps returns a as microseconds in UTC, as the Record path
// reads any unit with ToTime.
func conformTimestamps(mem memory.Allocator, a *array.Timestamp) arrow.Array {
	unit := a.DataType().(*arrow.TimestampType).Unit
	if unit == arrow.Microsecond {
		// Values are UTC instants whatever the zone; a zone-less timestamp
		// is read as UTC too.
		return retypedAs(a, tsUTC)
	}
	b := array.NewTimestampBuilder(mem, tsUTC)
	defer b.Release()
	b.Reserve(a.Len())
	for i := range a.Len() {
		if a.IsNull(i) {
			b.UnsafeAppendBoolToBitmap(false)
			continue
		}
		v := int64(a.Value(i))
		switch unit {
		case arrow.Second:
			v *= 1e6
		case arrow.Millisecond:
			v *= 1e3
		case arrow.Nanosecond:
			// Floor, as time.UnixMicro does for times before 1970.
			if v < 0 && v%1000 != 0 {
				v = v/1000 - 1
			} else {
				v /= 1000
			}
		}
		b.UnsafeAppend(arrow.Timestamp(v))
	}
	return b.NewArray()
}

// invalidUTF8 returns the first row of the string array a whose value is
// not UTF-8, or -1.
func invalidUTF8(arr arrow.Array) int {
	n := arr.Len()
	if n == 0 {
		return -1
	}
	switch a := arr.(type) {
	case *array.String:
		return invalidUTF8Row(a.ValueBytes(), a.ValueOffsets())
	case *array.LargeString:
		return invalidUTF8Row(a.ValueBytes(), a.ValueOffsets())
	case interface{ Value(int) string }:
		for i := range n {
			if arr.IsValid(i) && !utf8.ValidString(a.Value(i)) {
				return i
			}
		}
	}
	return -1
}

// invalidUTF8Row returns the first row whose value is not UTF-8, or -1.
// data is the values from offs[0] to the last offset. One utf8.Valid over
// all of it is enough when every value starts on a rune: a valid buffer is
// a sequence of whole runes, so each value then is too.
func invalidUTF8Row[O int32 | int64](data []byte, offs []O) int {
	start := offs[0]
	if utf8.Valid(data) {
		whole := true
		for _, o := range offs[1 : len(offs)-1] {
			if p := int(o - start); p < len(data) && !utf8.RuneStart(data[p]) {
				whole = false
				break
			}
		}
		if whole {
			return -1
		}
	}
	for i := 0; i+1 < len(offs); i++ {
		if !utf8.Valid(data[offs[i]-start : offs[i+1]-start]) {
			return i
		}
	}
	return -1
}

// hasBlank reports whether a has a null or empty value.
func hasBlank(a *array.String) bool {
	if a.NullN() > 0 {
		return true
	}
	offs := a.ValueOffsets()
	for i := 1; i < len(offs); i++ {
		if offs[i] == offs[i-1] {
			return true
		}
	}
	return false
}

// fillStrings returns a (nil: absent, all rows) with its null or empty
// values replaced by def(row). extra is the expected bytes per default.
func fillStrings(mem memory.Allocator, a *array.String, n, extra int, def func(int) string) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(n)
	size := n * extra
	if a != nil {
		size += len(a.ValueBytes())
	}
	b.ReserveData(size)
	for i := range n {
		if a != nil && a.IsValid(i) && a.ValueLen(i) > 0 {
			b.Append(a.Value(i))
		} else {
			b.Append(def(i))
		}
	}
	return b.NewArray()
}

// constStrings returns n values s, without a builder's per-value work.
func constStrings(mem memory.Allocator, s string, n int) arrow.Array {
	ob := memory.NewResizableBuffer(mem)
	defer ob.Release()
	ob.Resize((n + 1) * arrow.Int32SizeBytes)
	for i, offs := 0, arrow.Int32Traits.CastFromBytes(ob.Bytes()); i <= n; i++ {
		offs[i] = int32(i * len(s))
	}
	vb := memory.NewResizableBuffer(mem)
	defer vb.Release()
	vb.Resize(n * len(s))
	data := vb.Bytes()
	for k := copy(data, s); k < len(data); k *= 2 {
		copy(data[k:], data[:k])
	}
	d := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, ob, vb}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// constFixed returns n values v of the fixed-width type dt.
func constFixed[T int32 | arrow.Timestamp](mem memory.Allocator, dt arrow.DataType, v T, n int) arrow.Array {
	vb := memory.NewResizableBuffer(mem)
	defer vb.Release()
	vb.Resize(n * int(unsafe.Sizeof(v)))
	vals := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(vb.Bytes()))), n)
	for i := range vals {
		vals[i] = v
	}
	d := array.NewData(dt, n, []*memory.Buffer{nil, vb}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func fillTimestamps(mem memory.Allocator, a *array.Timestamp, n int, def arrow.Timestamp) arrow.Array {
	b := array.NewTimestampBuilder(mem, tsUTC)
	defer b.Release()
	b.Reserve(n)
	for i := range n {
		if a != nil && a.IsValid(i) {
			b.UnsafeAppend(a.Value(i))
		} else {
			b.UnsafeAppend(def)
		}
	}
	return b.NewArray()
}

// fillInt32 returns a (nil: absent) with nulls as 0.
func fillInt32(mem memory.Allocator, a *array.Int32, n int) arrow.Array {
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.Reserve(n)
	for i := range n {
		if a != nil && a.IsValid(i) {
			b.UnsafeAppend(a.Value(i))
		} else {
			b.UnsafeAppend(0)
		}
	}
	return b.NewArray()
}

// payloadSizeChanges reports whether a row with a payload lacks its size
// (a wrong one was rejected before).
func payloadSizeChanges(p *array.LargeBinary, size *array.Int64) bool {
	for i := range p.Len() {
		if p.IsValid(i) && (size == nil || size.IsNull(i)) {
			return true
		}
	}
	return false
}

// payloadSumChanges reports whether a row with a payload lacks its
// checksum in bare hex.
func payloadSumChanges(p *array.LargeBinary, sum *array.String) bool {
	for i := range p.Len() {
		if p.IsValid(i) && (sum == nil || sum.IsNull(i) || sum.ValueLen(i) != 2*sha256.Size) {
			return true
		}
	}
	return false
}

// payloadSizes returns payload_size: the payload's length where there is
// one, else the given size (size may be nil).
func payloadSizes(mem memory.Allocator, p *array.LargeBinary, size *array.Int64) arrow.Array {
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.Reserve(p.Len())
	for i := range p.Len() {
		switch {
		case p.IsValid(i):
			b.UnsafeAppend(int64(p.ValueLen(i)))
		case size != nil && size.IsValid(i):
			b.UnsafeAppend(size.Value(i))
		default:
			b.UnsafeAppendBoolToBitmap(false)
		}
	}
	return b.NewArray()
}

// payloadSums returns payload_checksum: the payload's sha256 in hex where
// there is one, else the given checksum (sum may be nil).
func payloadSums(mem memory.Allocator, rs rows, p *array.LargeBinary, sum *array.String) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(p.Len())
	b.ReserveData(p.Len() * 2 * sha256.Size)
	var hx [2 * sha256.Size]byte
	for i := range p.Len() {
		switch {
		case p.IsValid(i):
			hex.Encode(hx[:], rs.sum(i)[:])
			b.BinaryBuilder.Append(hx[:])
		case sum != nil && sum.IsValid(i):
			b.Append(sum.Value(i))
		default:
			b.AppendNull()
		}
	}
	return b.NewArray()
}

// validateArray runs arrow-go's structural checks (buffer sizes, first and
// last offsets in bounds) on a and its children, and checks that offsets
// never run backwards (Validate does not; ValidateFull would, but also
// re-checks UTF-8 value by value, which conformColumn does once per buffer).
func validateArray(a arrow.Array) error {
	if v, ok := a.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if a.Len() == 0 {
		return nil
	}
	var err error
	switch t := a.(type) {
	case interface{ ValueOffsets() []int32 }:
		err = monotonic(t.ValueOffsets())
	case interface{ ValueOffsets() []int64 }:
		err = monotonic(t.ValueOffsets())
	case interface{ Offsets() []int32 }: // lists
		err = monotonic(t.Offsets())
	case interface{ Offsets() []int64 }:
		err = monotonic(t.Offsets())
	}
	if err != nil {
		return err
	}
	switch t := a.(type) {
	case array.ListLike:
		return validateArray(t.ListValues())
	case *array.Struct:
		for i := 0; i < t.NumField(); i++ {
			if err := validateArray(t.Field(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func monotonic[O int32 | int64](offs []O) error {
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return fmt.Errorf("offsets run backwards at value %d (%d after %d)", i-1, offs[i], offs[i-1])
		}
	}
	if len(offs) > 0 && offs[0] < 0 {
		return fmt.Errorf("negative offset %d", offs[0])
	}
	return nil
}
