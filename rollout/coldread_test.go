package rollout

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// TestColdGetAndTrajectoryPreferPending: a process whose generation cache
// is cold looks ids up in the base while it reads the pending generations
// (get, trajectory); the newest write still wins: an id rewritten in a
// pending generation reads its pending row, an id moved to another rollout
// leaves the old trajectory, and base-only ids read from the base.
func TestColdGetAndTrajectoryPreferPending(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	const name = "cold"
	w := mustStore(t, newCatalog(t, mem, "w", quiet(Options{})), name)
	appendFlush(t, w, recs("b", 5, "t"))
	if _, err := w.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, w, []Record{
		{ID: "b-001", RolloutID: "t", SequenceOrder: 1, Content: ptr("rewritten")},
		{ID: "b-002", RolloutID: "u", Content: ptr("moved")},
	})
	if got := mustCounts(t, w); got != [3]int{5, 2, 5} {
		t.Fatalf("counts (fragments, wal, all) %v, want [5 2 5]", got)
	}
	for round := range 2 { // cold, then warm: the same answers
		// Cold: each read in a new process (a new store identity, a new
		// generation cache).
		store := func() *Store {
			if round == 1 {
				return w
			}
			return mustStore(t, newCatalog(t, objstore.NewCounting(mem, 0), "reader", quiet(Options{})), name)
		}
		s := store()
		r, err := s.Get(ctx, "b-001")
		if err != nil || r.Content == nil || *r.Content != "rewritten" {
			t.Fatalf("round %d: get b-001 = %+v, %v; want the pending row", round, r, err)
		}
		s = store()
		r, err = s.Get(ctx, "b-000")
		if err != nil || r.Content == nil || *r.Content != "text b" {
			t.Fatalf("round %d: get b-000 = %+v, %v; want the base row", round, r, err)
		}
		s = store()
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d: get of a missing id: %v, want ErrNotFound", round, err)
		}
		s = store()
		rs, err := s.Trajectory(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range rs {
			got[r.ID] = *r.Content
		}
		want := map[string]string{"b-000": "text b", "b-001": "rewritten", "b-003": "text b", "b-004": "text b"}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(rs) != len(want) {
			t.Errorf("round %d: trajectory t = %v, want %v", round, got, want)
		}
	}
}
