package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// TestSealInPlaceThroughTheCatalog: a store on local disk seals a memtable
// of large texts in place (its WAL segment becomes the generation file),
// and every row reads back from the tier and, after a merge, from the base.
func TestSealInPlaceThroughTheCatalog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := mustStore(t, newCatalog(t, root, "w", quiet(Options{})), "big")
	text := strings.Repeat("z", 4<<10)
	const n = 600
	for i := 0; i < n; i += 50 {
		batch := make([]Record, 50)
		for j := range batch {
			batch[j] = Record{ID: fmt.Sprintf("r%04d", i+j), RolloutID: "r", Content: ptr(fmt.Sprintf("%04d%s", i+j, text))}
		}
		if _, err := s.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inPlaceGenerations(t, dir); got != 1 {
		t.Fatalf("%d generations sealed in place, want 1", got)
	}
	check := func(src Source) {
		t.Helper()
		seen, err := idCounts(ctx, s, src, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != n {
			t.Fatalf("%s: %d ids, want %d", src, len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("%s: %s %d times", src, id, c)
			}
		}
	}
	check(SourceWAL)
	r, err := s.Get(ctx, "r0321")
	if err != nil || r.Content == nil || *r.Content != "0321"+text {
		t.Fatalf("get r0321: %v", err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	check(SourceFragments)
}
