package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// TestReadsSeeOtherProcessCommits: a reader process holding warm caches
// (manifests, shard manifests, file readers) sees every commit another
// process finished before its read began: the staleness bound of the read
// path is zero (snapshot.go). The writer seals a generation per record and
// merges every few records (new base versions, shard manifests drained
// while the reader reads); the reader checks each read against what the
// writer had acknowledged before it started.
func TestReadsSeeOtherProcessCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("concurrent writer and reader")
	}
	ctx := context.Background()
	mem := objstore.NewMemory()
	// Separate wrappers are separate store identities, as two processes.
	w := mustStore(t, newCatalog(t, objstore.NewCounting(mem, 0), "writer", quiet(Options{})), "st")
	r := mustStore(t, newCatalog(t, objstore.NewCounting(mem, 0), "reader", quiet(Options{})), "st")
	const n = 60
	var done atomic.Int64 // records 0..done-1 are flushed (readable)
	done.Store(0)
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range n {
			if _, err := w.Append(ctx, []Record{{ID: fmt.Sprintf("k%03d", k), RolloutID: "t", Content: ptr("x")}}); err != nil {
				werr = err
				return
			}
			if err := w.Flush(ctx); err != nil {
				werr = err
				return
			}
			done.Store(int64(k + 1))
			if k%7 == 6 {
				if _, err := w.Merge(ctx); err != nil {
					werr = err
					return
				}
			}
		}
	}()
	reads := 0
	for {
		before := done.Load()
		if before > 0 {
			last := fmt.Sprintf("k%03d", before-1)
			rec, err := r.Get(ctx, last)
			if err != nil {
				t.Fatalf("get %s after its flush was acknowledged: %v", last, err)
			}
			if rec.ID != last {
				t.Fatalf("get %s returned %s", last, rec.ID)
			}
			st, err := r.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Rows < before {
				t.Fatalf("stats: %d rows, but %d were flushed before the read began (base %d, pending %d)", st.Rows, before, st.BaseRows, st.PendingRows)
			}
			res, err := r.List(ctx, ListOptions{Source: SourceAll, Limit: n + 10})
			if err != nil && !errors.Is(err, ErrOverloaded) {
				t.Fatal(err)
			}
			if err == nil && int64(len(res.Records)) < before {
				t.Fatalf("list all: %d records, but %d were flushed before the read began", len(res.Records), before)
			}
			reads++
		}
		if before == n {
			break
		}
		if werr != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	// After the last commit the reader sees the final state at once.
	if _, err := w.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	wst, err := w.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rst, err := r.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rst.Version != wst.Version || rst.Rows != wst.Rows || rst.PendingGenerations != wst.PendingGenerations {
		t.Fatalf("reader stats %+v, writer %+v: the reader missed the last commit", rst, wst)
	}
	t.Logf("%d checked reads while the writer committed", reads)
}

// gateStore holds back listings of shard manifests while armed, until gate
// is closed.
type gateStore struct {
	objstore.Store
	armed atomic.Bool
	gate  chan struct{}
}

func (g *gateStore) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if g.armed.Load() && strings.Contains(prefix, "/manifest/") {
		<-g.gate
	}
	return g.Store.List(ctx, prefix)
}

// TestSnapshotRereadsBaseAfterDrain: a snapshot reads the base and the
// shard manifests in one wave. When a merge commits and drains the shard
// between the base read and the manifest read, the drained generations are
// in neither; the snapshot must notice (the base's watermark is below what
// the manifest dropped) and read the base again.
func TestSnapshotRereadsBaseAfterDrain(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	w := mustStore(t, newCatalog(t, mem, "writer", quiet(Options{})), "st")
	g := &gateStore{Store: mem, gate: make(chan struct{})}
	r := mustStore(t, newCatalog(t, g, "reader", quiet(Options{})), "st")
	for i := range 3 {
		appendFlush(t, w, recs(fmt.Sprintf("g%d", i), 10, "t"))
	}
	if st, err := r.Stats(ctx); err != nil || st.Rows != 30 || st.PendingGenerations != 3 {
		t.Fatalf("warm-up stats %+v %v", st, err) // the reader now knows the shard
	}
	g.armed.Store(true)
	type res struct {
		st  *Stats
		err error
	}
	done := make(chan res, 1)
	go func() {
		st, err := r.Stats(ctx)
		done <- res{st, err}
	}()
	time.Sleep(100 * time.Millisecond) // the reader's base listing is answered
	if _, err := w.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := w.Stats(ctx); err != nil || st.PendingGenerations != 0 || st.BaseRows != 30 {
		t.Fatalf("the merge did not fold and drain everything: %+v %v", st, err)
	}
	close(g.gate)
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.st.Rows != 30 {
		t.Fatalf("stats across a merge: %d rows (base %d, pending %d), want 30", got.st.Rows, got.st.BaseRows, got.st.PendingRows)
	}
}
