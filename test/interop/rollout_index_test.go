package interop

import (
	"context"
	"fmt"
	"testing"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// TestLanceDBUsesRolloutStoreIndexes: the indexes a store keeps through
// its merges (a first build, then a delta segment per merge) and its
// compaction are the ones LanceDB 0.31 plans id = '…' and rollout_id = '…'
// on, with the right answers, superseded rows included.
func TestLanceDBUsesRolloutStoreIndexes(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := rollout.NewCatalog(root, rollout.ShardID("interop"), rollout.Options{MergeMaxGenerations: 1})
	defer c.Close(ctx)
	s, err := c.Create(ctx, "ix")
	if err != nil {
		t.Fatal(err)
	}
	put := func(from, to int, version string) {
		var recs []rollout.Record
		for i := from; i < to; i++ {
			content := fmt.Sprintf("%s-%d", version, i)
			recs = append(recs, rollout.Record{ID: fmt.Sprintf("id-%04d", i), RolloutID: fmt.Sprintf("ro-%03d", i/5), ProblemID: "p", Content: &content})
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for {
			res, err := s.Merge(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Remaining == 0 {
				break
			}
		}
	}
	put(0, 500, "v1")
	put(500, 800, "v1")
	put(100, 110, "v2") // supersedes ten rows merged earlier
	base, err := table.Open(ctx, s.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"id", "rollout_id"} {
		segs, _ := index.BTreeIndexes(base, col)
		cov, _ := index.Covered(base, col)
		if len(segs) < 2 || int(cov.GetCardinality()) != len(base.Fragments()) {
			t.Fatalf("%s: %d segments covering %v of %d fragments; want deltas covering all", col, len(segs), cov, len(base.Fragments()))
		}
	}
	check := func(what string) {
		for _, id := range []string{"id-0000", "id-0105", "id-0799"} {
			doc := runNode(t, "check_index.mjs", dir, "ix.rollout", "--id", id)
			if num(t, doc, "count") != 1 || normalize(doc["uses_index"]) != true {
				t.Errorf("%s: LanceDB id = %s: count %v, uses index %v; want 1, true", what, id, doc["count"], doc["uses_index"])
			}
		}
		for _, ro := range []string{"ro-000", "ro-021", "ro-159"} {
			doc := runNode(t, "check_index.mjs", dir, "ix.rollout", "--column", "rollout_id", "--id", ro)
			if num(t, doc, "count") != 5 || normalize(doc["uses_index"]) != true {
				t.Errorf("%s: LanceDB rollout_id = %s: count %v, uses index %v; want 5, true", what, ro, doc["count"], doc["uses_index"])
			}
		}
		r, err := s.Get(ctx, "id-0105")
		if err != nil || *r.Content != "v2-105" {
			t.Errorf("%s: get id-0105: %v %v", what, r, err)
		}
	}
	check("after merges")
	if _, err := s.Compact(ctx, rollout.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}
