package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// TestIdleStoresCloseAndReopen: the maintainer closes the stores unused
// for IdleClose, and the least recently used past MaxOpenStores, but never
// one a caller holds, one with unsealed rows or unmerged generations of
// its own, one being merged or one with a checkout pin; a closed store
// reopens on the next Open with everything it had.
func TestIdleStoresCloseAndReopen(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	clock := &fakeClock{t: time.Now()}
	c.now = clock.now
	m := NewMaintainer(c, MaintainPolicy{IdleClose: 10 * time.Minute}, MaintainEvents{}, nil)
	for i := range 6 {
		s := mustStore(t, c, fmt.Sprintf("s%d", i))
		appendFlush(t, s, recs(fmt.Sprintf("s%d", i), 3, "r"))
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	open := func() []string {
		var out []string
		for _, s := range c.Opened() {
			out = append(out, s.Name())
		}
		return out
	}
	// s0: held by a request still running.
	reqCtx, endRequest := context.WithCancel(ctx)
	if _, err := c.Open(reqCtx, "s0"); err != nil {
		t.Fatal(err)
	}
	// s1: rows acknowledged, not sealed.
	s1, _ := c.Open(ctx, "s1")
	if _, err := s1.Append(ctx, recs("late", 1, "r")); err != nil {
		t.Fatal(err)
	}
	// s2: a generation of its own not merged.
	s2, _ := c.Open(ctx, "s2")
	appendFlush(t, s2, recs("pending", 1, "r"))
	// s3: pinned by a checkout.
	s3, _ := c.Open(ctx, "s3")
	latest3 := s3.Version()
	if _, err := s3.Checkout(ctx, 1); err != nil || s3.Pinned() != 1 {
		t.Fatalf("pin: %v, pinned %d", err, s3.Pinned())
	}
	// s4: a merge running here.
	m.mu.Lock()
	m.merging["s4"] = true
	m.mu.Unlock()

	if closed := m.CloseIdle(ctx); len(closed) != 0 {
		t.Fatalf("closed %v before any store was idle", closed)
	}
	clock.advance(11 * time.Minute)
	if closed := m.CloseIdle(ctx); !slices.Equal(closed, []string{"s5"}) {
		t.Fatalf("closed %v, want only s5 (the rest are held, unsealed, unmerged, pinned or merging)", closed)
	}
	if got := open(); !slices.Equal(got, []string{"s0", "s1", "s2", "s3", "s4"}) {
		t.Fatalf("open %v", got)
	}
	// Each obstacle gone, its store closes.
	endRequest()
	if err := s1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{s1, s2} {
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s3.Checkout(ctx, latest3); err != nil || s3.Pinned() != 0 {
		t.Fatalf("unpin: %v", err)
	}
	m.mu.Lock()
	delete(m.merging, "s4")
	m.mu.Unlock()
	clock.advance(11 * time.Minute)
	if closed := m.CloseIdle(ctx); len(closed) != 5 || len(open()) != 0 {
		t.Fatalf("closed %v, open %v", closed, open())
	}
	// Reopened, each reads what it had and takes appends again.
	for i, want := range []int{3, 4, 4, 3, 3, 3} {
		s, err := c.Open(ctx, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.List(ctx, ListOptions{Source: SourceAll, Limit: 100})
		if err != nil || len(res.Records) != want {
			t.Fatalf("s%d reopened: %d rows (want %d), %v", i, len(res.Records), want, err)
		}
	}
	appendFlush(t, mustStore(t, c, "s5"), recs("again", 1, "r"))
}

// TestMaxOpenStoresClosesTheLeastRecentlyUsed: past MaxOpenStores the
// least recently used quiescent stores close, the newest stay.
func TestMaxOpenStoresClosesTheLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	clock := &fakeClock{t: time.Now()}
	c.now = clock.now
	m := NewMaintainer(c, MaintainPolicy{MaxOpenStores: 3}, MaintainEvents{}, nil)
	for i := range 5 {
		mustStore(t, c, fmt.Sprintf("s%d", i))
		clock.advance(time.Second)
	}
	if _, err := c.Open(ctx, "s0"); err != nil { // s0 used again: now the newest
		t.Fatal(err)
	}
	if closed := m.CloseIdle(ctx); !slices.Equal(closed, []string{"s1", "s2"}) {
		t.Fatalf("closed %v, want s1 and s2", closed)
	}
}
