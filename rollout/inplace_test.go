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

// TestSealInPlaceRewritesAndMerges: rounds of appends that rewrite ids of
// earlier rounds, each sealed in place, merged after every other round:
// every id reads back (get, and a page of the base after the last merge)
// with its newest text, once.
func TestSealInPlaceRewritesAndMerges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := mustStore(t, newCatalog(t, root, "w", quiet(Options{})), "rw")
	pad := strings.Repeat("t", 3<<10)
	newest := map[string]string{}
	inPlace := 0
	for round := range 4 {
		for i := 0; i < 400; i += 40 {
			batch := make([]Record, 40)
			for j := range batch {
				// Half of each round rewrites ids of the round before.
				n := i + j + round*200
				id := fmt.Sprintf("r%05d", n)
				text := fmt.Sprintf("%d/%s/%s", round, id, pad)
				batch[j] = Record{ID: id, RolloutID: fmt.Sprintf("t%d", n%7), Content: ptr(text)}
				newest[id] = text
			}
			if _, err := s.Append(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		inPlace = max(inPlace, inPlaceGenerations(t, dir))
		if round%2 == 1 {
			if _, err := s.Merge(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if inPlace == 0 {
		t.Fatal("no generation was sealed in place")
	}
	for id, text := range newest {
		r, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if r.Content == nil || *r.Content != text {
			t.Fatalf("get %s: not its newest text", id)
		}
	}
	seen, err := idCounts(ctx, s, SourceFragments, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(newest) {
		t.Fatalf("base holds %d ids, want %d", len(seen), len(newest))
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("%s %d times in the base", id, c)
		}
	}
}
