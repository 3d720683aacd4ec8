package rollout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// TestRegression_DeleteFeedGroupNeverFallsBackToAnOlderPosition: a
// DeleteFeedGroup that fails part-way leaves the group at its newest
// position. The commits were deleted in listing order, which is newest
// first, so a failure on an older one left the group reading that older
// position (its consumers would read rows again).
func TestRegression_DeleteFeedGroupNeverFallsBackToAnOlderPosition(t *testing.T) {
	ctx := context.Background()
	f := objstore.NewFaulty(objstore.NewMemory(), objstore.FaultConfig{})
	s := mustStore(t, newCatalog(t, f, "w", Options{}), "feedd")
	for _, seq := range []int64{10, 20, 30} {
		var p Position
		p.advance(1, seq)
		if _, err := s.CommitFeed(ctx, "g", p); err != nil {
			t.Fatal(err)
		}
	}
	oldest := feedKey("g", 1)
	f.SetHook(objstore.FailKey(objstore.OpDelete, func(k string) bool { return strings.HasSuffix(k, oldest) }, objstore.FaultError))
	if err := s.DeleteFeedGroup(ctx, "g"); err == nil {
		t.Fatal("DeleteFeedGroup succeeded with a delete failing")
	}
	got, err := s.FeedGroupPosition(ctx, "g")
	if err != nil || got.After(1) != 30 {
		t.Fatalf("position after a failed delete: %v (err %v), want the newest (30)", got, err)
	}
	f.SetHook(nil)
	if err := s.DeleteFeedGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.FeedGroupPosition(ctx, "g"); err != nil || got.After(1) != 0 {
		t.Fatalf("position after the delete: %v (err %v), want the beginning", got, err)
	}
}

// TestCleanupReadsEachManifestOnce: a cleanup that collects payload
// objects reads each kept version's manifest once (table.Cleanup's read,
// handed on), where collectBlobs checked every version out again.
func TestCleanupReadsEachManifestOnce(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	reads := map[string]int{}
	f := objstore.NewFaulty(objstore.NewMemory(), objstore.FaultConfig{Hook: func(op objstore.Op, key string, _ int) objstore.Fault {
		if op == objstore.OpGet && strings.Contains(key, "_versions/") {
			mu.Lock()
			reads[key]++
			mu.Unlock()
		}
		return objstore.FaultPass
	}})
	s := mustStore(t, newCatalog(t, f, "w", Options{IndexColumns: []string{}}), "once")
	const versions = 5
	for i := range versions {
		appendFlush(t, s, recs(fmt.Sprintf("r%d", i), 2, "m"))
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	writeBlob(t, s, 1<<10, 1) // an orphan: the collection runs
	mu.Lock()
	clear(reads)
	mu.Unlock()
	keep, zero := time.Hour, time.Duration(0)
	res, err := s.Cleanup(ctx, CleanupOptions{ReadGrace: &keep, BlobGrace: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsRemoved != 1 || res.VersionsKept < versions {
		t.Fatalf("cleanup: %d blobs removed, %d versions kept; want 1 and at least %d", res.BlobsRemoved, res.VersionsKept, versions)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range reads {
		total += n
	}
	// The latest may be read once more, by the cleanup's Open.
	if len(reads) < versions || total > len(reads)+1 {
		t.Fatalf("%d manifest reads of %d manifests, want each read once (the latest twice at most): %v", total, len(reads), reads)
	}
}
