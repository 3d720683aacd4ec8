package wal

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/objstore"
)

// write is one write of a key in the tests below: its value says which.
type write struct {
	id string
	v  int64
}

func batchOf(ws ...write) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rowSchema)
	defer b.Release()
	for _, w := range ws {
		b.Field(0).(*array.StringBuilder).Append(w.id)
		b.Field(1).(*array.Int64Builder).Append(w.v)
	}
	return b.NewRecordBatch()
}

// sealGen writes one generation of shard from batches, sealed at the
// given time.
func sealGen(t *testing.T, store objstore.Store, shard string, gen uint64, at time.Time, batches ...[]write) GenRef {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, ws := range batches {
		recs = append(recs, batchOf(ws...))
	}
	g, err := writeGeneration(context.Background(), store, shard, gen, genColumns{key: "id"}, memtable{batches: recs}, nil)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		t.Fatal(err)
	}
	g.SealedAt = at
	return GenRef{Shard: shard, Gen: g}
}

func loadAll(t *testing.T, store objstore.Store, refs []GenRef) []*LoadedGeneration {
	t.Helper()
	out := make([]*LoadedGeneration, len(refs))
	for i, ref := range refs {
		g, err := LoadGeneration(context.Background(), store, ref, ReadOptions{KeyColumn: "id"})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = g
	}
	return out
}

func value(g *LoadedGeneration, row int) int64 {
	return g.Rec.Column(1).(*array.Int64).Value(row)
}

func refNames(refs []GenRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s/%d", r.Shard, r.Gen.Generation))
	}
	return out
}

// TestNewestFirstOrder: across shards the seal time orders generations
// (at equal times the shard listed later first); within a shard the
// number does, even when the clock stepped back between two seals.
func TestNewestFirstOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ref := func(shard string, gen uint64, sec int) GenRef {
		return GenRef{Shard: shard, Gen: Generation{Generation: gen, SealedAt: at(sec)}}
	}
	refs := []GenRef{
		ref("a", 1, 10), ref("a", 2, 5), ref("a", 3, 30), // a's clock stepped back at 2
		ref("b", 7, 20), ref("b", 8, 30),
	}
	got := refNames(NewestFirst(refs))
	want := []string{"b/8", "a/3", "b/7", "a/2", "a/1"}
	if !slices.Equal(got, want) {
		t.Fatalf("NewestFirst = %v, want %v", got, want)
	}
}

