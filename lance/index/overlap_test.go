package index

import (
	"context"
	"errors"
	"testing"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
)

// ascendIDs walks every id of the id index of the latest version, in
// order, and fails the test when one comes twice.
func ascendIDs(t *testing.T, d *table.Dataset) int {
	t.Helper()
	seen := map[string]bool{}
	n := 0
	if _, err := NewFinder(0).Ascend(context.Background(), d, "id", "", func(v string, addr uint64) bool {
		if seen[v] {
			t.Errorf("the id walk gives %s twice (second at fragment %d offset %d)", v, addr>>32, uint32(addr))
			return false
		}
		seen[v] = true
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRegression_ConcurrentIndexBuildsCoverAFragmentOnce: two index
// builds prepared against one version (a merge's index and the build that
// follows a compaction, in the kill -9 suite) both covered the fragment
// the version left unindexed, and both committed: the id walk then gave
// every row of that fragment twice, so pages of "all" listed ids twice
// until a consolidation folded the segments. The second commit must fail
// as a conflict.
func TestRegression_ConcurrentIndexBuildsCoverAFragmentOnce(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 1000)
	if _, err := Update(ctx, st, "id", BuildOptions{Delta: true}); err != nil {
		t.Fatal(err)
	}
	appendRows(t, st, 1000, 2000) // unindexed
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var preps []*Prepared
	for range 2 {
		p, err := PrepareColumns(ctx, d, []string{"id"}, BuildOptions{Delta: true})
		if err != nil || len(p.Add) != 1 {
			t.Fatalf("prepare: %+v %v", p, err)
		}
		preps = append(preps, p)
	}
	commit := func(p *Prepared) error {
		_, err := table.Commit(ctx, st, func(context.Context, *table.Dataset) (*table.Change, error) {
			return &table.Change{Kind: table.KindCreateIndex, IndexAdd: p.Add, IndexRemove: p.Remove}, nil
		})
		return err
	}
	if err := commit(preps[0]); err != nil {
		t.Fatal(err)
	}
	if err := commit(preps[1]); !errors.Is(err, table.ErrConflict) {
		t.Fatalf("a second index over the fragment the first one covers committed (err %v); want a conflict", err)
	}
	latest, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if n := ascendIDs(t, latest); n != 2000 {
		t.Fatalf("the id walk gives %d ids, want 2000", n)
	}
}

// TestOverlappingIndexesAnswerEachFragmentOnce: two BTree indexes of
// other names on one column (a user's, made by LanceDB, beside ours) may
// both cover a fragment; readers take each fragment's rows from one of
// them, so a walk gives each row once.
func TestOverlappingIndexesAnswerEachFragmentOnce(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 1500)
	if _, err := Update(ctx, st, "id", BuildOptions{Delta: true}); err != nil {
		t.Fatal(err)
	}
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Build(ctx, d, "id", BuildOptions{Name: "users_id_index"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Commit(ctx, st, func(context.Context, *table.Dataset) (*table.Change, error) {
		return &table.Change{Kind: table.KindCreateIndex, IndexAdd: []*pb.IndexMetadata{other}}, nil
	}); err != nil {
		t.Fatalf("an index of another name over covered fragments: %v", err)
	}
	latest, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if segs, _ := BTreeIndexes(latest, "id"); len(segs) != 2 {
		t.Fatalf("%d BTree indexes on id, want 2", len(segs))
	}
	if n := ascendIDs(t, latest); n != 1500 {
		t.Fatalf("the id walk gives %d ids, want 1500", n)
	}
}

// TestUpdateAfterAConcurrentIndexBuildsAgain: an update whose commit
// conflicts with another build over the same fragment builds again against
// the new latest version instead of failing, and indexes what is left.
func TestUpdateAfterAConcurrentIndexBuildsAgain(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 1000)
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := PrepareColumns(ctx, d, []string{"id"}, BuildOptions{Delta: true})
	if err != nil || len(p.Add) != 1 {
		t.Fatalf("prepare: %+v %v", p, err)
	}
	appendRows(t, st, 1000, 1500)
	// Another writer's build commits between this update's build and
	// its commit.
	Failpoint = func(step string) {
		if step != "files-written" {
			return
		}
		Failpoint = nil
		if _, err := table.Commit(ctx, st, func(context.Context, *table.Dataset) (*table.Change, error) {
			return &table.Change{Kind: table.KindCreateIndex, IndexAdd: p.Add}, nil
		}); err != nil {
			t.Errorf("the other build's commit: %v", err)
		}
	}
	t.Cleanup(func() { Failpoint = nil })
	res, err := Update(ctx, st, "id", BuildOptions{Delta: true})
	if err != nil {
		t.Fatalf("update after a concurrent build: %v", err)
	}
	if !res.Built || res.NewRows != 500 {
		t.Fatalf("update: %+v, want the 500 rows the other build left", res)
	}
	latest, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if n := ascendIDs(t, latest); n != 1500 {
		t.Fatalf("the id walk gives %d ids, want 1500", n)
	}
}
