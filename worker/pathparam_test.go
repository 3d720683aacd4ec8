package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// TestPathParamsWithEscapedSlash is the regression test of ids and rollout
// ids holding "/" (sent as %2F) or "%": chi routes such paths on the escaped
// form and returned the parameter still escaped, so GET .../records/a%2Fb
// looked up "a%2Fb" (404) and .../trajectories/run%2F1 answered 200 with no
// records. Parameters without such escapes must not be unescaped twice.
func TestPathParamsWithEscapedSlash(t *testing.T) {
	cfg := Config{InstanceID: "t", MaxBodyBytes: 1 << 20, MaxRecords: 100, MaxPayloadBytes: 1 << 20}
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), cfg.StoreOptions())
	srv := httptest.NewServer(NewServer(cfg, catalog, NewRegistry()).Handler())
	defer srv.Close()
	defer catalog.Close(context.Background())

	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("POST", "/api/v1/rollouts", `{"name":"s"}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	recs := `{"records":[
		{"id":"a/b","rollout_id":"run/1","binary_payload":"eHl6"},
		{"id":"p%41q","rollout_id":"r 2%41"}]}`
	if code, body := do("POST", "/api/v1/rollouts/s/records?flush", recs); code != 201 {
		t.Fatalf("append: %d %s", code, body)
	}
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/rollouts/s/records/a%2Fb", `"id":"a/b"`},
		{"/api/v1/rollouts/s/records/a%2Fb/blob", `xyz`},
		{"/api/v1/rollouts/s/records/p%2541q", `"id":"p%41q"`}, // no double unescape
		{"/api/v1/rollouts/s/trajectories/run%2F1", `"id":"a/b"`},
		{"/api/v1/rollouts/s/trajectories/r%202%2541", `"id":"p%41q"`},
	} {
		code, body := do("GET", tc.path, "")
		if code != 200 || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %s; want 200 with %s", tc.path, code, body, tc.want)
		}
	}
	_, body := do("GET", "/api/v1/rollouts/s/trajectories/run%2F1", "")
	var tr struct {
		RolloutID string `json:"rollout_id"`
		Count     int    `json:"count"`
	}
	if err := json.Unmarshal([]byte(body), &tr); err != nil || tr.RolloutID != "run/1" || tr.Count != 1 {
		t.Fatalf("trajectory answer %s (%v)", body, err)
	}
}