// TestNewestRowsAndFindNewestAgree: the winners of a list (NewestRows) and
// of a point lookup (FindNewest) are the same write for every key, and the
// newest one: a later row beats an earlier one in a memtable (seal), a
// later generation an earlier one, a later seal in another shard an
// earlier one.
func TestNewestRowsAndFindNewestAgree(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	refs := []GenRef{
		// shard a: x written twice in one memtable (two batches), y once.
		sealGen(t, store, "a", 1, t0, []write{{"x", 1}, {"y", 2}}, []write{{"x", 3}, {"x", 4}}),
		sealGen(t, store, "a", 2, t0.Add(2*time.Second), []write{{"y", 5}, {"z", 6}}),
		// shard b sealed between a's two generations.
		sealGen(t, store, "b", 1, t0.Add(time.Second), []write{{"x", 7}, {"y", 8}, {"w", 9}}),
	}
	want := map[string]int64{"x": 7, "y": 5, "z": 6, "w": 9}
	if n := refs[0].Gen.Rows; n != 2 {
		t.Fatalf("the seal kept %d rows of a/1, want 2 (x's newest, y)", n)
	}
	gens := loadAll(t, store, refs)
	rows, keys := NewestRows(gens)
	got := map[string]int64{}
	for _, r := range rows {
		if _, dup := got[r.Key()]; dup {
			t.Fatalf("key %s listed twice", r.Key())
		}
		got[r.Key()] = value(r.Gen, r.Row)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(keys) != len(want) {
		t.Fatalf("NewestRows = %v (keys %v), want %v", got, keys, want)
	}
	// Oldest generation first, rows in order: b/1 (x, w), then a/2 (y, z).
	var order []string
	for _, r := range rows {
		order = append(order, r.Key())
	}
	if !slices.Equal(order, []string{"x", "w", "y", "z"}) {
		t.Fatalf("NewestRows order %v", order)
	}
	var loads atomic.Int64
	load := func(_ context.Context, ref GenRef) (*LoadedGeneration, error) {
		loads.Add(1)
		for _, g := range gens {
			if g.Ref == ref {
				return g, nil
			}
		}
		return nil, fmt.Errorf("no generation %v", ref)
	}
	for id, v := range want {
		r, ok, err := FindNewest(ctx, refs, id, load)
		if err != nil || !ok || value(r.Gen, r.Row) != v {
			t.Errorf("FindNewest(%s) = %v %v %v, want value %d", id, r, ok, err, v)
		}
	}
	loads.Store(0)
	if _, ok, err := FindNewest(ctx, refs, "zz", load); ok || err != nil {
		t.Fatalf("FindNewest of an absent key: %v %v", ok, err)
	}
	if n := loads.Load(); n != 0 {
		t.Fatalf("an id above every generation's range loaded %d generations", n)
	}
}

// TestStreamNewestReadsEachGenerationOnce: a merge's stream reads every
// generation exactly once, hands them over newest first with the same
// winners NewestRows picks, and never holds more than readAhead
// generations it has not handed over.
func TestStreamNewestReadsEachGenerationOnce(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var refs []GenRef
	for g := range 12 {
		// Every generation rewrites id "k" and ids of the one before.
		refs = append(refs, sealGen(t, store, "s", uint64(g+1), t0.Add(time.Duration(g)*time.Second),
			[]write{{"k", int64(g)}, {fmt.Sprintf("i%d", g), int64(g)}, {fmt.Sprintf("i%d", max(g-1, 0)), int64(100 + g)}}))
	}
	var (
		mu            sync.Mutex
		loads         = map[string]int{}
		held, maxHeld int
		handed        []string
		got           = map[string]int64{}
	)
	load := func(ctx context.Context, ref GenRef) (*LoadedGeneration, error) {
		g, err := LoadGeneration(ctx, store, ref, ReadOptions{KeyColumn: "id", Whole: true, NoIndex: true})
		mu.Lock()
		loads[ref.Key()]++
		held++
		maxHeld = max(maxHeld, held)
		mu.Unlock()
		return g, err
	}
	keys, err := StreamNewest(ctx, refs, load, func(g *LoadedGeneration, keep []bool) error {
		mu.Lock()
		held--
		handed = append(handed, fmt.Sprint(g.Ref.Gen.Generation))
		mu.Unlock()
		for r := 0; r < g.NumRows(); r++ {
			if keep == nil || keep[r] {
				if _, dup := got[g.Key(r)]; dup {
					return fmt.Errorf("key %s kept twice", g.Key(r))
				}
				got[g.Key(r)] = value(g, r)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if n := loads[ref.Key()]; n != 1 {
			t.Errorf("generation %d read %d times", ref.Gen.Generation, n)
		}
	}
	if !slices.Equal(handed, []string{"12", "11", "10", "9", "8", "7", "6", "5", "4", "3", "2", "1"}) {
		t.Errorf("handed over in order %v, want newest first", handed)
	}
	if maxHeld > readAhead {
		t.Errorf("held %d generations not handed over, read-ahead is %d", maxHeld, readAhead)
	}
	rows, _ := NewestRows(loadAll(t, store, refs))
	want := map[string]int64{}
	for _, r := range rows {
		want[r.Key()] = value(r.Gen, r.Row)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(keys) != len(want) {
		t.Fatalf("StreamNewest kept %v (%d keys), NewestRows %v", got, len(keys), want)
	}
	if got["k"] != 11 || got["i0"] != 101 || got["i11"] != 11 {
		t.Fatalf("winners %v", got)
	}
}

// TestStreamNewestStopsOnError: an error of fn or of a read ends the
// stream with that error.
func TestStreamNewestStopsOnError(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	t0 := time.Now()
	var refs []GenRef
	for g := range 6 {
		refs = append(refs, sealGen(t, store, "s", uint64(g+1), t0, []write{{fmt.Sprint(g), 1}}))
	}
	load := func(ctx context.Context, ref GenRef) (*LoadedGeneration, error) {
		if ref.Gen.Generation == 3 {
			return nil, fmt.Errorf("injected read failure")
		}
		return LoadGeneration(ctx, store, ref, ReadOptions{KeyColumn: "id"})
	}
	calls := 0
	_, err := StreamNewest(ctx, refs, load, func(*LoadedGeneration, []bool) error { calls++; return nil })
	if err == nil || err.Error() != "injected read failure" || calls != 3 {
		t.Fatalf("err %v after %d generations, want the read failure after 3 (6, 5, 4)", err, calls)
	}
	_, err = StreamNewest(ctx, refs, func(ctx context.Context, ref GenRef) (*LoadedGeneration, error) {
		return LoadGeneration(ctx, store, ref, ReadOptions{KeyColumn: "id"})
	}, func(*LoadedGeneration, []bool) error { return fmt.Errorf("injected write failure") })
	if err == nil || err.Error() != "injected write failure" {
		t.Fatalf("err %v, want the write failure", err)
	}
}
