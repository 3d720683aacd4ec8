package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// maxErrorMessage bounds the message of an error response.
const maxErrorMessage = 4 << 10

// errorMessage serves h and returns the status and the message of its
// error envelope.
func errorMessage(t *testing.T, h http.HandlerFunc, target string) (int, string) {
	t.Helper()
	mux := chi.NewRouter()
	mux.Get("/experiments/{name}/records", h)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	var body api.ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("status %d, body %q: %v", rec.Code, rec.Body.String(), err)
	}
	return rec.Code, body.Error.Message
}

// TestErrorMessageNotRepeated: one storage failure met by many parallel
// reads is reported once. A listing whose data-file reads all failed
// answered with the same message joined once per column and fragment
// (about 70 times, 19 KB): every field of a read waits on one shared
// batch of ranged reads, each got its failure, and the fields' errors,
// then the fragments', were joined whole.
func TestErrorMessageNotRepeated(t *testing.T) {
	ctx := context.Background()
	opts := rollout.Options{Logger: slog.New(slog.DiscardHandler)}
	mem := objstore.NewMemory()
	w := rollout.NewCatalog(mem, rollout.ShardID("w"), opts)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	s, err := w.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	for batch := range 3 { // three fragments
		recs := make([]rollout.Record, 50)
		for i := range recs {
			// Files larger than the tail an open reads and keeps, so a
			// listing reads pages after the open.
			content := fmt.Sprintf("text %d/%d %s", batch, i, strings.Repeat("x", 3000))
			recs[i] = rollout.Record{ID: fmt.Sprintf("r%d-%03d", batch, i), RolloutID: "ro", SequenceOrder: int32(i), Content: &content}
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A reader whose every read of a data file fails, as reads did with
	// the object store unreachable.
	dataRead := func(op objstore.Op, key string, _ int) objstore.Fault {
		if (op == objstore.OpGetRange || op == objstore.OpGet) && strings.Contains(key, "/data/") {
			return objstore.FaultError
		}
		return objstore.FaultPass
	}
	f := objstore.NewFaulty(mem, objstore.FaultConfig{Hook: dataRead})
	r := rollout.NewCatalog(f, rollout.ShardID("r"), opts)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	h := httpapi.RecordReads{Catalog: r, MaxLimit: 1000, DefaultSource: rollout.SourceFragments}
	const list = "/experiments/exp/records?source=fragments&limit=1000"
	check := func(when string) {
		t.Helper()
		status, msg := errorMessage(t, h.List, list)
		if status != http.StatusServiceUnavailable {
			t.Fatalf("%s: status %d (%q), want 503", when, status, msg)
		}
		if n := strings.Count(msg, "injected error"); n != 1 || len(msg) > maxErrorMessage {
			t.Fatalf("%s: the failure is named %d times in %d bytes, want once in at most %d:\n%s", when, n, len(msg), maxErrorMessage, msg)
		}
		t.Logf("%s: %s", when, msg)
		// The error itself, for logs and other callers, not only the
		// response.
		st, err := r.Open(ctx, "exp")
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.List(ctx, rollout.ListOptions{Source: rollout.SourceFragments, Limit: 1000})
		if err == nil || strings.Count(err.Error(), "injected error") != 1 {
			t.Fatalf("%s: List: %v, want the failure named once", when, err)
		}
	}
	// Opening the data files fails, once a fragment.
	check("open")
	// With the files open, reading their pages fails, once a column and
	// fragment.
	f.SetHook(nil)
	if status, msg := errorMessage(t, h.List, list); status != http.StatusOK {
		t.Fatalf("listing without faults: status %d (%q)", status, msg)
	}
	f.SetHook(dataRead)
	check("pages")
}

// TestWriteErrorBoundsMessage: an error built elsewhere with errors.Join
// of many alike failures is answered with each kind once, and no message
// is longer than the bound.
func TestWriteErrorBoundsMessage(t *testing.T) {
	var errs []error
	for i := range 70 {
		errs = append(errs, fmt.Errorf("objstore: s3 get range data/%04d.lance: unexpected EOF", i))
	}
	h := func(w http.ResponseWriter, r *http.Request) { httpapi.WriteError(w, r, errors.Join(errs...)) }
	_, msg := errorMessage(t, h, "/experiments/exp/records")
	if n := strings.Count(msg, "unexpected EOF"); n != 1 || !strings.Contains(msg, "69 more") {
		t.Fatalf("70 alike failures answered as %q, want one and a count of the rest", msg)
	}
	h = func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, errors.New(strings.Repeat("long message ", 10_000)))
	}
	if _, msg := errorMessage(t, h, "/experiments/exp/records"); len(msg) > maxErrorMessage {
		t.Fatalf("a message of %d bytes, want at most %d", len(msg), maxErrorMessage)
	}
}

// The registry exports the collector's CPU and cycles, which the soak reads
// to show what a worker's filling caches cost in collections.
func TestRegistryExportsGCCPU(t *testing.T) {
	reg := httpapi.NewRegistry()
	runtime.GC()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				seen[f.GetName()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				seen[f.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	for _, name := range []string{"go_cpu_classes_gc_total_cpu_seconds_total", "go_cpu_classes_total_cpu_seconds_total", "go_gc_cycles_total_gc_cycles_total"} {
		v, ok := seen[name]
		if !ok {
			t.Fatalf("%s is not exported (have %d families)", name, len(fams))
		}
		if v <= 0 {
			t.Errorf("%s = %v after a collection, want > 0", name, v)
		}
	}
	if _, ok := seen["go_goroutines"]; !ok {
		t.Error("the default Go metrics are gone")
	}
}
