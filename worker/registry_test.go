package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

type fakeRegistry struct {
	mu  sync.Mutex
	ops []string
}

func (f *fakeRegistry) RegisterStore(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, "+"+name)
	return nil
}

func (f *fakeRegistry) UnregisterStore(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, "-"+name)
	return nil
}

// TestRegression_DeleteUnregistersStore: a deleted store used to stay in the
// etcd registry, so masters listed it forever.
func TestRegression_DeleteUnregistersStore(t *testing.T) {
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), cfg.StoreOptions()), NewRegistry())
	reg := &fakeRegistry{}
	srv.Registry = reg
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/api/v1/rollouts", "application/json", strings.NewReader(`{"name":"gone"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", resp, err)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/v1/rollouts/gone", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if !slices.Equal(reg.ops, []string{"+gone", "-gone"}) {
		t.Fatalf("registry saw %v", reg.ops)
	}
}
