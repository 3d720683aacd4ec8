package wal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lance-context/lance-context/internal/clock"
	"github.com/lance-context/lance-context/objstore"
)

// readHolder reads the shard's holder or fails.
func readHolder(t *testing.T, store objstore.Store) *Holder {
	t.Helper()
	h, err := ReadHolder(context.Background(), store, "s1")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// waitHeartbeat waits until the shard's heartbeat reaches seq.
func waitHeartbeat(t *testing.T, store objstore.Store, seq uint64) *Holder {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		if h := readHolder(t, store); h.Heartbeat != nil && h.Heartbeat.Seq >= seq {
			return h
		}
	}
	t.Fatalf("heartbeat %d never written", seq)
	return nil
}

// TestHeartbeatRenewedAndReleased: a claim records its owner in the
// manifest and writes a heartbeat it renews every interval; a reader sees
// a live holder that contends with another process and not with itself;
// Close releases it; an orphan merge's claim writes none and never
// contends; a claim of a later epoch deletes earlier heartbeats.
func TestHeartbeatRenewedAndReleased(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	o := opts(store)
	o.Owner = &Owner{ID: "proc-a", Instance: "w", Host: "host-a", PID: 7}
	o.HeartbeatInterval, o.HeartbeatTTL, o.Clock = time.Second, 3*time.Second, clk
	w := claim(t, o)
	h := waitHeartbeat(t, store, 1)
	if h.Owner == nil || h.Owner.ID != "proc-a" || h.Epoch != 1 || !h.Heartbeat.RenewedAt.Equal(clk.Now()) || h.TTL(0) != 3*time.Second {
		t.Fatalf("holder after the claim: %+v %+v", h, h.Heartbeat)
	}
	if !h.Contends("proc-b") || h.Contends("proc-a") {
		t.Fatal("a live holder must contend with another process and not with itself")
	}
	first := h.Mark()
	if err := clk.WaitForWaiters(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	h = waitHeartbeat(t, store, 2)
	if h.Mark() == first || !h.LastSign().Equal(clk.Now()) {
		t.Fatalf("renewal not seen: %+v", h.Heartbeat)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if h = readHolder(t, store); h.Heartbeat == nil || !h.Heartbeat.Released || h.Contends("proc-b") {
		t.Fatalf("after Close: %+v", h.Heartbeat)
	}

	m := opts(store)
	m.Owner = &Owner{ID: "master", Merge: true}
	mw := claim(t, m)
	if h = readHolder(t, store); h.Owner == nil || !h.Owner.Merge || h.Heartbeat != nil || h.Contends("proc-a") || mw.Heartbeats() != 0 {
		t.Fatalf("orphan merge holder: %+v %+v", h.Owner, h.Heartbeat)
	}
	mw.Abandon()
	o.Owner = &Owner{ID: "proc-b"}
	w3 := claim(t, o)
	defer w3.Abandon()
	waitHeartbeat(t, store, 1)
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if _, err := store.Head(ctx, heartbeatKey("s1", 1)); errors.Is(err, objstore.ErrNotFound) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the heartbeat of epoch 1 was never swept")
		}
	}
}

// TestAbandonedWriterStopsHeartbeat: a writer that stops without Close (a
// crash) leaves its heartbeat unreleased and renews it no more.
func TestAbandonedWriterStopsHeartbeat(t *testing.T) {
	store := objstore.NewMemory()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	o := opts(store)
	o.Owner = &Owner{ID: "proc-a"}
	o.HeartbeatInterval, o.HeartbeatTTL, o.Clock = time.Second, 3*time.Second, clk
	w := claim(t, o)
	waitHeartbeat(t, store, 1)
	w.Abandon()
	clk.Advance(10 * time.Second)
	h := readHolder(t, store)
	if h.Heartbeat == nil || h.Heartbeat.Released || h.Heartbeat.Seq != 1 || !h.Contends("proc-b") {
		t.Fatalf("after a crash: %+v", h.Heartbeat)
	}
	if age := clk.Now().Sub(h.LastSign()); age < h.TTL(0) {
		t.Fatalf("age %s, want past the TTL %s", age, h.TTL(0))
	}
}

// TestClaimOnAStaleHolderReadsAgain: a claim given a Holder read before
// another claim committed builds its first attempt on a manifest that is
// no longer the latest; that commit fails, and the claim reads the latest
// and takes the epoch after it, fencing the writer that claimed between.
func TestClaimOnAStaleHolderReadsAgain(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	w1 := claim(t, opts(mem))
	defer w1.Abandon()
	h, err := ReadHolder(ctx, mem, "s1")
	if err != nil {
		t.Fatal(err)
	}
	w2 := claim(t, opts(mem)) // commits after the read
	defer w2.Abandon()
	o := opts(mem)
	o.Holder = h
	w3, err := Claim(ctx, o)
	if err != nil {
		t.Fatalf("claim on a stale holder: %v", err)
	}
	defer w3.Abandon()
	if w3.Epoch() != w2.Epoch()+1 {
		t.Fatalf("epoch %d after %d's claim; want %d", w3.Epoch(), w2.Epoch(), w2.Epoch()+1)
	}
	if err := appendIDs(t, w2, "late"); !errors.Is(err, ErrFenced) {
		t.Fatalf("append by the writer claimed over: %v; want ErrFenced", err)
	}
	if err := appendIDs(t, w3, "x"); err != nil {
		t.Fatal(err)
	}
}
