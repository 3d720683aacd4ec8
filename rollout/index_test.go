package rollout

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// indexModel is what every key lookup must return: the newest content of
// each id, and the ids of each rollout and problem.
type indexModel struct {
	content map[string]string
	rollout map[string]string
	problem map[string]string
}

func (m *indexModel) put(r Record) {
	m.content[r.ID], m.rollout[r.ID], m.problem[r.ID] = *r.Content, r.RolloutID, r.ProblemID
}

func (m *indexModel) idsWhere(col map[string]string, v string) []string {
	var out []string
	for id, x := range col {
		if x == v {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// checkLookups compares get, trajectory and filtered lists with the model,
// through a store with indexes and one reading the same table without.
func checkLookups(t *testing.T, what string, s, plain *Store, m *indexModel, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, 0, len(m.content))
	for id := range m.content {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for k := 0; k < 25; k++ {
		id := ids[rng.Intn(len(ids))]
		for _, st := range []*Store{s, plain} {
			r, err := st.Get(ctx, id)
			if err != nil || r.Content == nil || *r.Content != m.content[id] {
				t.Fatalf("%s: get %s: %+v %v; want content %q", what, id, r, err, m.content[id])
			}
		}
		rid := m.rollout[id]
		tr, err := s.Trajectory(ctx, rid)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range tr {
			got = append(got, r.ID)
			if *r.Content != m.content[r.ID] {
				t.Fatalf("%s: trajectory %s: %s has %q, want %q", what, rid, r.ID, *r.Content, m.content[r.ID])
			}
		}
		slices.Sort(got)
		if want := m.idsWhere(m.rollout, rid); !slices.Equal(got, want) {
			t.Fatalf("%s: trajectory %s: %v, want %v", what, rid, got, want)
		}
		pid := m.problem[id]
		for _, src := range []Source{SourceAll, SourceFragments} {
			got := listIDs(t, s, ListOptions{Source: src, Filters: []Filter{{ColProblemID, pid}}, Limit: 1000})
			want := listIDs(t, plain, ListOptions{Source: src, Filters: []Filter{{ColProblemID, pid}}, Limit: 1000})
			if !slices.Equal(got, want) {
				t.Fatalf("%s: list %s problem_id=%s: indexed %v, plain %v", what, src, pid, got, want)
			}
		}
	}
	if _, err := s.Get(ctx, "no-such-id"); err == nil {
		t.Fatalf("%s: get of a missing id succeeded", what)
	}
}

// TestIndexesAgreeWithScansThroughMergesAndCompaction: superseding writes,
// merges (each adds a delta segment), a LanceDB-style deletion, compaction
// and the index task; every key lookup through the indexes agrees with the
// model and with a store that scans, and the indexes really cover the base.
func TestIndexesAgreeWithScansThroughMergesAndCompaction(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	s := mustStore(t, newCatalog(t, root, "w", Options{MergeMaxGenerations: 1}), "ix")
	plain := mustStore(t, newCatalog(t, root, "reader", Options{IndexColumns: []string{}}), "ix")
	m := &indexModel{map[string]string{}, map[string]string{}, map[string]string{}}
	rng := rand.New(rand.NewSource(11))
	ver := 0
	for round := 0; round < 6; round++ {
		var batch []Record
		for i := 0; i < 300; i++ {
			n := rng.Intn(1200) // about a quarter of the ids are rewritten
			ver++
			r := Record{ID: fmt.Sprintf("id-%05d", n), RolloutID: fmt.Sprintf("ro-%03d", n/10),
				ProblemID: fmt.Sprintf("p-%02d", n%37), Content: ptr(fmt.Sprintf("v%d", ver))}
			batch = append(batch, r)
		}
		// Within one append the last write of an id wins, as in the model.
		appendFlush(t, s, batch)
		for _, r := range batch {
			m.put(r)
		}
		if round%2 == 1 {
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
		checkLookups(t, fmt.Sprintf("round %d", round), s, plain, m, rng)
	}
	base, err := table.Open(ctx, s.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range DefaultIndexColumns {
		cov, err := index.Covered(base, col)
		if err != nil || int(cov.GetCardinality()) != len(base.Fragments()) {
			t.Fatalf("after merges the %s index covers %v of %d fragments (%v)", col, cov, len(base.Fragments()), err)
		}
		if segs, _ := index.BTreeIndexes(base, col); len(segs) < 2 {
			t.Fatalf("merges left %d segments on %s, want a delta per merge", len(segs), col)
		}
	}
	// A deletion made by another writer (LanceDB) is honoured.
	var victim string
	for id := range m.content {
		victim = id
		break
	}
	var addrs []table.RowAddr
	err = base.Scan(ctx, table.ScanOptions{Columns: []string{ColID}, Where: []table.Eq{{Column: ColID, Value: victim}}, WithRowAddr: true}, func(b arrow.RecordBatch) error {
		addrs = append(addrs, table.RowAddr{Fragment: b.Column(1).(*array.Uint64).Value(0) >> 32, Offset: uint32(b.Column(1).(*array.Uint64).Value(0))})
		return nil
	})
	if err != nil || len(addrs) != 1 {
		t.Fatalf("find %s: %v %v", victim, addrs, err)
	}
	if _, err := table.DeleteRows(ctx, s.Root(), addrs, "id = '"+victim+"'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, victim); err == nil {
		t.Fatalf("get %s after its deletion succeeded", victim)
	}
	delete(m.content, victim)
	delete(m.rollout, victim)
	delete(m.problem, victim)

	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	checkLookups(t, "compacted", s, plain, m, rng)
	base, _ = table.Open(ctx, s.Root())
	for _, col := range DefaultIndexColumns {
		segs, _ := index.BTreeIndexes(base, col)
		cov, _ := index.Covered(base, col)
		if len(segs) != 1 || int(cov.GetCardinality()) != len(base.Fragments()) {
			t.Fatalf("after compaction %s has %d segments covering %v of %d fragments; want 1 covering all", col, len(segs), cov, len(base.Fragments()))
		}
	}
	if res, err := s.Index(ctx); err != nil || len(res.Columns) != 3 || res.Columns[0].Built {
		t.Fatalf("index task on an up-to-date store: %+v %v", res, err)
	}
}

func TestParseIndexColumns(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{"", DefaultIndexColumns, false},
		{"none", []string{}, false},
		{"id, rollout_id", []string{"id", "rollout_id"}, false},
		{"id,nope", nil, true},
		{"reward", nil, true}, // not a string column
	} {
		got, err := ParseIndexColumns(c.in)
		if (err != nil) != c.bad || (!c.bad && !slices.Equal(got, c.want)) {
			t.Errorf("ParseIndexColumns(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

// TestTakeRowsMatchesTake: the take a listing page uses (one decode per
// column and fragment, rows put in order after) returns what the per-run
// take returns, for every list column, lists of structs, nulls, empty
// lists, rows of several fragments, repeated and adjacent rows, rows in
// address order.
func TestTakeRowsMatchesTake(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w1", Options{}), "exp")
	rng := rand.New(rand.NewSource(11))
	str := func(p string) *string { v := fmt.Sprintf("%s-%d", p, rng.Intn(1000)); return &v }
	f32 := func() *float32 { v := rng.Float32(); return &v }
	for round := range 3 {
		rs := make([]Record, 60)
		for i := range rs {
			r := Record{ID: fmt.Sprintf("id-%03d-%d", i, round), RolloutID: fmt.Sprintf("r%d", i%7)}
			if rng.Intn(3) > 0 {
				r.Content, r.Reward, r.PolicyVersion = str("c"), f32(), str("v")
				r.InputTokens = make([]int32, rng.Intn(5))
				r.OutputLogprobs = make([]float32, rng.Intn(4))
				r.LossMask = []int8{1, 0}
				for range rng.Intn(3) {
					r.Relationships = append(r.Relationships, Relationship{TargetID: str("t"), Weight: f32()})
				}
			}
			rs[i] = r
		}
		appendFlush(t, s, rs)
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.snapshot(ctx, false, planList(ListOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	cols := baseColumns(snap.base, listColumns)
	for trial := range 20 {
		var addrs []table.RowAddr
		for range 1 + rng.Intn(30) {
			f := snap.base.Fragments()[rng.Intn(len(snap.base.Fragments()))]
			addrs = append(addrs, table.RowAddr{Fragment: f.GetId(), Offset: uint32(rng.Intn(int(f.GetPhysicalRows())))})
		}
		switch trial % 3 {
		case 0:
			addrs = append(addrs, addrs[0]) // a row twice
		case 1:
			// In address order, each once: TakeRows does not reorder.
			slices.SortFunc(addrs, func(a, b table.RowAddr) int {
				return cmp.Or(cmp.Compare(a.Fragment, b.Fragment), cmp.Compare(a.Offset, b.Offset))
			})
			addrs = slices.Compact(addrs)
		}
		want, err := snap.base.TakePlain(ctx, addrs, cols)
		if err != nil {
			t.Fatal(err)
		}
		got, err := snap.base.TakeRows(ctx, addrs, cols)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, want) {
			t.Fatalf("trial %d: TakeRows\n%v\nTakePlain\n%v", trial, got, want)
		}
		got.Release()
		want.Release()
	}
}
