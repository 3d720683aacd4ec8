package wal

// The object log's fence (doc.go, "Fencing"): a writer acknowledges an
// entry on its put alone, and a claim fences deposed writers with an entry
// at their next position. These tests run the races of that argument: a
// claim landing before, during and after a deposed writer's put.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// getHookStore calls afterGet after each Get of a key, before returning.
type getHookStore struct {
	objstore.Store
	afterGet func(key string, err error)
}

func (h *getHookStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := h.Store.Get(ctx, key)
	h.afterGet(key, err)
	return b, err
}

// putHookStore calls afterPut after each PutIfAbsent, before returning.
type putHookStore struct {
	objstore.Store
	afterPut func(key string, err error)
}

func (h *putHookStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := h.Store.PutIfAbsent(ctx, key, data)
	h.afterPut(key, err)
	return err
}

// TestAppendIsOneRequest: on an object store an append costs its put and
// nothing else (no fence check). Background work (hints, the claim's
// sweep) is left out: it is not on the append's path.
func TestAppendIsOneRequest(t *testing.T) {
	counting := objstore.NewCounting(objstore.NewMemory(), 0)
	w := claim(t, opts(counting))
	defer w.Abandon()
	w.WaitCollect()
	for i := range 3 {
		before := counting.Counts()
		if err := appendIDs(t, w, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
		after := counting.Counts()
		d := func(op objstore.Op) int { return after.Calls[op] - before.Calls[op] }
		if d(objstore.OpPutIfAbsent) != 1 || d(objstore.OpHead) != 0 || d(objstore.OpGet) != 0 {
			t.Fatalf("append %d: %d put-if-absent, %d head, %d get; want the put alone",
				i, d(objstore.OpPutIfAbsent), d(objstore.OpHead), d(objstore.OpGet))
		}
	}
}

// TestClaimBetweenPutAndAck: a claim lands after a writer's put is durable
// and before the writer acknowledges. The acknowledgement is right: the
// claim's replay holds the entry. The writer's next put meets the fence.
func TestClaimBetweenPutAndAck(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	var b *Writer
	var once sync.Once
	hooked := &putHookStore{Store: store, afterPut: func(key string, err error) {
		if err == nil && strings.HasSuffix(key, fmt.Sprintf("/wal/%020d.arrow", 2)) {
			once.Do(func() { b = claim(t, opts(store)) })
		}
	}}
	a := claim(t, opts(hooked))
	defer a.Abandon()
	if err := appendIDs(t, a, "a1"); err != nil { // position 1
		t.Fatal(err)
	}
	if err := appendIDs(t, a, "a2"); err != nil { // position 2; b claims before the ack
		t.Fatalf("acknowledged entry refused: %v", err)
	}
	if b == nil {
		t.Fatal("the claim did not run")
	}
	defer b.Abandon()
	if err := appendIDs(t, a, "a3"); !errors.Is(err, ErrFenced) { // position 3: b's fence
		t.Fatalf("deposed writer's next append: %v, want ErrFenced", err)
	}
	if err := b.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	got := sealedIDs(t, store, "s1")
	if !slices.Contains(got, "a1") || !slices.Contains(got, "a2") || slices.Contains(got, "a3") {
		t.Fatalf("rows %v, want a1 and a2, not a3", got)
	}
}

// TestDeposedPutLandsBeforeFence: a deposed writer's put lands after the
// claim's replay found its position free and before the claim's fence
// entry. The writer acknowledges on its put; the claim's fence put finds
// the entry, adopts it, and fences the next position instead.
func TestDeposedPutLandsBeforeFence(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	a := claim(t, opts(store))
	defer a.Abandon()
	if err := appendIDs(t, a, "a1"); err != nil { // position 1
		t.Fatal(err)
	}
	var once sync.Once
	var raced error
	hooked := &getHookStore{Store: store, afterGet: func(key string, err error) {
		if errors.Is(err, objstore.ErrNotFound) && strings.HasSuffix(key, fmt.Sprintf("/wal/%020d.arrow", 2)) {
			// The claim's replay just found position 2 free.
			once.Do(func() { raced = appendIDs(t, a, "a2") })
		}
	}}
	b := claim(t, opts(hooked))
	defer b.Abandon()
	if raced != nil {
		t.Fatalf("the deposed writer's put before the fence entry: %v", raced)
	}
	if err := appendIDs(t, a, "a3"); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed writer's next append: %v, want ErrFenced", err)
	}
	if m := b.Manifest(); !slices.Contains(b.man.Fences, 3) {
		t.Fatalf("fence entry not at position 3 (manifest %+v, fences %v)", m, b.man.Fences)
	}
	if err := b.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	got := sealedIDs(t, store, "s1")
	if !slices.Contains(got, "a1") || !slices.Contains(got, "a2") || slices.Contains(got, "a3") {
		t.Fatalf("rows %v, want a1 and a2 (acknowledged), not a3", got)
	}
}

