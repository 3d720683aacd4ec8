package rollout

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/objstore"
)

// gathered returns every sample of reg by name: a counter's or gauge's
// value, a histogram's count under name+"_count".
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[mf.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[mf.GetName()] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[mf.GetName()+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestMergeCompactionAndCacheMetrics: after a known workload (two merges
// of 3 generations, 5 ids rewritten, one compaction of the 2 fragments,
// one cold and two warm reads of a pending generation) the catalog's
// registerer shows exactly those counts.
func TestMergeCompactionAndCacheMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", quiet(Options{Registerer: reg})), "m")
	appendFlush(t, s, recs("a", 10, "r"))
	appendFlush(t, s, recs("b", 10, "r"))
	if res, err := s.Merge(ctx); err != nil || res.Rows != 20 || res.Generations != 2 {
		t.Fatalf("merge: %+v %v", res, err)
	}
	rewrite := append(recs("a", 5, "r2"), recs("c", 5, "r")...)
	appendFlush(t, s, rewrite)
	for range 2 { // a miss, then a hit
		if res, err := s.List(ctx, ListOptions{Source: SourceWAL, Limit: 100}); err != nil || len(res.Records) != 10 {
			t.Fatalf("list wal: %v %v", res, err)
		}
	}
	if r, err := s.Get(ctx, "c-001"); err != nil || r.ID != "c-001" { // a hit
		t.Fatalf("get: %+v %v", r, err)
	}
	if res, err := s.Merge(ctx); err != nil || res.Rows != 10 || res.Replaced != 5 {
		t.Fatalf("merge: %+v %v", res, err)
	}
	if res, err := s.Merge(ctx); err != nil || res.Generations != 0 { // nothing to merge: not counted
		t.Fatalf("empty merge: %+v %v", res, err)
	}
	if res, err := s.Compact(ctx, CompactOptions{}); err != nil || res.Removed != 2 || res.Added != 1 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	got := gathered(t, reg)
	for name, want := range map[string]float64{
		"lance_context_merge_seconds_count":                2,
		"lance_context_merge_generations_total":            3,
		"lance_context_merge_rows_total":                   30,
		"lance_context_merge_replaced_rows_total":          5,
		"lance_context_merge_failures_total":               0,
		"lance_context_compaction_seconds_count":           1,
		"lance_context_compaction_rows_total":              25,
		"lance_context_compaction_fragments_removed_total": 2,
		"lance_context_compaction_failures_total":          0,
		"lance_context_generation_cache_misses_total":      1,
		"lance_context_generation_cache_hits_total":        2,
		"lance_context_wal_seals_total":                    3, // the WAL's metrics register beside them
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	loaded, held := got["lance_context_generation_cache_loaded_bytes_total"], got["lance_context_generation_cache_bytes"]
	if loaded <= 0 || held != loaded {
		t.Errorf("cache loaded %v bytes and holds %v, want the same positive size (one generation, never evicted)", loaded, held)
	}
	if t.Failed() {
		t.Log(fmt.Sprint(got))
	}
}
