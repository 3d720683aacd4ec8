package master

import (
	"strings"
	"testing"

	"github.com/lance-context/lance-context/api"
)

// TestParseWALMetricsReadsReferenceNames: the WAL's pending generations
// and appended records carry the reference's names (rollout_*) on a
// worker's /metrics; the storage view still reads them.
func TestParseWALMetricsReadsReferenceNames(t *testing.T) {
	text := strings.Join([]string{
		"# HELP rollout_wal_pending_generations x",
		"rollout_wal_pending_generations 4",
		"rollout_records_appended_total 17",
		`lance_context_wal_seals_total{cause="flush"} 2`,
		"lance_context_wal_unsealed_rows 3",
	}, "\n") + "\n"
	s := api.WorkerStorage{Seals: map[string]int64{}} // as the caller makes it
	if err := parseWALMetrics(strings.NewReader(text), &s); err != nil {
		t.Fatal(err)
	}
	if s.PendingGenerations != 4 || s.EntryRowsTotal != 17 || s.Seals["flush"] != 2 || s.UnsealedRows != 3 {
		t.Fatalf("parsed %+v", s)
	}
}
