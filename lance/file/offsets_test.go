package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestPackedOffsets checks that packed offsets give back every range of
// the raw entries: equal widths, varying widths, nulls (none, some, all
// per block), large gaps, and offsets that do not ascend (kept raw).
func TestPackedOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const adj = 1 << 40
	cases := map[string]func(i int, end uint64) (uint64, bool){
		"equal":    func(i int, end uint64) (uint64, bool) { return end + 16, false },
		"varying":  func(i int, end uint64) (uint64, bool) { return end + uint64(900+rng.IntN(250)), false },
		"nulls":    func(i int, end uint64) (uint64, bool) { return end + uint64(rng.IntN(40)), rng.IntN(3) == 0 },
		"allnull":  func(i int, end uint64) (uint64, bool) { return end, true },
		"empty":    func(i int, end uint64) (uint64, bool) { return end, false },
		"huge":     func(i int, end uint64) (uint64, bool) { return end + uint64(rng.IntN(1<<33)), false },
		"halfnull": func(i int, end uint64) (uint64, bool) { return end + 3, i >= 300 && i < 700 },
	}
	for name, gen := range cases {
		for _, n := range []int{1, 2, 255, 256, 257, 1000} {
			raw := make([]byte, 0, 8*n)
			var end uint64
			for i := 0; i < n; i++ {
				v, null := gen(i, end)
				end = v
				if null {
					v += adj
				}
				raw = binary.LittleEndian.AppendUint64(raw, v)
			}
			p := packOffsets(raw, adj)
			for k := 0; k < 50; k++ {
				lo := rng.IntN(n)
				hi := lo + 1 + rng.IntN(n-lo)
				if got := p.appendRange(nil, lo, hi); !bytes.Equal(got, raw[8*lo:8*hi]) {
					t.Fatalf("%s n=%d [%d,%d): entries differ", name, n, lo, hi)
				}
			}
			if got := p.appendRange(nil, 0, n); !bytes.Equal(got, raw) {
				t.Fatalf("%s n=%d: all entries differ", name, n)
			}
			if name == "equal" && p.bytes() > 200+int64(n)/8 {
				t.Errorf("equal widths: %d entries packed into %d bytes", n, p.bytes())
			}
		}
	}
	// Not ascending: kept raw.
	raw := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 10), 5)
	p := packOffsets(raw, 0)
	if p.raw == nil || !bytes.Equal(p.appendRange(nil, 0, 2), raw) {
		t.Fatal("descending offsets were not kept raw")
	}
}

