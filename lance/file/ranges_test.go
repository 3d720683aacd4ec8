package file

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestReadRangesMatchesRead reads scattered row ranges of every supported
// type (some nulls, small pages, so ranges cross pages) with one ReadRanges
// call and checks the rows equal a Read of each range, concatenated.
func TestReadRangesMatchesRead(t *testing.T) {
	ctx := context.Background()
	sets := [][][2]int64{
		{{0, 1}, {5, 6}, {7, 9}, {100, 101}, {699, 703}, {1000, 1300}, {2000, 2001}},
		{{0, 2001}},
		{{3, 3}, {10, 10}},
		{},
	}
	for _, tc := range roundTripTypes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			as := arrow.NewSchema([]arrow.Field{
				{Name: "id", Type: arrow.PrimitiveTypes.Int64},
				{Name: "x", Type: tc.dt, Nullable: true},
			}, nil)
			g := &gen{rng: rand.New(rand.NewPCG(7, uint64(len(tc.name)))), nullP: 0.2}
			var recs []arrow.RecordBatch
			for _, n := range []int{700, 1301} {
				recs = append(recs, g.record(as, n))
			}
			b, _ := writeFile(t, as, WriterOptions{PageBytes: 256}, recs...)
			r, _ := openBytes(t, b)
			_, dict := tc.dt.(*arrow.DictionaryType)
			opts := ReadOptions{PlainDictionaries: dict} // dictionaries of separate reads do not concatenate
			for _, rgs := range sets {
				got, err := r.ReadRanges(ctx, []int32{0, 1}, rgs, opts)
				if err != nil {
					t.Fatalf("ReadRanges %v: %v", rgs, err)
				}
				var parts [2][]arrow.Array
				var rows int64
				for _, rg := range rgs {
					rec, err := r.ReadWith(ctx, []int32{0, 1}, rg[0], rg[1], opts)
					if err != nil {
						t.Fatalf("Read %v: %v", rg, err)
					}
					for c := range parts {
						parts[c] = append(parts[c], rec.Column(c))
					}
					rows += rg[1] - rg[0]
				}
				if got.NumRows() != rows {
					t.Fatalf("ReadRanges %v: %d rows, want %d", rgs, got.NumRows(), rows)
				}
				for c := range parts {
					if len(parts[c]) == 0 {
						if got.Column(c).Len() != 0 {
							t.Fatalf("no ranges: column %d has %d rows", c, got.Column(c).Len())
						}
						continue
					}
					want, err := array.Concatenate(parts[c], memory.DefaultAllocator)
					if err != nil {
						t.Fatal(err)
					}
					if !array.Equal(want, got.Column(c)) {
						t.Fatalf("ReadRanges %v column %d:\n got %v\nwant %v", rgs, c, got.Column(c), want)
					}
				}
			}
			if _, err := r.ReadRanges(ctx, []int32{1}, [][2]int64{{5, 9}, {8, 10}}, opts); err == nil {
				t.Fatal("overlapping ranges: no error")
			}
			if _, err := r.ReadRanges(ctx, []int32{1}, [][2]int64{{2000, 2002}}, opts); err == nil {
				t.Fatal("range past the end: no error")
			}
		})
	}
}