// TestReusedPositionIsFenceChecked: a writer's put lands but reports an
// error; a claim adopts the entry, seals it, and collects it and, with
// enough commits, the manifest versions after the writer's. The writer then
// finds its position free and puts a new entry there, on a name no replay
// will read. That put is not its own fence check: the writer looks for
// the next manifest version, the claim's, which collection never deletes.
func TestReusedPositionIsFenceChecked(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	var mu sync.Mutex
	faults := 0 // puts at position 2 to fail: the first lands, the rest do not
	f := objstore.NewFaulty(store, objstore.FaultConfig{})
	f.SetHook(func(op objstore.Op, key string, _ int) objstore.Fault {
		mu.Lock()
		defer mu.Unlock()
		if op != objstore.OpPutIfAbsent || !strings.HasSuffix(key, fmt.Sprintf("/wal/%020d.arrow", 2)) || faults == 0 {
			return objstore.FaultNone
		}
		faults--
		if faults == retryAttempts-1 {
			return objstore.FaultLostAck
		}
		return objstore.FaultError
	})
	a := claim(t, opts(f))
	defer a.Abandon()
	if err := appendIDs(t, a, "a1"); err != nil { // position 1
		t.Fatal(err)
	}
	mu.Lock()
	faults = retryAttempts
	mu.Unlock()
	if err := appendIDs(t, a, "lost"); err == nil { // lands at 2, reported failed
		t.Fatal("append acknowledged although every attempt failed")
	}

	b := claim(t, opts(store)) // adopts 2, fence at 3
	defer b.Abandon()
	claims := b.Manifest().Claims
	claimVersion := claims[len(claims)-1] // a's last version + 1
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		if err := appendIDs(t, b, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
		if err := b.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		b.WaitCollect()
		_, err2 := store.Head(ctx, entryKey("s1", 2))
		_, errV := store.Head(ctx, manifestKey("s1", claimVersion+1))
		if errors.Is(err2, objstore.ErrNotFound) && errors.Is(errV, objstore.ErrNotFound) {
			break // position 2 and the versions after the claim's are collected
		}
		if time.Now().After(deadline) {
			t.Fatalf("collection did not reach position 2 and version %d", claimVersion+1)
		}
		time.Sleep(50 * time.Millisecond) // let a hint be written
	}
	if _, err := store.Head(ctx, manifestKey("s1", claimVersion)); err != nil {
		t.Fatalf("claim version %d collected: %v", claimVersion, err)
	}
	if _, err := store.Head(ctx, entryKey("s1", 3)); err != nil {
		t.Fatalf("fence entry at 3 collected: %v", err)
	}

	// The deposed writer resolves position 2 (free), puts "zombie" there.
	if err := appendIDs(t, a, "zombie"); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed writer acknowledged a put on a collected position: %v", err)
	}
	b.Abandon()
	c := claim(t, opts(store))
	defer c.Abandon()
	got := sealedIDs(t, store, "s1")
	if !slices.Contains(got, "lost") || !slices.Contains(got, "b0") || slices.Contains(got, "zombie") {
		t.Fatalf("rows %v", got)
	}
}

// TestPendingResolvesToFence: a writer's put fails without landing; a claim
// puts its fence entry at that position, writes past it, seals and
// collects. The writer, resolving its position, finds the fence entry: it
// is fenced, rather than adopting it and putting its next entry on a
// collected name unchecked.
func TestPendingResolvesToFence(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	var mu sync.Mutex
	failing := false
	f := objstore.NewFaulty(store, objstore.FaultConfig{})
	f.SetHook(func(op objstore.Op, key string, _ int) objstore.Fault {
		mu.Lock()
		defer mu.Unlock()
		if failing && op == objstore.OpPutIfAbsent && strings.Contains(key, "/wal/") {
			return objstore.FaultError
		}
		return objstore.FaultNone
	})
	a := claim(t, opts(f))
	defer a.Abandon()
	if err := appendIDs(t, a, "a1"); err != nil { // position 1
		t.Fatal(err)
	}
	mu.Lock()
	failing = true
	mu.Unlock()
	if err := appendIDs(t, a, "failed"); err == nil { // position 2, never lands
		t.Fatal("append acknowledged although every put failed")
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	b := claim(t, opts(store)) // fence entry at 2
	defer b.Abandon()
	for i := range 3 { // positions 3, 4, 5, sealed and collected
		if err := appendIDs(t, b, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	b.WaitCollect()
	if _, err := store.Head(ctx, entryKey("s1", 3)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("position 3 not collected: %v", err)
	}
	if err := appendIDs(t, a, "zombie"); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed writer past the fence entry: %v, want ErrFenced", err)
	}
	b.Abandon()
	c := claim(t, opts(store))
	defer c.Abandon()
	if got := sealedIDs(t, store, "s1"); slices.Contains(got, "zombie") || slices.Contains(got, "failed") || !slices.Contains(got, "b2") {
		t.Fatalf("rows %v", got)
	}
}
