package file

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/schema"
)

// TestPlacedValuesAreReferencedNotWritten: a file whose first Base bytes
// are already written (a WAL segment's frames) and whose binary pages
// reference value bytes in them reads back as if the values had been
// written; the writer writes only the end offsets of those pages.
func TestPlacedValuesAreReferencedNotWritten(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "blob", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
	}, nil)
	ls, err := schema.FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Three batches; the first two have their text (and the second its
	// blob) in the prefix, the third is written as usual.
	var recs []arrow.RecordBatch
	var want [][3]string
	for b := range 3 {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		lb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.LargeBinary)
		for i := range 50 + b {
			ib.Append(int64(b*100 + i))
			row := [3]string{fmt.Sprint(b*100 + i), "<null>", "<null>"}
			if i%9 != 4 {
				v := fmt.Sprintf("text %d.%d %s", b, i, bytes.Repeat([]byte{'x'}, i))
				sb.Append(v)
				row[1] = v
			} else {
				sb.AppendNull()
			}
			if i%5 != 0 {
				v := fmt.Sprintf("blob-%d-%d", b, i)
				lb.Append([]byte(v))
				row[2] = v
			} else {
				lb.AppendNull()
			}
			want = append(want, row)
		}
		cols := []arrow.Array{ib.NewArray(), sb.NewArray(), lb.NewArray()}
		recs = append(recs, array.NewRecordBatch(as, cols, int64(cols[0].Len())))
		for _, c := range cols {
			c.Release()
		}
		ib.Release()
		sb.Release()
		lb.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	// The prefix: junk, then the placed value runs, then more junk.
	var prefix bytes.Buffer
	prefix.WriteString("frames and headers the file's pages never read")
	placed := map[arrow.Array]int64{}
	place := func(a arrow.Array) {
		var v []byte
		switch a := a.(type) {
		case *array.String:
			v = append(v, a.ValueBytes()...)
		case *array.LargeBinary:
			v = append(v, a.ValueBytes()...)
		}
		placed[a] = int64(prefix.Len())
		prefix.Write(v)
		prefix.WriteString("|junk|")
	}
	place(recs[0].Column(1))
	place(recs[1].Column(1))
	place(recs[1].Column(2))
	base := int64(prefix.Len())

	file, _ := writeFileAfter(t, as, bytes.Clone(prefix.Bytes()), placed, recs...)
	written := file[base:]
	// The placed text must not have been written again.
	if bytes.Contains(written, []byte("text 0.7 ")) || bytes.Contains(written, []byte("blob-1-3")) {
		t.Fatal("placed values were written again")
	}
	if !bytes.Contains(written, []byte("text 2.7 ")) {
		t.Fatal("the unplaced batch's values are missing")
	}
	r, _ := openBytes(t, file)
	got, err := r.Read(context.Background(), []int32{0, 1, 2}, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if int(got.NumRows()) != len(want) {
		t.Fatalf("%d rows, want %d", got.NumRows(), len(want))
	}
	for i, row := range want {
		for c := range 3 {
			if g := cell(got.Column(c), i); g != row[c] {
				t.Fatalf("row %d column %d: %q, want %q", i, c, g, row[c])
			}
		}
	}

	// A placed range that is not below Base is refused.
	w, err := NewWriter(&bytes.Buffer{}, ls, WriterOptions{Base: 10, Placed: func(arrow.Array) (int64, bool) { return 5, true }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(recs[0]); err == nil {
		t.Fatal("a placed range past Base was accepted")
	}
}

func cell(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "<null>"
	}
	switch a := a.(type) {
	case *array.Int64:
		return fmt.Sprint(a.Value(i))
	case *array.String:
		return a.Value(i)
	case *array.LargeBinary:
		return string(a.Value(i))
	}
	return fmt.Sprintf("<%T>", a)
}
