package worker

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/vfs"
)

// TestFullDiskIs507 (regression): appends on a full disk answered 503
// STORAGE_UNAVAILABLE with Retry-After: 1, as any passing storage fault.
// Now they answer 507 INSUFFICIENT_STORAGE with a Retry-After and a
// message that says to free space; /api/v1/health lists the store under
// storage_full and /metrics says so; the first append after space is
// freed succeeds and clears both.
func TestFullDiskIs507(t *testing.T) {
	q := vfs.NewQuota(vfs.NewMem(), 100<<10) // below the smallest WAL segment
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	opts := cfg.StoreOptions()
	opts.LogFS = q
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("full"), opts)
	ts := httptest.NewServer(NewServer(cfg, catalog, NewRegistry()).Handler())
	t.Cleanup(ts.Close)
	if resp, body := post(t, ts.URL+"/api/v1/rollouts", `{"name":"full"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	for range 3 {
		resp, body := post(t, ts.URL+"/api/v1/rollouts/full/records", `{"records":[{"id":"a","rollout_id":"r"}]}`)
		if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(body, `"INSUFFICIENT_STORAGE"`) ||
			resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "free space") {
			t.Fatalf("append on a full disk: %d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	var health struct {
		Status string
		Full   []rollout.StorageFull `json:"storage_full"`
	}
	if err := json.Unmarshal([]byte(get(t, ts.URL+"/api/v1/health")), &health); err != nil {
		t.Fatal(err)
	}
	if health.Status != "degraded" || len(health.Full) != 1 || health.Full[0].Store != "full" || !strings.Contains(health.Full[0].Error, "no space") {
		t.Fatalf("health %+v", health)
	}
	if m := get(t, ts.URL+"/metrics"); !strings.Contains(m, `lance_context_store_storage_full{store="full"} 1`) ||
		!strings.Contains(m, "lance_context_wal_no_space_errors_total 3") {
		t.Fatalf("/metrics does not report the full disk")
	}

	q.SetFree(64 << 20)
	if resp, body := post(t, ts.URL+"/api/v1/rollouts/full/records", `{"records":[{"id":"a","rollout_id":"r"}]}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append once space is freed: %d %s", resp.StatusCode, body)
	}
	if h := get(t, ts.URL+"/api/v1/health"); !strings.Contains(h, `"status":"ok"`) || strings.Contains(h, "storage_full") {
		t.Fatalf("health after space was freed: %s", h)
	}
	if m := get(t, ts.URL+"/metrics"); !strings.Contains(m, `lance_context_store_storage_full{store="full"} 0`) {
		t.Fatalf("/metrics still reports the full disk")
	}
}

// TestDuplicateInstanceIDIs503: a second worker with the instance id of a
// live one answers its appends 503 SHARD_CLAIMED_ELSEWHERE naming the
// instance id, lists the store under shard_conflicts in /api/v1/health
// and on /metrics, and the first worker goes on unharmed.
func TestDuplicateInstanceIDIs503(t *testing.T) {
	root := objstore.NewMemory()
	server := func(owner string) *httptest.Server {
		cfg, err := FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		cfg.InstanceID = "twin"
		opts := cfg.StoreOptions()
		// Two processes (owners), heartbeats renewed every 20 ms.
		opts.OwnerID, opts.HeartbeatInterval, opts.HeartbeatTTL = owner, 20*time.Millisecond, 5*time.Second
		ts := httptest.NewServer(NewServer(cfg, rollout.NewCatalog(root, rollout.ShardID(cfg.InstanceID), opts), NewRegistry()).Handler())
		t.Cleanup(ts.Close)
		return ts
	}
	first, second := server("proc-1"), server("proc-2")
	post(t, first.URL+"/api/v1/rollouts", `{"name":"twin"}`)
	if resp, body := post(t, first.URL+"/api/v1/rollouts/twin/records", `{"records":[{"id":"a","rollout_id":"r"}]}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append to the first worker: %d %s", resp.StatusCode, body)
	}
	for range 3 {
		resp, body := post(t, second.URL+"/api/v1/rollouts/twin/records", `{"records":[{"id":"b","rollout_id":"r"}]}`)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"SHARD_CLAIMED_ELSEWHERE"`) ||
			!strings.Contains(body, `INSTANCE_ID=\"twin\"`) || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("append to the second worker: %d %s", resp.StatusCode, body)
		}
		if resp, body := post(t, first.URL+"/api/v1/rollouts/twin/records", `{"records":[{"id":"a","rollout_id":"r"}]}`); resp.StatusCode != http.StatusCreated {
			t.Fatalf("append to the first worker: %d %s", resp.StatusCode, body)
		}
	}
	var health struct {
		Status    string
		Conflicts []rollout.ShardConflict `json:"shard_conflicts"`
	}
	if err := json.Unmarshal([]byte(get(t, second.URL+"/api/v1/health")), &health); err != nil {
		t.Fatal(err)
	}
	if health.Status != "degraded" || len(health.Conflicts) != 1 || health.Conflicts[0].Store != "twin" || health.Conflicts[0].InstanceID != "twin" {
		t.Fatalf("health %+v", health)
	}
	if m := get(t, second.URL+"/metrics"); !strings.Contains(m, `lance_context_store_shard_claimed_elsewhere{store="twin"} 1`) {
		t.Fatal("/metrics does not report the conflict")
	}
	if h := get(t, first.URL+"/api/v1/health"); !strings.Contains(h, `"status":"ok"`) {
		t.Fatalf("the first worker's health: %s", h)
	}
}
