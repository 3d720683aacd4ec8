package file

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/objstore"
)

// logSource is a memSource that records every range it serves.
type logSource struct {
	*memSource
	mu     sync.Mutex
	ranges [][2]int64
}

func (l *logSource) ReadRange(ctx context.Context, off, n int64) ([]byte, error) {
	l.mu.Lock()
	l.ranges = append(l.ranges, [2]int64{off, off + n})
	l.mu.Unlock()
	return l.memSource.ReadRange(ctx, off, n)
}

func (l *logSource) take() [][2]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.ranges
	l.ranges = nil
	return r
}

// TestReadTakesTheTailFromOpen: a file whose data lies in the 64 KiB Open
// read (its tail) is read by Read with no request at all; before, the
// tail was kept for metadata only and the pages in it were read again.
func TestReadTakesTheTailFromOpen(t *testing.T) {
	b, _ := writeFile(t, mixedSchema, WriterOptions{}, mixedRecords(21, 300)...)
	if len(b) > tailReadSize {
		t.Fatalf("a file of %d bytes: not the case under test", len(b))
	}
	for _, io := range []*IO{DefaultIO(), wholeIO} {
		r, src := openBytesIO(t, b, io)
		before := src.reads.Load()
		var ids []int32
		for _, f := range r.Schema().Fields {
			ids = append(ids, f.ID)
		}
		for _, rg := range [][2]int64{{0, 300}, {17, 18}, {250, 260}} {
			got, err := r.Read(context.Background(), ids, rg[0], rg[1])
			if err != nil {
				t.Fatal(err)
			}
			fresh, _ := openBytes(t, b)
			want, err := fresh.Read(context.Background(), ids, rg[0], rg[1])
			if err != nil {
				t.Fatal(err)
			}
			for i := range ids {
				assertEqualArrays(t, fmt.Sprint(ids[i]), want.Column(i), got.Column(i))
			}
			got.Release()
			want.Release()
		}
		if n := src.reads.Load() - before; n != 0 {
			t.Errorf("whole offsets %v: reads of a file held by Open's tail took %d requests, want 0", io.whole, n)
		}
	}
}

// TestNoByteReadTwiceInARead: the requests of one Read never overlap one
// another nor Open's tail: a coalesced read's gap that a later wave needs
// (a string column's bytes after its offsets, read with another column's
// values) is taken from the bytes already read.
func TestNoByteReadTwiceInARead(t *testing.T) {
	b, _ := writeFile(t, mixedSchema, WriterOptions{PageBytes: 8 << 10}, mixedRecords(22, 20000, 20000)...)
	for _, io := range []*IO{DefaultIO(), wholeIO} {
		ms := &memSource{b: b}
		src := &logSource{memSource: ms}
		r, err := io.Open(context.Background(), src, int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		tailStart := int64(len(b)) - int64(len(r.tail))
		src.take()
		var ids []int32
		for _, f := range r.Schema().Fields {
			ids = append(ids, f.ID)
		}
		for _, rg := range [][2]int64{{17, 18}, {19_990, 20_010}, {5000, 5003}, {39_000, 39_999}, {100, 2100}} {
			got, err := r.Read(context.Background(), ids, rg[0], rg[1])
			if err != nil {
				t.Fatal(err)
			}
			got.Release()
			rs := src.take()
			for i, a := range rs {
				if a[1] > tailStart {
					t.Errorf("whole %v, rows %v: read [%d, %d) overlaps Open's tail from %d", io.whole, rg, a[0], a[1], tailStart)
				}
				for _, c := range rs[i+1:] {
					if a[0] < c[1] && c[0] < a[1] {
						t.Errorf("whole %v, rows %v: reads [%d, %d) and [%d, %d) overlap", io.whole, rg, a[0], a[1], c[0], c[1])
					}
				}
			}
		}
	}
}

// TestPointReadReadsOffsetsByRange: a point read of an object reads the
// chunks of the offsets buffers its rows fall in, not the buffers whole
// nor (in the background) the column's others: a cold read downloads
// about what it returns. The chunks are cached, so a read of the same or
// a nearby row reads its bytes alone.
func TestPointReadReadsOffsetsByRange(t *testing.T) {
	const n = 300_000 // 2.4 MB of offsets in one page
	as, rec := stringListRecord(n, 7, 3, func(i int) (string, int) { return fmt.Sprintf("v%07d", i), 1 })
	for _, pageBytes := range []int{64 << 20, 64 << 10} { // one large page; many small ones
		b, _ := writeFile(t, as, WriterOptions{PageBytes: pageBytes}, rec)
		io := NewIO(IOOptions{})
		r, src := openBytesIO(t, b, io)
		read := func(c int32, row int64) (reads, bytes int64) {
			t.Helper()
			r0, b0 := src.reads.Load(), src.bytes.Load()
			got, err := r.Read(context.Background(), []int32{c}, row, row+1)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if err := io.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := array.NewSlice(rec.Column(int(c)), row, row+1)
			defer want.Release()
			assertEqualArrays(t, as.Field(int(c)).Name, want, got.Column(0))
			return src.reads.Load() - r0, src.bytes.Load() - b0
		}
		for c := range int32(2) {
			reads, bytes := read(c, 123_456)
			t.Logf("pages of %d bytes, column %d: a cold point read took %d reads, %d bytes", pageBytes, c, reads, bytes)
			// Two chunks at most (the row before's end may lie in the
			// chunk before), and a guess at the row's bytes (guessBytes:
			// under 3 KiB each side for 8-byte values).
			if max := int64(2*8*offsetsChunk + 6<<10); bytes > max {
				t.Errorf("pages of %d bytes, column %d: a cold point read read %d bytes, want at most %d", pageBytes, c, bytes, max)
			}
			for _, row := range []int64{123_456, 123_457, 123_460} {
				if k, _ := read(c, row); k != 1 {
					t.Errorf("pages of %d bytes, column %d, row %d: %d reads after its chunk was read, want 1 (its bytes)", pageBytes, c, row, k)
				}
			}
		}
	}
}

// storeSource reads a file from an object store (a Source as lance/table
// makes one), so that objstore.Counting sees its round trips.
type storeSource struct {
	st  objstore.Store
	key string
}

func (s storeSource) ReadRange(ctx context.Context, off, n int64) ([]byte, error) {
	return s.st.GetRange(ctx, s.key, off, n)
}

// TestPointReadGuessesBytesBesideOffsets: a cold point read of a string
// column on an object store reads a guess at the row's bytes beside its
// offsets (guessBytes): for values of even size the guess holds them and
// the read costs one round trip, not two (offsets, then bytes); for
// uneven ones a miss costs the second round trip and the values are
// right either way.
func TestPointReadGuessesBytesBesideOffsets(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(3, 4))
	uneven := make([]int, n)
	for i := range uneven {
		uneven[i] = rng.IntN(2000)
	}
	for _, c := range []struct {
		name    string
		value   func(i int) string
		maxSeq  int
		rowsSet []int64
	}{
		{"even", func(i int) string { return fmt.Sprintf("v%07d", i) }, 1, []int64{17, 60_000}},
		{"uneven", func(i int) string { return strings.Repeat("x", uneven[i]) }, 2, []int64{17, 60_000}},
	} {
		as, rec := stringListRecord(n, 7, 3, func(i int) (string, int) { return c.value(i), 1 })
		b, _ := writeFile(t, as, WriterOptions{PageBytes: 64 << 20}, rec)
		for _, row := range c.rowsSet {
			counts := coldPointRead(t, b, rec, 0, row)
			if counts.Sequential > c.maxSeq {
				t.Errorf("%s values, row %d: a cold point read: %s; want at most %d sequential", c.name, row, counts, c.maxSeq)
			}
		}
	}
}

