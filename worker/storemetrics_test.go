package worker

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// TestMergeAndCacheMetricsOfAKnownWorkload: three flushed appends of two
// records, one listing of the WAL tier twice (a cache miss per generation,
// then hits) and a merge show on /metrics as 3 generations and 6 rows
// merged in one pass.
func TestMergeAndCacheMetricsOfAKnownWorkload(t *testing.T) {
	ts := testServer(t, objstore.NewMemory(), "m")
	if resp, body := post(t, ts.URL+"/api/v1/rollouts", `{"name":"known"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	for i := range 3 {
		body := fmt.Sprintf(`{"records":[{"id":"k%d","rollout_id":"r"},{"id":"j%d","rollout_id":"r"}]}`, i, i)
		if resp, out := post(t, ts.URL+"/api/v1/rollouts/known/records?flush=true", body); resp.StatusCode != http.StatusCreated {
			t.Fatalf("append: %d %s", resp.StatusCode, out)
		}
	}
	for range 2 {
		get(t, ts.URL+"/api/v1/rollouts/known/records?source=wal")
	}
	if resp, body := post(t, ts.URL+"/api/v1/rollouts/known/merge", ``); resp.StatusCode != http.StatusOK {
		t.Fatalf("merge: %d %s", resp.StatusCode, body)
	}
	m := get(t, ts.URL+"/metrics")
	for _, want := range []string{
		"lance_context_merge_seconds_count 1\n",
		"lance_context_merge_generations_total 3\n",
		"lance_context_merge_rows_total 6\n",
		"lance_context_merge_replaced_rows_total 0\n",
		"lance_context_merge_failures_total 0\n",
		"lance_context_compaction_seconds_count 0\n",
		"lance_context_generation_cache_misses_total 3\n",
		"lance_context_generation_cache_hits_total 3\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}
