package file

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/schema"
)

// TestBinaryPageReferencesValues: a binary page's values are runs of the
// appended arrays' value buffers, not copies (consecutive slices of one
// array are one run), and the file reads back the same whatever the runs:
// nulls, slices, several arrays in a page.
func TestBinaryPageReferencesValues(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true}}, nil)
	b := array.NewLargeStringBuilder(memory.DefaultAllocator)
	var want []string
	for i := range 300 {
		v := strings.Repeat(string(rune('a'+i%26)), 1+i%40)
		if i%7 == 3 {
			b.AppendNull()
			want = append(want, "<null>")
			continue
		}
		b.Append(v)
		want = append(want, v)
	}
	whole := b.NewArray()
	b.Release()
	defer whole.Release()
	lo := array.NewSlice(whole, 0, 100)
	hi := array.NewSlice(whole, 100, 300)
	defer lo.Release()
	defer hi.Release()

	ls, err := schema.FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := NewWriter(&out, ls, WriterOptions{HoldValues: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []arrow.Array{lo, hi} {
		rec := array.NewRecordBatch(as, []arrow.Array{a}, int64(a.Len()))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	bw := w.fields[0].(*binaryWriter)
	values := whole.(*array.LargeString).ValueBytes()
	if len(bw.data) != 1 || unsafe.SliceData(bw.data[0]) != unsafe.SliceData(values) || len(bw.data[0]) != len(values) {
		t.Fatalf("page values are %d runs, want the array's one buffer uncopied", len(bw.data))
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if len(bw.held) != 0 {
		t.Fatalf("%d arrays still held after the page was written", len(bw.held))
	}
	r, _ := openBytes(t, out.Bytes())
	got, err := r.Read(context.Background(), []int32{0}, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	col := got.Column(0).(*array.LargeString)
	for i, v := range want {
		g := "<null>"
		if col.IsValid(i) {
			g = col.Value(i)
		}
		if g != v {
			t.Fatalf("row %d: %q, want %q", i, g, v)
		}
	}
}

// TestBinaryNullRunsThenValues: all-null batches are only counted while
// their page holds nothing else, and read back as nulls whether a value
// follows on the same page, the page fills with them, or none follows.
func TestBinaryNullRunsThenValues(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	batch := func(vals ...string) arrow.RecordBatch {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		defer b.Release()
		for _, v := range vals {
			if v == "" {
				b.AppendNull()
			} else {
				b.Append(v)
			}
		}
		a := b.NewArray()
		defer a.Release()
		return array.NewRecordBatch(as, []arrow.Array{a}, int64(a.Len()))
	}
	nulls := func(n int) []string { return make([]string, n) }
	for _, tc := range []struct {
		name  string
		page  int
		parts [][]string
	}{
		{"nulls then a value", 0, [][]string{nulls(5), nulls(3), {"a", "", "b"}, nulls(2)}},
		{"only nulls", 0, [][]string{nulls(7), nulls(9)}},
		{"nulls past a page then values", 64, [][]string{nulls(5), nulls(20), {"x", "y"}, nulls(4), {"z"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			var want []string
			for _, p := range tc.parts {
				recs = append(recs, batch(p...))
				want = append(want, p...)
			}
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			b, _ := writeFile(t, as, WriterOptions{PageBytes: tc.page}, recs...)
			r, _ := openBytes(t, b)
			got, err := r.Read(context.Background(), []int32{0}, 0, r.NumRows())
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			col := got.Column(0).(*array.String)
			if col.Len() != len(want) {
				t.Fatalf("%d rows, want %d", col.Len(), len(want))
			}
			for i, v := range want {
				if (v == "") != col.IsNull(i) || (v != "" && col.Value(i) != v) {
					t.Fatalf("row %d: null %v %q, want %q", i, col.IsNull(i), col.Value(i), v)
				}
			}
		})
	}
}

// TestRegression_WriterCopiesValuesUnlessHeld: without HoldValues a
// caller may refill its buffers after Write (the index builder reuses its
// page buffers), and the file still holds what was written. Writing from
// the appended arrays for every caller made index lookups miss keys.
func TestRegression_WriterCopiesValuesUnlessHeld(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	ls, err := schema.FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := NewWriter(&out, ls, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("alphabetagamma")
	offs := []int32{0, 5, 9, 14}
	for range 2 {
		data := array.NewData(arrow.BinaryTypes.String, 3, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs)), memory.NewBufferBytes(buf)}, nil, 0, 0)
		arr := array.MakeFromData(data)
		rec := array.NewRecordBatch(as, []arrow.Array{arr}, 3)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		arr.Release()
		data.Release()
		copy(buf, "XXXXXXXXXXXXXX") // the caller's buffer, refilled
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	r, _ := openBytes(t, out.Bytes())
	got, err := r.Read(context.Background(), []int32{0}, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	col := got.Column(0).(*array.String)
	want := []string{"alpha", "beta", "gamma", "XXXXX", "XXXX", "XXXXX"}
	for i, v := range want {
		if col.Value(i) != v {
			t.Fatalf("row %d: %q, want %q (the values when written)", i, col.Value(i), v)
		}
	}
}

// TestNullRunsThenValuesEveryType: runs of all-null batches (only counted
// while their page holds nothing else) read back as nulls before, between
// and after batches with values, for fixed-width, boolean, fixed-size
// list and list columns, on one page and across small ones.
func TestNullRunsThenValuesEveryType(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "v", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	g := &gen{rng: rand.New(rand.NewPCG(7, 7)), nullP: 0.3}
	nulls := func(n int) arrow.RecordBatch {
		cols := make([]arrow.Array, len(as.Fields()))
		for i, f := range as.Fields() {
			cols[i] = allNull(f.Type, n)
		}
		defer func() {
			for _, c := range cols {
				c.Release()
			}
		}()
		return array.NewRecordBatch(as, cols, int64(n))
	}
	for _, tc := range []struct {
		name string
		page int
	}{{"one page", 0}, {"small pages", 96}} {
		t.Run(tc.name, func(t *testing.T) {
			recs := []arrow.RecordBatch{nulls(5), nulls(30), g.record(as, 9), nulls(4), g.record(as, 3), nulls(50)}
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			b, _ := writeFile(t, as, WriterOptions{PageBytes: tc.page}, recs...)
			r, _ := openBytes(t, b)
			got, err := r.Read(context.Background(), []int32{0, 1, 2, 3}, 0, r.NumRows())
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			for i := range as.Fields() {
				want := concatColumn(t, recs, i)
				assertEqualArrays(t, as.Field(i).Name, want, got.Column(i))
				want.Release()
			}
		})
	}
}