// TestPointReadGuessesListItemsBesideOffsets: a point read of a list of
// fixed-width items (token ids) on an object store reads a guess at the
// row's items beside its offsets, so that rows of even length cost one
// round trip (two without the guess: offsets, then items); rows of uneven
// length read back right when the guess misses.
func TestPointReadGuessesListItemsBesideOffsets(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(5, 6))
	uneven := make([]int, n)
	for i := range uneven {
		uneven[i] = rng.IntN(400)
	}
	for _, c := range []struct {
		name   string
		items  func(i int) int
		maxSeq int
	}{
		{"even", func(int) int { return 64 }, 1},
		{"uneven", func(i int) int { return uneven[i] }, 2},
	} {
		as, rec := stringListRecord(n, 7, 3, func(i int) (string, int) { return "s", c.items(i) })
		b, _ := writeFile(t, as, WriterOptions{PageBytes: 64 << 20}, rec)
		for _, row := range []int64{17, 60_001} {
			if counts := coldPointRead(t, b, rec, 1, row); counts.Sequential > c.maxSeq {
				t.Errorf("%s lists, row %d: a cold point read: %s; want at most %d sequential", c.name, row, counts, c.maxSeq)
			}
		}
		rec.Release()
	}
}

// coldPointRead reads row of field col of file b (written from rec) from a
// memory object store with 40 ms a request (above scheduling delays under
// -race), through a new IO, checks it against rec, and returns the
// requests of the read alone.
func coldPointRead(t *testing.T, b []byte, rec arrow.RecordBatch, col int, row int64) objstore.Counts {
	t.Helper()
	ctx := context.Background()
	st := objstore.NewMemory()
	if err := st.Put(ctx, "f.lance", b); err != nil {
		t.Fatal(err)
	}
	cs := objstore.NewCounting(st, 40*time.Millisecond)
	r, err := NewIO(IOOptions{}).Open(ctx, storeSource{cs, "f.lance"}, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	cs.Reset()
	got, err := r.Read(ctx, []int32{r.Schema().Fields[col].ID}, row, row+1)
	if err != nil {
		t.Fatal(err)
	}
	want := array.NewSlice(rec.Column(col), row, row+1)
	assertEqualArrays(t, r.Schema().Fields[col].Name, want, got.Column(0))
	want.Release()
	got.Release()
	return cs.Counts()
}
