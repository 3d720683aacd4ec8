package file

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/schema"
)

// memSource is an in-memory Source that counts what is read.
type memSource struct {
	b     []byte
	bytes atomic.Int64
	reads atomic.Int64
}

func (m *memSource) ReadRange(ctx context.Context, off, n int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 || off > int64(len(m.b)) || n > int64(len(m.b))-off {
		return nil, fmt.Errorf("memSource: read [%d, +%d) outside %d bytes", off, n, len(m.b))
	}
	m.bytes.Add(n)
	m.reads.Add(1)
	out := make([]byte, n)
	copy(out, m.b[off:off+n])
	return out, nil
}

// memSourceInto is a memSource that can also read into a caller's buffer.
type memSourceInto struct{ *memSource }

func (m memSourceInto) ReadRangeInto(ctx context.Context, off int64, dst []byte) error {
	b, err := m.ReadRange(ctx, off, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

// withInto returns a copy of r that reads through SourceInto for every
// range, however small.
func withInto(r *Reader) *Reader {
	ms, ok := r.src.(*memSource)
	if !ok {
		return nil
	}
	r2 := *r
	r2.src = memSourceInto{ms}
	r2.directMin = 1
	return &r2
}

var mem = memory.NewGoAllocator()

// writeFile writes recs (all with schema as) into a Lance file.
func writeFile(t testing.TB, as *arrow.Schema, opts WriterOptions, recs ...arrow.RecordBatch) ([]byte, Info) {
	t.Helper()
	return writeInto(t, new(bytes.Buffer), as, opts, recs...)
}

// writeFileAfter writes recs into a Lance file that starts with prefix,
// whose binary pages reference the value bytes that at places in it
// (WriterOptions.Base and Placed), and returns the whole file.
func writeFileAfter(t testing.TB, as *arrow.Schema, prefix []byte, at map[arrow.Array]int64, recs ...arrow.RecordBatch) ([]byte, Info) {
	t.Helper()
	opts := WriterOptions{HoldValues: true, Base: int64(len(prefix)), Placed: func(a arrow.Array) (int64, bool) {
		off, ok := at[a]
		return off, ok
	}}
	return writeInto(t, bytes.NewBuffer(prefix), as, opts, recs...)
}

// writeInto writes recs after what buf holds (opts.Base bytes) and
// returns the whole file.
func writeInto(t testing.TB, buf *bytes.Buffer, as *arrow.Schema, opts WriterOptions, recs ...arrow.RecordBatch) ([]byte, Info) {
	t.Helper()
	s, err := schema.FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(buf, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(buf.Len()) {
		t.Fatalf("Info.Size %d, file %d bytes", info.Size, buf.Len())
	}
	return buf.Bytes(), info
}

func openBytes(t testing.TB, b []byte) (*Reader, *memSource) {
	t.Helper()
	src := &memSource{b: b}
	r, err := Open(context.Background(), src, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return r, src
}

// openBytesIO is openBytes for a Reader of io.
func openBytesIO(t testing.TB, b []byte, io *IO) (*Reader, *memSource) {
	t.Helper()
	src := &memSource{b: b}
	r, err := io.Open(context.Background(), src, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return r, src
}

// wholeIO reads offsets buffers whole, as before they were read by range:
// the tests of that mode (prefetches, column warms) use it.
var wholeIO = NewIO(IOOptions{WholeOffsets: true})

// ---------------------------------------------------------------- random data

var words = []string{"", "a", "héllo", "世界", "🚀 rocket", "plain ascii text", "tab\tnewline\n", "ñ", "0123456789abcdef"}

type gen struct {
	rng   *rand.Rand
	nullP float64 // probability of a null at every nullable level
}

func (g *gen) null() bool { return g.nullP > 0 && g.rng.Float64() < g.nullP }

// array builds a random array of n values of type dt.
func (g *gen) array(dt arrow.DataType, n int) arrow.Array {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for range n {
		g.append(b, dt)
	}
	return b.NewArray()
}

func (g *gen) append(b array.Builder, dt arrow.DataType) {
	if dt.ID() != arrow.STRUCT && g.null() {
		b.AppendNull()
		return
	}
	r := g.rng
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		bb.Append(r.IntN(2) == 1)
	case *array.Int8Builder:
		bb.Append(int8(r.Uint32()))
	case *array.Int16Builder:
		bb.Append(int16(r.Uint32()))
	case *array.Int32Builder:
		bb.Append(int32(r.Uint32()))
	case *array.Int64Builder:
		bb.Append(int64(r.Uint64()))
	case *array.Uint8Builder:
		bb.Append(uint8(r.Uint32()))
	case *array.Uint16Builder:
		bb.Append(uint16(r.Uint32()))
	case *array.Uint32Builder:
		bb.Append(r.Uint32())
	case *array.Uint64Builder:
		bb.Append(r.Uint64())
	case *array.Float32Builder:
		bb.Append(r.Float32()*2000 - 1000)
	case *array.Float64Builder:
		bb.Append(r.NormFloat64() * 1e6)
	case *array.Date32Builder:
		bb.Append(arrow.Date32(r.Int32N(40000)))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(r.Int64N(1 << 60)))
	case *array.StringBuilder:
		bb.Append(g.str())
	case *array.LargeStringBuilder:
		bb.Append(g.str())
	case *array.BinaryBuilder: // binary and large_binary
		v := make([]byte, r.IntN(40))
		for i := range v {
			v[i] = byte(r.Uint32())
		}
		bb.Append(v)
	case *array.ListBuilder:
		bb.Append(true)
		for range r.IntN(6) {
			g.append(bb.ValueBuilder(), dt.(*arrow.ListType).Elem())
		}
	case *array.LargeListBuilder:
		bb.Append(true)
		for range r.IntN(6) {
			g.append(bb.ValueBuilder(), dt.(*arrow.LargeListType).Elem())
		}
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		t := dt.(*arrow.FixedSizeListType)
		for range t.Len() {
			g.append(bb.ValueBuilder(), t.Elem())
		}
	case *array.BinaryDictionaryBuilder:
		// A few distinct values for 8-bit keys (the union of every page's
		// dictionary must fit), many for wider ones.
		t := dt.(*arrow.DictionaryType)
		v := words[r.IntN(len(words))]
		if t.IndexType.ID() != arrow.INT8 {
			v = g.str()
		}
		var err error
		if t.ValueType.ID() == arrow.BINARY || t.ValueType.ID() == arrow.LARGE_BINARY {
			err = bb.Append([]byte(v))
		} else {
			err = bb.AppendString(v)
		}
		if err != nil {
			panic(err)
		}
	case *array.StructBuilder:
		// Lance 2.0 stores no struct validity; a null struct reads back
		// with null members (see structNoNulls).
		bb.Append(!g.null())
		t := dt.(*arrow.StructType)
		for i := range t.NumFields() {
			g.append(bb.FieldBuilder(i), t.Field(i).Type)
		}
	default:
		panic(fmt.Sprintf("gen: no generator for %T", b))
	}
}

func (g *gen) str() string {
	n := g.rng.IntN(4)
	s := ""
	for range n {
		s += words[g.rng.IntN(len(words))]
	}
	return s
}

// record builds a record batch of random columns for schema as.
func (g *gen) record(as *arrow.Schema, n int) arrow.RecordBatch {
	cols := make([]arrow.Array, len(as.Fields()))
	for i, f := range as.Fields() {
		gg := *g
		if !f.Nullable {
			gg.nullP = 0
		}
		cols[i] = gg.array(f.Type, n)
	}
	rec := array.NewRecordBatch(as, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// allNull builds an all-null array of n values.
func allNull(dt arrow.DataType, n int) arrow.Array {
	return array.MakeArrayOfNull(mem, dt, n)
}

// concatRecords concatenates the column i of recs.
func concatColumn(t testing.TB, recs []arrow.RecordBatch, i int) arrow.Array {
	t.Helper()
	var parts []arrow.Array
	for _, r := range recs {
		// arrow-go's Concatenate fails on an empty dictionary array from a
		// builder (its dictionary is nil); empty parts add nothing anyway.
		if r.NumRows() > 0 || len(recs) == 1 {
			parts = append(parts, r.Column(i))
		}
	}
	out, err := array.Concatenate(parts, mem)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertEqualArrays compares two arrays logically (values under nulls are
// ignored) and reports the first difference.
func assertEqualArrays(t testing.TB, what string, want, got arrow.Array) {
	t.Helper()
	if !arrow.TypeEqual(want.DataType(), got.DataType()) {
		t.Fatalf("%s: type %s, want %s", what, got.DataType(), want.DataType())
	}
	if _, ok := want.(*array.Dictionary); ok {
		// Dictionaries are compared by value: a file's pages and the
		// reader's output have dictionaries of their own.
		want, got = dictDecoded(t, want), dictDecoded(t, got)
		defer want.Release()
		defer got.Release()
	}
	if want.Len() != got.Len() {
		t.Fatalf("%s: %d rows, want %d", what, got.Len(), want.Len())
	}
	if array.Equal(want, got) {
		return
	}
	for i := range want.Len() {
		a := array.NewSlice(want, int64(i), int64(i+1))
		b := array.NewSlice(got, int64(i), int64(i+1))
		eq := array.Equal(a, b)
		a.Release()
		b.Release()
		if !eq {
			t.Fatalf("%s: row %d differs: got %v, want %v", what, i, valueString(got, i), valueString(want, i))
		}
	}
	t.Fatalf("%s: arrays differ (no single row differs?)", what)
}

func valueString(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	s := array.NewSlice(a, int64(i), int64(i+1))
	defer s.Release()
	return fmt.Sprint(s)
}

// structNoNulls is what an array reads back as: structs (at any depth) have
// no struct-level nulls, their nulls pushed into their members.
func structNoNulls(t testing.TB, a arrow.Array) arrow.Array {
	t.Helper()
	d := stripStructNulls(a)
	defer d.Release()
	return array.MakeFromData(d)
}

func stripStructNulls(a arrow.Array) arrow.ArrayData {
	switch x := a.(type) {
	case *array.Struct:
		members := structMembers(x)
		children := make([]arrow.ArrayData, len(members))
		for i, m := range members {
			children[i] = stripStructNulls(m)
			m.Release()
		}
		return array.NewData(x.DataType(), x.Len(), []*memory.Buffer{nil}, children, 0, 0)
	case array.ListLike:
		d := x.Data()
		child := stripStructNulls(x.ListValues())
		defer child.Release()
		return array.NewData(d.DataType(), d.Len(), d.Buffers(), []arrow.ArrayData{child}, d.NullN(), d.Offset())
	default:
		a.Data().Retain()
		return a.Data()
	}
}

// dictDecoded returns the values of a dictionary array as a plain array of
// its value type.
func dictDecoded(t testing.TB, a arrow.Array) arrow.Array {
	t.Helper()
	d := a.(*array.Dictionary)
	b := array.NewBuilder(mem, d.Dictionary().DataType())
	defer b.Release()
	for i := range d.Len() {
		if d.IsNull(i) || d.Dictionary().IsNull(d.GetValueIndex(i)) {
			b.AppendNull()
			continue
		}
		v := d.Dictionary()
		j := d.GetValueIndex(i)
		switch bb := b.(type) {
		case *array.StringBuilder:
			bb.Append(v.(*array.String).Value(j))
		case *array.LargeStringBuilder:
			bb.Append(v.(*array.LargeString).Value(j))
		case *array.BinaryBuilder:
			bb.Append(v.(interface{ Value(int) []byte }).Value(j))
		default:
			t.Fatalf("dictDecoded: %T", b)
		}
	}
	return b.NewArray()
}

// checkDictUnique asserts a decoded dictionary holds no value twice and no
// null (nulls are in the keys' validity).
func checkDictUnique(t testing.TB, d *array.Dictionary) {
	t.Helper()
	seen := map[string]bool{}
	v := d.Dictionary()
	for j := range v.Len() {
		if v.IsNull(j) {
			t.Fatalf("dictionary value %d is null", j)
		}
		s := v.ValueStr(j)
		if seen[s] {
			t.Fatalf("dictionary value %q appears twice", s)
		}
		seen[s] = true
	}
}
