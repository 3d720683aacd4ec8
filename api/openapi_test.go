package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/master"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

// routes returns "METHOD /path" for every route of a router, without
// trailing slashes and without the UI's catch-all.
func routes(t *testing.T, r chi.Routes) []string {
	t.Helper()
	var out []string
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasSuffix(route, "/*") {
			return nil
		}
		if route != "/" {
			route = strings.TrimSuffix(route, "/")
		}
		out = append(out, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpenAPIMatchesMountedRoutes: every route the worker and the master
// mount is in the document, and every operation of the document is
// mounted by one of them.
func TestOpenAPIMatchesMountedRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}

	cat := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), rollout.Options{})
	wcfg, err := worker.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	wr := worker.NewServer(wcfg, cat, worker.NewRegistry()).Handler().(chi.Routes)
	mr := chi.NewRouter()
	master.New(master.Config{}, nil, cat, prometheus.NewRegistry()).Mount(mr, true)
	mr.Method(http.MethodGet, "/metrics", http.NotFoundHandler())

	mounted := map[string]bool{}
	for _, r := range append(routes(t, wr), routes(t, mr)...) {
		mounted[r] = true
		if !documented[r] {
			t.Errorf("%s is mounted but not in api/openapi.json", r)
		}
	}
	for r := range documented {
		if !mounted[r] {
			t.Errorf("%s is in api/openapi.json but no service mounts it", r)
		}
	}
	if len(mounted) < 20 {
		t.Fatalf("only %d routes found: %v", len(mounted), slices.Sorted(func(yield func(string) bool) {
			for r := range mounted {
				if !yield(r) {
					return
				}
			}
		}))
	}
}
