package interop

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// TestLanceDBReadsRolloutBaseAfterMergesAndCompaction: LanceDB opens a
// store's base table after several merges (one with a superseding write of
// an id) and a compaction, and sees exactly the merged rows: not the
// pending WAL tail, no duplicates.
func TestLanceDBReadsRolloutBaseAfterMergesAndCompaction(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := rollout.NewCatalog(root, rollout.ShardID("interop"), rollout.Options{MergeMaxGenerations: 2})
	defer c.Close(ctx)
	s, err := c.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	var merged []string
	add := func(ids ...string) {
		recs := make([]rollout.Record, len(ids))
		for i, id := range ids {
			content := "v-" + id
			recs[i] = rollout.Record{ID: id, RolloutID: "r", Content: &content, BinaryPayload: []byte(id)}
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for g := 0; g < 5; g++ {
		var ids []string
		for i := 0; i < 4; i++ {
			ids = append(ids, fmt.Sprintf("g%d-%d", g, i))
		}
		add(ids...)
		merged = append(merged, ids...)
	}
	add("g0-0") // a newer write of an id already in an earlier generation
	for {
		res, err := s.Merge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Remaining == 0 {
			break
		}
	}
	if _, err := s.Compact(ctx, rollout.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	add("pending-1", "pending-2") // sealed but not merged: not in the base
	sort.Strings(merged)

	out := runNode(t, "dump.mjs", dir, "exp.rollout", "--columns", "id,content", "--order-by-col", "id")
	var got []string
	for _, r := range out["rows"].([]any) {
		got = append(got, r.(map[string]any)["id"].(string))
	}
	if !slices.Equal(got, merged) {
		t.Fatalf("LanceDB sees %d ids %v, want the %d merged ids", len(got), got, len(merged))
	}
	if n := num(t, out, "count"); n != int64(len(merged)) {
		t.Fatalf("LanceDB count %d, want %d", n, len(merged))
	}
	if frags := num(t, out, "fragments"); frags != 1 {
		t.Fatalf("after compaction LanceDB sees %d fragments", frags)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.BaseRows != int64(len(merged)) || st.PendingRows != 2 {
		t.Fatalf("stats %+v %v", st, err)
	}
}