// TestLargeOffsetsPrefetched checks that a point read of a page whose
// offsets buffer is too large to read whole (a page of short strings
// holding many rows) reads the slice it needs and then, in the background,
// the whole buffer, so that the next point read of the page reads its
// bytes only: one read, not offsets then bytes. It happens once per
// Reader (an eviction does not start it again), and never for a read of
// much of the page.
func TestLargeOffsetsPrefetched(t *testing.T) {
	const n = 300_000 // 2.4 MB of offsets in one page
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	sb := array.NewStringBuilder(mem)
	for i := range n {
		if i%7 == 3 {
			sb.AppendNull()
			continue
		}
		sb.Append(fmt.Sprintf("v%07d", i))
	}
	col := sb.NewArray()
	rec := array.NewRecordBatch(as, []arrow.Array{col}, n)
	b, _ := writeFile(t, as, WriterOptions{PageBytes: 64 << 20}, rec)
	r, src := openBytesIO(t, b, wholeIO)
	n0 := r.top[0].col
	if len(n0.pages) != 1 {
		t.Fatalf("%d pages, want one", len(n0.pages))
	}
	if sz := n0.pages[0].desc.(*binDesc).indices.size; sz <= maxCachedOffsets || sz > maxPrefetchedOffsets {
		t.Fatalf("offsets buffer of %d bytes: not the case under test", sz)
	}
	// reads reads one row and returns the reads it took, background ones
	// included.
	reads := func(row int64) int64 {
		t.Helper()
		before := src.reads.Load()
		got, err := r.Read(context.Background(), []int32{0}, row, row+1)
		if werr := wholeIO.Wait(context.Background()); werr != nil {
			t.Fatal(werr)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer got.Release()
		want := array.NewSlice(col, row, row+1)
		defer want.Release()
		assertEqualArrays(t, "s", want, got.Column(0))
		return src.reads.Load() - before
	}
	first := reads(100_000)
	var warm []int64
	for _, row := range []int64{0, 1, 150_001, n - 20_000} { // not the last rows: their bytes are in Open's tail
		warm = append(warm, reads(row))
	}
	if k := reads(3); k != 0 { // a null: the offsets say so
		t.Errorf("a null row after the prefetch: %d reads, want 0", k)
	}
	r.io.cache.Remove(offsetsKey{r.id, n0.pages[0].desc.(*binDesc).indices.off})
	cold := reads(200_001) // offsets, bytes
	t.Logf("reads of one row: first %d, after the prefetch %v, after an eviction %d", first, warm, cold)
	if first != cold+1 {
		t.Errorf("first point read: %d reads, want %d (a read after an eviction, and the prefetch)", first, cold+1)
	}
	for i, k := range warm {
		if k != cold-1 {
			t.Errorf("point read %d after the prefetch: %d reads, want %d (no offsets read)", i, k, cold-1)
		}
	}
	// A read of most of the page on a new Reader starts none.
	r2, src2 := openBytesIO(t, b, wholeIO)
	before := src2.reads.Load()
	got, err := r2.Read(context.Background(), []int32{0}, 1000, n-1000)
	if err != nil {
		t.Fatal(err)
	}
	got.Release()
	if err := wholeIO.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := src2.reads.Load() - before; k != 2 {
		t.Fatalf("a scan of the page: %d reads, want 2", k)
	}
}

// TestLargeOffsetsPrefetchedWhenSlotsAreBusy: a point read touching more
// large offsets buffers than there are background slots gets every one of
// them read (queued), not only those that found a slot free. Dropped
// buffers waited for a later read to ask again, and on a store of 10M rows
// hundreds of them stayed cold for tens of thousands of reads.
func TestLargeOffsetsPrefetchedWhenSlotsAreBusy(t *testing.T) {
	const n, cols = 140_000, 6 // 1.1 MB of offsets per column, one page each
	cols2 := cap(wholeIO.slots) + cols
	var fields []arrow.Field
	for c := range cols2 {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("s%d", c), Type: arrow.BinaryTypes.String})
	}
	as := arrow.NewSchema(fields, nil)
	var arrs []arrow.Array
	for c := range cols2 {
		sb := array.NewStringBuilder(mem)
		for i := range n {
			sb.Append(fmt.Sprintf("c%d-%07d", c, i))
		}
		arrs = append(arrs, sb.NewArray())
	}
	rec := array.NewRecordBatch(as, arrs, n)
	b, _ := writeFile(t, as, WriterOptions{PageBytes: 64 << 20}, rec)
	r, _ := openBytesIO(t, b, wholeIO)
	ids := make([]int32, cols2)
	for c := range cols2 {
		ids[c] = int32(c)
		d := r.top[int32(c)].col.pages[0].desc.(*binDesc)
		if d.indices.size <= maxCachedOffsets || len(r.top[int32(c)].col.pages) != 1 {
			t.Fatalf("column %d: %d pages, offsets of %d bytes: not the case under test", c, len(r.top[int32(c)].col.pages), d.indices.size)
		}
	}
	got, err := r.Read(context.Background(), ids, 70_000, 70_001)
	if err != nil {
		t.Fatal(err)
	}
	got.Release()
	if err := wholeIO.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for c := range cols2 {
		d := r.top[int32(c)].col.pages[0].desc.(*binDesc)
		if _, ok := r.io.cache.Get(offsetsKey{r.id, d.indices.off}); !ok {
			t.Errorf("column %d: offsets not prefetched (%d slots for %d buffers)", c, cap(wholeIO.slots), cols2)
		}
	}
}

// TestMain turns the column warm off: this package's tests count the bytes
// and reads of a Read, and the warm's background reads would race into
// them. The other packages' tests run with it on.
func TestMain(m *testing.M) {
	columnWarmOn = func() bool { return false }
	os.Exit(m.Run())
}

