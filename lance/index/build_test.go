package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// BenchmarkBuild builds the index of 100k random 36-byte ids (one
// fragment), the smallest size bench/scale measures.
//
//	go test -run '^$' -bench Build -benchmem ./lance/index
func BenchmarkBuild(b *testing.B) {
	const n = 100_000
	st := newStore(b)
	ctx := context.Background()
	rb := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff))
		rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("ro-%06d", i/8))
		rb.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	d := appendRecord(b, st, rb)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Build(ctx, d, "id", BuildOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLargeStringColumnWithNulls: page_data of a large_string column (int64
// offsets) with nulls, written in several writes of whole index pages, gives
// the same rows as a scan.
func TestLargeStringColumnWithNulls(t *testing.T) {
	ctx := context.Background()
	st, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	as := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	s, err := schema.FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Create(ctx, st, s, table.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 2*writeRows + 333
	rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
	for i := range n {
		if i%7 == 0 {
			rb.Field(0).(*array.LargeStringBuilder).AppendNull()
		} else {
			rb.Field(0).(*array.LargeStringBuilder).Append(fmt.Sprintf("v%05d", (i*7919)%n))
		}
		rb.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	appendRecord(t, st, rb)
	if res, err := Update(ctx, st, "key", BuildOptions{BatchSize: 100}); err != nil || !res.Built {
		t.Fatalf("update: %+v %v", res, err)
	}
	var vals []string
	for _, i := range []int{1, 2, 99, 100, 4095, 4096, 8191, n - 1} {
		vals = append(vals, fmt.Sprintf("v%05d", (i*7919)%n))
	}
	if f := checkAgree(t, st, "large_string", append(vals, "v-missing", ""), "key"); f.covered == 0 {
		t.Fatal("the index was not used")
	}
}

// appendRecord commits the rows of rb (released) as one new fragment.
func appendRecord(tb testing.TB, st objstore.Store, rb *array.RecordBuilder) *table.Dataset {
	tb.Helper()
	ctx := context.Background()
	rec := rb.NewRecordBatch()
	rb.Release()
	defer rec.Release()
	d, err := table.Open(ctx, st)
	if err != nil {
		tb.Fatal(err)
	}
	frag, err := table.WriteFragment(ctx, st, d.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		tb.Fatal(err)
	}
	if d, err = table.Append(ctx, st, []*pb.DataFragment{frag}, nil); err != nil {
		tb.Fatal(err)
	}
	return d
}
