package master_test

import (
	"context"
	"testing"
	"time"

	"github.com/lance-context/lance-context/master"
)

// TestExperimentMergeLag: the master's statistics carry merge_lag_seconds,
// in the single read and in the list; cached figures age with the clock (the
// lag is the store's figure at the refresh plus the time since), and a store
// with nothing pending reports 0.
func TestExperimentMergeLag(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour}})
	st := f.create(f.catalog("w1"), "exp")
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp?fresh=true", "", 200); x.MergeLagSeconds != 0 {
		t.Fatalf("empty store: merge lag %v, want 0", x.MergeLagSeconds)
	}
	appendFlush(t, st, recs("a", 3, "ro"))
	first := call[master.Experiment](f, "GET", "/api/v1/experiments/exp?fresh=true", "", 200)
	if first.PendingGenerations != 1 || first.MergeLagSeconds <= 0 || len(first.Shards) != 1 || first.Shards[0].OldestPendingAt == nil {
		t.Fatalf("one pending generation: %+v", first)
	}
	time.Sleep(50 * time.Millisecond)
	cached := call[master.Experiment](f, "GET", "/api/v1/experiments/exp", "", 200)
	if cached.MergeLagSeconds < first.MergeLagSeconds+0.04 {
		t.Fatalf("cached lag %v did not age from %v", cached.MergeLagSeconds, first.MergeLagSeconds)
	}
	if p := call[listPage](f, "GET", "/api/v1/experiments", "", 200); len(p.Experiments) != 1 || p.Experiments[0].MergeLagSeconds <= 0 {
		t.Fatalf("list %+v, want the merge lag", p)
	}
	if _, err := st.Merge(context.Background()); err != nil {
		t.Fatal(err)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp?fresh=true", "", 200); x.PendingGenerations != 0 || x.MergeLagSeconds != 0 {
		t.Fatalf("after the merge %+v, want no lag", x)
	}
}
