package file

import (
	"context"
	"fmt"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"runtime"
	"testing"
	"weak"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/internal/lru"
)

// TestIOsDoNotShareOffsets: Readers opened through two IOs, each with a
// cache of its own, keep the offsets they read in their own IO's cache
// and not in the other's, nor in the process-wide one.
func TestIOsDoNotShareOffsets(t *testing.T) {
	const n = 2000
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	sb := array.NewStringBuilder(mem)
	for i := range n {
		sb.Append(fmt.Sprintf("v%05d", i))
	}
	col := sb.NewArray()
	rec := array.NewRecordBatch(as, []arrow.Array{col}, n)
	b, _ := writeFile(t, as, WriterOptions{}, rec)
	a := NewIO(IOOptions{Cache: lru.New(1 << 20), Concurrency: 3, PrefetchSlots: 1, WholeOffsets: true})
	z := NewIO(IOOptions{Cache: lru.New(1 << 20)})
	if a.Concurrency() != 3 || z.Concurrency() != DefaultIOConcurrency {
		t.Fatalf("concurrency %d and %d, want 3 and %d", a.Concurrency(), z.Concurrency(), DefaultIOConcurrency)
	}
	ra, err := a.Open(context.Background(), &memSource{b: b}, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ra.Read(context.Background(), []int32{0}, 17, 18)
	if err != nil {
		t.Fatal(err)
	}
	got.Release()
	if err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	off := ra.top[0].col.pages[0].desc.(*binDesc).indices.off
	if _, ok := a.cache.Get(offsetsKey{ra.id, off}); !ok {
		t.Fatal("the reader's own IO does not hold its offsets")
	}
	if k, _ := z.cache.Stats(); k != 0 {
		t.Errorf("the other IO's cache holds %d entries, want none", k)
	}
	if _, ok := lru.Shared().Get(offsetsKey{ra.id, off}); ok {
		t.Error("the process-wide cache holds offsets of a Reader of another IO")
	}
}

// TestRegression_CachedOffsetsDoNotPinTheirReader: offsets a Reader
// cached were keyed by the Reader itself, so the cache kept every Reader
// that ever cached offsets alive, with its Source, uncharged. A worker's
// merges read generations whole through a Source holding the whole file,
// and a soak's heap held gigabytes of such files past its memory limit.
func TestRegression_CachedOffsetsDoNotPinTheirReader(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	mem := memory.NewGoAllocator()
	sb := array.NewStringBuilder(mem)
	const n = 5000
	for i := range n {
		sb.Append(fmt.Sprintf("value-%06d", i))
	}
	col := sb.NewArray()
	rec := array.NewRecordBatch(as, []arrow.Array{col}, n)
	col.Release()
	b, _ := writeFile(t, as, WriterOptions{}, rec)
	rec.Release()
	io := NewIO(IOOptions{Cache: lru.New(64 << 20)})
	src := &memSource{b: b}
	gone := weak.Make(src)
	r, err := io.Open(context.Background(), src, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	src = nil
	got, err := r.Read(context.Background(), []int32{0}, 0, n) // a scan: caches the page's offsets whole
	if err != nil {
		t.Fatal(err)
	}
	got.Release()
	if err := io.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k, _ := io.cache.Stats(); k == 0 {
		t.Fatal("the read cached no offsets: the test checks nothing")
	}
	r = nil
	runtime.GC()
	runtime.GC()
	if gone.Value() != nil {
		t.Fatal("the Source of a Reader no longer used is still reachable: its cached offsets pin it")
	}
	runtime.KeepAlive(io)
}
