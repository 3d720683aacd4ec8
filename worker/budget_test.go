package worker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// TestInflightBodyBudgetAnswers503: while one append's body is being read,
// a second that would take the bodies in flight past
// LC_INFLIGHT_BODY_BYTES answers 503 OVERLOADED with Retry-After and
// stores nothing; once the first ends, appends are admitted again.
func TestInflightBodyBudgetAnswers503(t *testing.T) {
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxBodyBytes, cfg.InflightBodyBytes = 1<<20, 1<<20
	srv := NewServer(cfg, rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), cfg.StoreOptions()), NewRegistry())
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	if resp, err := http.Post(ts.URL+"/api/v1/rollouts", "application/json", strings.NewReader(`{"name":"b"}`)); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	body := `{"records":[{"id":"slow","rollout_id":"r"}]}`
	pr, pw := io.Pipe()
	slow, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v1/rollouts/b/records", pr)
	slow.Header.Set("Content-Type", "application/json")
	slow.ContentLength = int64(len(body)) + 900_000 // declares most of the budget
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := http.DefaultClient.Do(slow)
		done <- resp
	}()
	if _, err := pw.Write([]byte(body[:10])); err != nil {
		t.Fatal(err)
	}
	// The client has sent it, but on a loaded machine the handler may not
	// have reserved it yet: wait for it to, or the second would go first.
	for deadline := time.Now().Add(30 * time.Second); srv.bodies.held() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow append never reserved its body")
		}
	}
	resp, err := http.Post(ts.URL+"/api/v1/rollouts/b/records", "application/json", strings.NewReader(strings.Repeat(" ", 200_000)+`{"records":[{"id":"second","rollout_id":"r"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(msg), "OVERLOADED") || !strings.Contains(string(msg), "LC_INFLIGHT_BODY_BYTES") {
		t.Fatalf("second append while the budget is held: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), msg)
	}
	pw.CloseWithError(io.ErrUnexpectedEOF) // the slow client gives up
	if r := <-done; r != nil {
		r.Body.Close()
	}
	resp, err = http.Post(ts.URL+"/api/v1/rollouts/b/records?flush=true", "application/json", strings.NewReader(`{"records":[{"id":"third","rollout_id":"r"}]}`))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("after the first ended: %v %v", resp, err)
	}
	get, err := http.Get(ts.URL + "/api/v1/rollouts/b/records/second")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(get.Body); !strings.Contains(string(b), `"record":null`) {
		t.Fatalf("the refused append stored something: %s", b)
	}
}

// held is the bytes reserved now (for tests).
func (b *bodyBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}
