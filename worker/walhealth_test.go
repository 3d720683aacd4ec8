package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/wal"
)

func testServer(t *testing.T, root objstore.Store, instance string) *httptest.Server {
	t.Helper()
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	catalog := rollout.NewCatalog(root, rollout.ShardID(instance), cfg.StoreOptions())
	ts := httptest.NewServer(NewServer(cfg, catalog, NewRegistry()).Handler())
	t.Cleanup(ts.Close)
	return ts
}

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// TestStorageMetricsOfAKnownWorkload: five one-record appends and a
// flush show on /metrics as five WAL entries of one row and one seal
// caused by a flush.
func TestStorageMetricsOfAKnownWorkload(t *testing.T) {
	ts := testServer(t, objstore.NewMemory(), "m")
	if resp, body := post(t, ts.URL+"/api/v1/rollouts", `{"name":"known"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	for i := range 5 {
		if resp, body := post(t, ts.URL+"/api/v1/rollouts/known/records", fmt.Sprintf(`{"records":[{"id":"k%d","rollout_id":"r"}]}`, i)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("append: %d %s", resp.StatusCode, body)
		}
	}
	if resp, body := post(t, ts.URL+"/api/v1/rollouts/known/flush", ``); resp.StatusCode != http.StatusOK {
		t.Fatalf("flush: %d %s", resp.StatusCode, body)
	}
	m := get(t, ts.URL+"/metrics")
	for _, want := range []string{
		"rollout_records_appended_total 5\n",
		"lance_context_wal_entry_rows_count 5\n",
		"lance_context_wal_put_seconds_count 5\n",
		`lance_context_wal_seals_total{cause="flush"} 1` + "\n",
		"lance_context_wal_seal_seconds_count 1\n",
		"rollout_wal_pending_generations 1\n",
		"lance_context_wal_unsealed_rows 0\n",
		"lance_context_wal_writers_fenced_total 0\n",
		"lance_context_wal_replay_corruptions_total 0\n",
		`lance_context_store_pending_generations{store="known"} 1` + "\n",
		`lance_context_store_unsealed_rows{store="known"} 0` + "\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	// One set of counters: what the storage counts is not counted again
	// by the handler under another name (issue 27).
	for _, gone := range []string{"rollout_append_records_total", "rollout_flushes_total", "rollout_merged_rows_total",
		"lance_context_wal_entry_rows_total", "lance_context_wal_pending_generations"} {
		if strings.Contains(m, "\n"+gone+" ") {
			t.Errorf("/metrics still has %s, counted once under another name now", gone)
		}
	}
}

// TestDamagedStoreRefusesWritesAndShowsInHealth: a worker whose shard WAL
// of a store is corrupt answers writes to it with 503 naming the damage,
// reports the store in /api/v1/health and on /metrics, and serves its
// other stores.
func TestDamagedStoreRefusesWritesAndShowsInHealth(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	// A first worker appends three entries and is then replaced (without
	// sealing) by a second one with the same instance id.
	first := testServer(t, root, "w")
	post(t, first.URL+"/api/v1/rollouts", `{"name":"hurt"}`)
	post(t, first.URL+"/api/v1/rollouts", `{"name":"fine"}`)
	for i := range 3 {
		if resp, body := post(t, first.URL+"/api/v1/rollouts/hurt/records", fmt.Sprintf(`{"records":[{"id":"h%d","rollout_id":"r"}]}`, i)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("append: %d %s", resp.StatusCode, body)
		}
	}
	sr := rollout.StoreRoot(root, "hurt")
	key := fmt.Sprintf("%s%s/wal/%020d.arrow", wal.Root, rollout.ShardID("w"), 2)
	b, err := sr.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := sr.Put(ctx, key, b[:len(b)-3]); err != nil {
		t.Fatal(err)
	}

	second := testServer(t, root, "w")
	for i := range 2 { // the claim finds the damage; then the known damage refuses
		resp, body := post(t, second.URL+"/api/v1/rollouts/hurt/records", `{"records":[{"id":"new","rollout_id":"r"}]}`)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(body, "position 2") || !strings.Contains(body, "wal repair") {
			t.Fatalf("append to the damaged store: %d %s", resp.StatusCode, body)
		}
		if i == 1 && (!strings.Contains(body, `"WAL_CORRUPT"`) || resp.Header.Get("Retry-After") != "30") {
			t.Fatalf("append to a store known to be damaged: %d %s (Retry-After %s), want WAL_CORRUPT", resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	if resp, body := post(t, second.URL+"/api/v1/rollouts/fine/records", `{"records":[{"id":"ok","rollout_id":"r"}]}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append to the sound store: %d %s", resp.StatusCode, body)
	}
	var health struct {
		Status  string
		Damaged []rollout.Damage `json:"damaged_stores"`
	}
	if err := json.Unmarshal([]byte(get(t, second.URL+"/api/v1/health")), &health); err != nil {
		t.Fatal(err)
	}
	if health.Status != "degraded" || len(health.Damaged) != 1 || health.Damaged[0].Store != "hurt" || health.Damaged[0].Position != 2 {
		t.Fatalf("health %+v", health)
	}
	m := get(t, second.URL+"/metrics")
	for _, want := range []string{`lance_context_store_wal_damaged{store="hurt"} 1`, "lance_context_wal_replay_corruptions_total 1\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}

// TestWALDirectIOFromEnv: segment logs write by direct IO unless
// LC_WAL_DIRECT_IO=off, and the store options carry the choice.
func TestWALDirectIOFromEnv(t *testing.T) {
	for v, want := range map[string]bool{"": true, "on": true, "off": false} {
		t.Setenv("LC_WAL_DIRECT_IO", v)
		cfg, err := FromEnv()
		if err != nil || cfg.WALDirectIO != want || cfg.StoreOptions().BufferedLog == want {
			t.Errorf("LC_WAL_DIRECT_IO=%q: direct %v, buffered %v, %v; want direct %v", v, cfg.WALDirectIO, cfg.StoreOptions().BufferedLog, err, want)
		}
	}
	t.Setenv("LC_WAL_DIRECT_IO", "yes")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "LC_WAL_DIRECT_IO") {
		t.Errorf("LC_WAL_DIRECT_IO=yes: %v; want an error naming it", err)
	}
}