// TestSmallOffsetsOfAColumnWarmedByAPointRead: the first point read that
// reads a small offsets buffer of a column whole warms the column's other
// small buffers in the background, so a point read of any page of it
// then reads its bytes alone. Before, a 10M-row store's text columns
// (~120 such buffers per 1M-row fragment) met uncached buffers for
// thousands of random reads, each paying one more read.
func TestSmallOffsetsOfAColumnWarmedByAPointRead(t *testing.T) {
	prev := columnWarmOn
	columnWarmOn = func() bool { return true }
	t.Cleanup(func() { columnWarmOn = prev })
	const n = 40_000
	as, rec := stringListRecord(n, 11, 5, func(i int) (string, int) {
		return fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%40)), i % 5
	})
	b, _ := writeFile(t, as, WriterOptions{PageBytes: 64 << 10}, rec)

	// offsetsOf lists column c's offsets buffers, page by page.
	offsetsOf := func(r *Reader, c int32) []bufRange {
		var out []bufRange
		for _, pg := range r.top[c].col.pages {
			switch d := pg.desc.(type) {
			case *binDesc:
				out = append(out, d.indices)
			case *listDesc:
				out = append(out, d.offsets)
			}
		}
		return out
	}
	cached := func(r *Reader, c int32) (k int) {
		for _, o := range offsetsOf(r, c) {
			if _, ok := r.io.cache.Get(offsetsKey{r.id, o.off}); ok {
				k++
			}
		}
		return k
	}
	r, src := openBytesIO(t, b, wholeIO)
	for c := range int32(2) {
		bufs := offsetsOf(r, c)
		if len(bufs) < 4 {
			t.Fatalf("column %d: %d pages, want many: not the case under test", c, len(bufs))
		}
		for _, o := range bufs {
			if o.size > maxCachedOffsets {
				t.Fatalf("column %d: an offsets buffer of %d bytes: not the case under test", c, o.size)
			}
		}
	}
	// read reads one row of column c and returns the reads it took.
	read := func(r *Reader, src *memSource, c int32, row int64) int64 {
		t.Helper()
		before := src.reads.Load()
		got, err := r.Read(context.Background(), []int32{c}, row, row+1)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Release()
		want := array.NewSlice(rec.Column(int(c)), row, row+1)
		defer want.Release()
		assertEqualArrays(t, as.Field(int(c)).Name, want, got.Column(0))
		return src.reads.Load() - before
	}
	for c := range int32(2) {
		read(r, src, c, 17)
	}
	if err := wholeIO.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for c := range int32(2) {
		if k, all := cached(r, c), len(offsetsOf(r, c)); k != all {
			t.Errorf("column %d: %d of %d offsets buffers cached after one point read", c, k, all)
		}
		col := r.top[c].col
		for p := 1; p < len(col.pages); p += 3 {
			row := col.starts[p] + 1
			if row%11 == 5 {
				row++
			}
			if k := read(r, src, c, row); k > 1 { // 0: its bytes are in Open's tail
				t.Errorf("column %d page %d: %d reads after the warm, want 1 (its bytes)", c, p, k)
			}
		}
	}
	// A read of most of a page, on a new Reader, warms nothing else.
	r2, _ := openBytesIO(t, b, wholeIO)
	col := r2.top[0].col
	got, err := r2.Read(context.Background(), []int32{0}, col.starts[2], col.starts[3])
	if err != nil {
		t.Fatal(err)
	}
	got.Release()
	if err := wholeIO.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := cached(r2, 0); k != 1 {
		t.Errorf("a read of a whole page cached %d offsets buffers, want 1 (its own)", k)
	}
}

// stringListRecord is n rows of a string column s and a list<int32> column
// l: row i is null in both when i%every == at, else s is the string value
// gives and l holds items i, i+1, ... (as many as value gives).
func stringListRecord(n, every, at int, value func(i int) (string, int)) (*arrow.Schema, arrow.RecordBatch) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	sb := array.NewStringBuilder(mem)
	lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	for i := range n {
		if i%every == at {
			sb.AppendNull()
			lb.AppendNull()
			continue
		}
		s, items := value(i)
		sb.Append(s)
		lb.Append(true)
		for k := range items {
			vb.Append(int32(i + k))
		}
	}
	return as, array.NewRecordBatch(as, []arrow.Array{sb.NewArray(), lb.NewArray()}, int64(n))
}
