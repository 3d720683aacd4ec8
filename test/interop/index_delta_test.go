package interop

import (
	"context"
	"testing"

	"github.com/lance-context/lance-context/lance/index"
)

// TestLanceDBReadsGoDeltaSegments: an index brought up to date by delta
// segments (one per batch of new fragments, as each merge does) is one
// index with several segments to LanceDB, which answers lookups in every
// segment and in the fragments none covers.
func TestLanceDBReadsGoDeltaSegments(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := localStore(t, dir, "dx")
	createTable(t, st, ixSchema)
	ixAppend(t, st, 0, 6000)
	if _, err := index.Update(ctx, st, "id", index.BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	ixAppend(t, st, 6000, 7000)
	if r, err := index.Update(ctx, st, "id", index.BuildOptions{Delta: true}); err != nil || !r.Built {
		t.Fatal(r, err)
	}
	ixAppend(t, st, 7000, 8000)
	if r, err := index.Update(ctx, st, "id", index.BuildOptions{Delta: true}); err != nil || !r.Built {
		t.Fatal(r, err)
	}
	ixAppend(t, st, 8000, 8100)
	for _, i := range []int{5, 6500, 7500, 8050} {
		lanceDBLookup(t, dir, "dx", "id", ixID(i), []string{ixID(i)})
	}
	doc := runNode(t, "check_index.mjs", dir, "dx", "--id", ixID(6500))
	stats, _ := normalize(doc["index_stats"]).(map[string]any)
	s, _ := stats["id_idx"].(map[string]any)
	if s["numIndices"] != int64(3) || s["numIndexedRows"] != int64(8000) || s["numUnindexedRows"] != int64(100) {
		t.Errorf("LanceDB stats %s; want 3 segments, 8000 indexed and 100 unindexed rows", brief(s))
	}
	// Consolidated into one segment again.
	if r, err := index.Update(ctx, st, "id", index.BuildOptions{}); err != nil || r.Replaced != 3 {
		t.Fatal(r, err)
	}
	for _, i := range []int{5, 6500, 8050} {
		lanceDBLookup(t, dir, "dx", "id", ixID(i), []string{ixID(i)})
	}
	d := openTable(t, st)
	if idxs, _ := index.BTreeIndexes(d, "id"); len(idxs) != 1 {
		t.Errorf("%d segments after consolidation, want 1", len(idxs))
	}
}
