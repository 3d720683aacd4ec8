package objstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/objstoretest"
)

func TestCountingConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return objstore.NewCounting(objstore.NewMemory(), 0)
	})
}

func TestCountingCounts(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(objstore.NewMemory(), 0)
	if err := c.Put(ctx, "a", []byte("hello world")); err != nil {
		t.Fatal(err)
	}
	if err := c.PutIfAbsent(ctx, "b", []byte("xyz")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRange(ctx, "a", 6, 100); err != nil { // 5 bytes: truncated at the end
		t.Fatal(err)
	}
	dst := make([]byte, 2)
	if err := c.GetRangeInto(ctx, "b", 1, dst); err != nil || string(dst) != "yz" {
		t.Fatalf("GetRangeInto = %q, %v", dst, err)
	}
	if _, err := c.Head(ctx, "missing"); err == nil {
		t.Fatal("Head(missing) succeeded")
	}
	if _, err := c.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	w, err := c.Create(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("1234"))
	w.Write([]byte("56"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := objstore.Discard(ctx, c, "w"); err != nil {
		t.Fatal(err)
	}
	got := c.Counts()
	want := map[objstore.Op]int{
		objstore.OpPut: 1, objstore.OpPutIfAbsent: 1, objstore.OpGet: 1, objstore.OpGetRange: 2,
		objstore.OpHead: 1, objstore.OpList: 1, objstore.OpCreate: 1, objstore.OpWrite: 2,
		objstore.OpCommit: 1, objstore.OpDelete: 1,
	}
	for op, n := range want {
		if got.Calls[op] != n {
			t.Errorf("calls of %s = %d, want %d (%v)", op, got.Calls[op], n, got)
		}
	}
	if len(got.Calls) != len(want) {
		t.Errorf("calls = %v, want %v", got.Calls, want)
	}
	if got.Requests() != 10 {
		t.Errorf("Requests() = %d, want 10", got.Requests())
	}
	if got.BytesRead != 11+5+2 {
		t.Errorf("BytesRead = %d, want 18", got.BytesRead)
	}
	if got.BytesWritten != 11+3+6 {
		t.Errorf("BytesWritten = %d, want 20", got.BytesWritten)
	}
	// Every call ran after the previous one finished: a chain of all 9
	// requests (Create is not one), never two in flight.
	if got.Sequential != 9 || got.MaxInFlight != 1 {
		t.Errorf("Sequential = %d, MaxInFlight = %d; want 9, 1", got.Sequential, got.MaxInFlight)
	}
	c.Reset()
	if z := c.Counts(); z.Requests() != 0 || z.BytesRead != 0 || z.Sequential != 0 || z.MaxInFlight != 0 {
		t.Fatalf("after Reset: %v", z)
	}
}

// TestCountingDepth checks the chain depth: parallel calls count once,
// a call after them one more.
func TestCountingDepth(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(objstore.NewMemory(), 30*time.Millisecond)
	if err := c.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			if _, err := c.Get(ctx, "k"); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	got := c.Counts()
	if got.Calls[objstore.OpGet] != 8 || got.Sequential != 1 || got.MaxInFlight != 8 {
		t.Fatalf("8 parallel gets: %v; want 8 gets, 1 sequential, 8 in flight", got)
	}
	if _, err := c.Head(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got := c.Counts(); got.Sequential != 2 || got.Requests() != 9 {
		t.Fatalf("then a head: %v; want 9 requests, 2 sequential", got)
	}
	// A canceled context is not held for the latency.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Get(cctx, "k"); err == nil {
		t.Fatal("Get with a canceled context succeeded")
	}
}
