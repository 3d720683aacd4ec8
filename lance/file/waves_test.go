package file

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestReadWavesAndCachedOffsets: the fields of one Read share their reads
// (one wave for every field's first reads, one for the string bytes), and
// a second Read of other rows of the same pages knows where the string
// bytes are from the cached offsets: one wave, with the same values as a
// fresh reader gives.
func TestReadWavesAndCachedOffsets(t *testing.T) {
	recs := mixedRecords(11, 3000)
	b, _ := writeFile(t, mixedSchema, WriterOptions{}, recs...)
	r, src := openBytesIO(t, b, wholeIO) // the second read's offsets cached whole
	ids := []int32{r.Schema().Field("id").ID, r.Schema().Field("n").ID, r.Schema().Field("text").ID}
	read := func(r *Reader, lo, hi int64) (int64, func()) {
		t.Helper()
		before := src.reads.Load()
		rec, err := r.Read(context.Background(), ids, lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		n := src.reads.Load() - before
		return n, func() {
			t.Helper()
			fresh, _ := openBytes(t, b)
			want, err := fresh.Read(context.Background(), ids, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ids {
				if !array.Equal(rec.Column(i), want.Column(i)) {
					t.Errorf("rows [%d, %d) column %d differ from a fresh reader's", lo, hi, i)
				}
			}
			rec.Release()
			want.Release()
		}
	}
	first, check1 := read(r, 100, 125)
	check1()
	second, check2 := read(r, 2000, 2025)
	check2()
	// Coalescing merges nearby ranges, so count reads, not waves: the
	// second read needs no offsets, so it reads no more than the first.
	t.Logf("reads: first %d, second %d", first, second)
	if second >= first {
		t.Errorf("second read took %d range reads, the first %d: the cached offsets were not used", second, first)
	}
}
