package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

var dictInt8 = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}

// dictArray builds a dictionary<int8, utf8> array: dict holds the values
// (nil = a null value), keys index it (-1 = a null key).
func dictArray(t testing.TB, dict []*string, keys []int) arrow.Array {
	t.Helper()
	vb := array.NewStringBuilder(mem)
	for _, v := range dict {
		if v == nil {
			vb.AppendNull()
		} else {
			vb.Append(*v)
		}
	}
	values := vb.NewArray()
	vb.Release()
	kb := array.NewInt8Builder(mem)
	for _, k := range keys {
		if k < 0 {
			kb.AppendNull()
		} else {
			kb.Append(int8(k))
		}
	}
	idx := kb.NewArray()
	kb.Release()
	out := array.NewDictionaryArray(dictInt8, idx, values)
	idx.Release()
	values.Release()
	return out
}

func strs(vs ...string) []*string {
	out := make([]*string, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

// TestDictionaryPageLayout: a dictionary column is written in the shape
// LanceDB 0.31 writes for an Arrow dictionary column (checked against its
// files: test/interop TestReferenceTableRoundTrip), its page dictionary
// holds each value once whatever the input dictionaries repeat, and a null
// key and a key pointing at a null value both read as null, through one
// null item.
func TestDictionaryPageLayout(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "role", Type: dictInt8, Nullable: true}}, nil)
	// Input dictionaries with a duplicate value and a null value.
	a := dictArray(t, append(strs("tool", "assistant", "tool"), nil), []int{0, 1, 2, -1, 3, 1})
	b := dictArray(t, strs("grade", "assistant"), []int{1, 0, 0})
	recs := []arrow.RecordBatch{
		array.NewRecordBatch(as, []arrow.Array{a}, int64(a.Len())),
		array.NewRecordBatch(as, []arrow.Array{b}, int64(b.Len())),
	}
	data, _ := writeFile(t, as, WriterOptions{}, recs...)
	r, src := openBytes(t, data)
	col := r.top[0].col
	if len(col.pages) != 1 {
		t.Fatalf("%d pages, want 1", len(col.pages))
	}
	d := col.pages[0].desc.(*dictPage)
	if d.bits != 8 || d.n != 4 {
		t.Fatalf("page: %d-bit keys, %d items; want 8-bit keys and 4 items (tool, assistant, null, grade)", d.bits, d.n)
	}
	keys := src.b[d.indices.off : d.indices.off+d.indices.size]
	if want := []byte{0, 1, 0, 2, 2, 1, 1, 3, 3}; string(keys) != string(want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	items := src.b[d.items.bytes.off : d.items.bytes.off+d.items.bytes.size]
	if string(items) != "toolassistantgrade" || d.items.adj != uint64(len(items))+1 {
		t.Errorf("items %q, null adjustment %d", items, d.items.adj)
	}
	ends := u64s(src.b[d.items.indices.off : d.items.indices.off+d.items.indices.size])
	if want := []uint64{4, 13, 13 + d.items.adj, 18}; !equalInts(ends, want) {
		t.Errorf("item ends %v, want %v", ends, want)
	}

	// The encoding message, byte for byte the shape LanceDB writes.
	want := encDictionary(encNoNulls(encFlat(8, 0)),
		encBinary(encNoNulls(encFlat(64, 1)), encFlat(8, 2), d.items.adj), 4)
	got := pageEncodingOf(t, data, 0)
	if !proto.Equal(got, want) {
		t.Errorf("page encoding\n got  %v\n want %v", got, want)
	}

	rec, err := r.Read(context.Background(), []int32{0}, 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	gotVals := rec.Column(0).(*array.Dictionary)
	checkDictUnique(t, gotVals)
	var vals []string
	for i := range gotVals.Len() {
		if gotVals.IsNull(i) {
			vals = append(vals, "<null>")
		} else {
			vals = append(vals, gotVals.Dictionary().(*array.String).Value(gotVals.GetValueIndex(i)))
		}
	}
	if fmt.Sprint(vals) != "[tool assistant tool <null> <null> assistant assistant grade grade]" {
		t.Errorf("read %v", vals)
	}
}

// pageEncodingOf returns the ArrayEncoding of the first page of column col.
func pageEncodingOf(t testing.TB, data []byte, col int) *pb.ArrayEncoding {
	t.Helper()
	ft, err := parseFooter(data[len(data)-footerLen:])
	if err != nil {
		t.Fatal(err)
	}
	e := data[ft.cmoTableStart+16*uint64(col):]
	pos, n := u64s(e[:16])[0], u64s(e[:16])[1]
	var cm pb.ColumnMetadata
	if err := proto.Unmarshal(data[pos:pos+n], &cm); err != nil {
		t.Fatal(err)
	}
	enc, err := pageEncoding(cm.GetPages()[0].GetEncoding())
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// TestDictionaryPagesSplitOnKeyOverflow: 8-bit keys address 128 values, so
// the writer starts a new page before a page's dictionary would need a
// 129th; rows read within what one key type can address decode, and a read
// whose rows hold more distinct values than that fails with ErrUnsupported
// instead of wrapping keys.
func TestDictionaryPagesSplitOnKeyOverflow(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dictInt8}}, nil)
	var recs []arrow.RecordBatch
	for b := range 3 {
		var dict []*string
		var keys []int
		for i := range 100 {
			s := fmt.Sprintf("value-%03d", b*100+i)
			dict = append(dict, &s)
			keys = append(keys, i)
		}
		a := dictArray(t, dict, keys)
		recs = append(recs, array.NewRecordBatch(as, []arrow.Array{a}, 100))
	}
	data, info := writeFile(t, as, WriterOptions{}, recs...)
	if info.Rows != 300 {
		t.Fatalf("%d rows", info.Rows)
	}
	r, _ := openBytes(t, data)
	col := r.top[0].col
	if len(col.pages) != 3 {
		t.Fatalf("%d pages, want 3 (128 + 128 + 44 values)", len(col.pages))
	}
	for i, p := range col.pages {
		if d := p.desc.(*dictPage); d.n > 128 || d.n != p.rows {
			t.Errorf("page %d: %d items for %d rows", i, d.n, p.rows)
		}
	}
	for _, rg := range [][2]int64{{0, 100}, {100, 228}, {150, 250}, {299, 300}} {
		rec, err := r.Read(context.Background(), []int32{0}, rg[0], rg[1])
		if err != nil {
			t.Fatalf("rows %s: %v", rangeString(rg), err)
		}
		d := rec.Column(0).(*array.Dictionary)
		checkDictUnique(t, d)
		for i := range d.Len() {
			got := d.Dictionary().(*array.String).Value(d.GetValueIndex(i))
			if want := fmt.Sprintf("value-%03d", rg[0]+int64(i)); got != want {
				t.Fatalf("rows %s: row %d is %q, want %q", rangeString(rg), i, got, want)
			}
		}
		rec.Release()
	}
	_, err := r.Read(context.Background(), []int32{0}, 0, 300)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("reading 300 distinct values with int8 keys: %v, want ErrUnsupported", err)
	}
	// A plain read has no such bound.
	plain, err := r.ReadWith(context.Background(), []int32{0}, 0, 300, ReadOptions{PlainDictionaries: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release()
	for i := range 300 {
		if got, want := plain.Column(0).(*array.String).Value(i), fmt.Sprintf("value-%03d", i); got != want {
			t.Fatalf("plain row %d: %q, want %q", i, got, want)
		}
	}
}

// TestDictionaryColumnFromPlainValues: a dictionary column also takes a
// plain array of its value type (what a merge of utf8 rows into a table
// with a dictionary column writes), dictionary-encoding it per page.
func TestDictionaryColumnFromPlainValues(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dictInt8, Nullable: true}}, nil)
	plainSchema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewStringBuilder(mem)
	for i := range 300 {
		if i%7 == 3 {
			b.AppendNull()
		} else {
			b.Append(fmt.Sprintf("v%d", i%150))
		}
	}
	vals := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(plainSchema, []arrow.Array{vals}, 300)
	defer rec.Release()
	s, err := schema.FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	r, _ := openBytes(t, buf.Bytes())
	pages := r.top[0].col.pages
	if len(pages) < 2 {
		t.Fatalf("%d pages: 150 values and a null item do not fit 128 keys", len(pages))
	}
	for i, p := range pages {
		if d := p.desc.(*dictPage); d.n > 128 {
			t.Errorf("page %d: %d items", i, d.n)
		}
	}
	got, err := r.ReadWith(context.Background(), []int32{0}, 0, 300, ReadOptions{PlainDictionaries: true})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	assertEqualArrays(t, "plain", vals, got.Column(0))
	vals.Release()
}
