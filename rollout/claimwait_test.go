package rollout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// gatedStore holds every put-if-absent of a shard manifest while armed, as
// a slow object store holds a claim (a claim commits the next manifest
// version; before that it replays the WAL, which can take long).
type gatedStore struct {
	objstore.Store
	armed   atomic.Bool
	held    chan struct{} // closed when a put is held
	release chan struct{} // closed (once) to let it go
	once    sync.Once
}

func (g *gatedStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if g.armed.Load() && strings.Contains(key, "/manifest/") && g.armed.CompareAndSwap(true, false) {
		close(g.held)
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.PutIfAbsent(ctx, key, data)
}

// TestRegression_ReadsDoNotWaitForAClaim: a store's reads and statistics
// answer while its shard's claim is under way. They used to take the
// store's lock, which the claim holds to its end, so a worker replaying a
// long WAL at startup answered no read of that store until it was done.
func TestRegression_ReadsDoNotWaitForAClaim(t *testing.T) {
	ctx := context.Background()
	g := &gatedStore{Store: objstore.NewMemory(), held: make(chan struct{}), release: make(chan struct{})}
	first := mustStore(t, newCatalog(t, g, "w", quiet(Options{})), "claim")
	appendFlush(t, first, recs("a", 3, "r"))

	// A second process of the same shard: its first append claims.
	s := mustStore(t, newCatalog(t, g, "w", quiet(Options{})), "claim")
	g.armed.Store(true)
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, recs("b", 1, "r"))
		appended <- err
	}()
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the claim never committed its manifest")
	}

	// The reads run aside, so that a read stuck on the claim fails the test
	// at once instead of hanging it.
	t.Cleanup(func() {
		g.once.Do(func() { close(g.release) })
	})
	read := make(chan error, 1)
	go func() {
		res, err := s.List(ctx, ListOptions{Source: SourceAll, Limit: 10})
		if err == nil && len(res.Records) != 3 {
			err = fmt.Errorf("list: %d records, want 3", len(res.Records))
		}
		if err == nil {
			var st *Stats
			if st, err = s.Stats(ctx); err == nil && st.Rows != 3 {
				err = fmt.Errorf("stats: %d rows, want 3", st.Rows)
			}
		}
		if err == nil && s.UnflushedRows() != 0 {
			err = fmt.Errorf("unflushed rows: %d", s.UnflushedRows())
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("during the claim: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reads waited for the claim")
	}

	g.once.Do(func() { close(g.release) })
	if err := <-appended; err != nil {
		t.Fatalf("append after the claim: %v", err)
	}
}
