package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// warmWorker is a worker over a store "rz" holding one readable record
// (returned), whose start-up warm of a store blocks until release is
// called: entered receives each store's name as its warm begins.
func warmWorker(t *testing.T, wait time.Duration) (srv *Server, ts *httptest.Server, id string, entered chan string, release func()) {
	t.Helper()
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.IndexColumns, cfg.ReadyWarmWait = []string{}, wait
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), cfg.StoreOptions())
	t.Cleanup(func() { _ = catalog.Close(context.Background()) })
	ctx := context.Background()
	st, err := catalog.Create(ctx, "rz")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.Append(ctx, []rollout.Record{{RolloutID: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	srv = NewServer(cfg, catalog, NewRegistry())
	entered, released := make(chan string, 1), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	srv.warmHook = func(ctx context.Context, name string, deep bool) (rollout.WarmStats, error) {
		entered <- name
		<-released
		return rollout.WarmStats{}, nil
	}
	ts = httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return srv, ts, ids[0], entered, release
}

// probe GETs path and returns the status, Retry-After and the body.
func probe(t *testing.T, ts *httptest.Server, path string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

func readyBody(t *testing.T, body string) readiness {
	t.Helper()
	var r readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	return r
}

// TestReadyzWaitsForTheStartupWarm: /readyz answers 503 with Retry-After
// and what is warming from StartupWarm until the warm ends, then 200;
// meanwhile liveness answers 200 and reads are served.
func TestReadyzWaitsForTheStartupWarm(t *testing.T) {
	srv, ts, id, entered, release := warmWorker(t, time.Hour)
	if code, _, body := probe(t, ts, "/readyz"); code != http.StatusOK || readyBody(t, body).Warm != "none" {
		t.Fatalf("/readyz of a worker with no start-up warm: %d %s", code, body)
	}
	warm := srv.StartupWarm()
	if code, _, body := probe(t, ts, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz once the warm is due, before it runs: %d %s, want 503", code, body)
	}
	done := make(chan struct{})
	go func() { warm(context.Background()); close(done) }()
	if name := <-entered; name != "rz" {
		t.Fatalf("warming %q, want rz", name)
	}
	code, retry, body := probe(t, ts, "/readyz")
	if r := readyBody(t, body); code != http.StatusServiceUnavailable || retry != "1" || r.Status != "warming" || r.Warming != "rz" {
		t.Fatalf("/readyz during the warm: %d Retry-After %q %s; want 503, 1, warming rz", code, retry, body)
	}
	for _, p := range []string{"/healthz", "/livez", "/api/v1/health"} {
		if code, _, body := probe(t, ts, p); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
			t.Fatalf("%s during the warm: %d %s, want the health JSON", p, code, body)
		}
	}
	if code, _, body := probe(t, ts, "/api/v1/rollouts/rz/records/"+id); code != http.StatusOK || !strings.Contains(body, id) {
		t.Fatalf("a read during the warm: %d %s", code, body)
	}
	release()
	<-done
	code, _, body = probe(t, ts, "/readyz")
	if r := readyBody(t, body); code != http.StatusOK || r.Status != "ready" || r.Warm != "done" || r.Warmed != 1 {
		t.Fatalf("/readyz after the warm: %d %s; want 200, done, 1 store warmed", code, body)
	}
}

// TestReadyzStopsWaitingAfterTheBound: a warm still running after
// ReadyWarmWait no longer keeps the worker unready; with a wait of 0 it
// never does.
func TestReadyzStopsWaitingAfterTheBound(t *testing.T) {
	srv, ts, _, entered, _ := warmWorker(t, time.Minute)
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	srv.warm.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	go srv.StartupWarm()(context.Background())
	<-entered
	if code, _, body := probe(t, ts, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz during the warm: %d %s, want 503", code, body)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	code, _, body := probe(t, ts, "/readyz")
	if r := readyBody(t, body); code != http.StatusOK || r.Warm != "timed_out" || r.Warming != "rz" {
		t.Fatalf("/readyz a minute into the warm: %d %s; want 200, timed_out, still warming rz", code, body)
	}

	srv, ts, _, entered, _ = warmWorker(t, 0)
	go srv.StartupWarm()(context.Background())
	<-entered
	code, _, body = probe(t, ts, "/readyz")
	if r := readyBody(t, body); code != http.StatusOK || r.Warm != "running" {
		t.Fatalf("/readyz during the warm with LC_READY_WARM_SECS=0: %d %s; want 200, running", code, body)
	}
}

// TestStartupWarmStopsAtWarmMaxStores: a worker with more stores than
// LC_WARM_MAX_STORES warms that many (in the catalog's order) and says how
// many it skipped; the others warm as they are read.
func TestStartupWarmStopsAtWarmMaxStores(t *testing.T) {
	srv, ts, _, entered, release := warmWorker(t, time.Hour)
	ctx := context.Background()
	for _, name := range []string{"s1", "s2", "s3"} {
		if _, err := srv.catalog.Create(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	srv.cfg.WarmMaxStores = 2
	srv.cfg.ReadyWarm = ReadyWarmFull // one store at a time
	warm := srv.StartupWarm()
	done := make(chan struct{})
	go func() { warm(ctx); close(done) }()
	var names []string
	for range 2 {
		names = append(names, <-entered)
		if len(names) == 1 {
			code, _, body := probe(t, ts, "/readyz")
			if r := readyBody(t, body); code != http.StatusServiceUnavailable || r.Skipped != 2 || len(r.Waiting) != 1 {
				t.Fatalf("/readyz during a warm capped at 2 of 4 stores: %d %s; want 503, 2 skipped, 1 waiting", code, body)
			}
		}
		release()
	}
	<-done
	code, _, body := probe(t, ts, "/readyz")
	if r := readyBody(t, body); code != http.StatusOK || r.Warmed != 2 || r.Skipped != 2 {
		t.Fatalf("/readyz after a warm capped at 2: %d %s; want 200, 2 warmed, 2 skipped (warmed %v)", code, body, names)
	}
}

// TestReadyzWaitsForTheOpenWarmOnlyWhereSet: with LC_READY_WARM=open (the
// default on an object store) /readyz is ready once each store's open
// part is warm, and says which stores' data warm runs after readiness
// until it ends.
func TestReadyzWaitsForTheOpenWarmOnlyWhereSet(t *testing.T) {
	srv, ts, _, _, _ := warmWorker(t, time.Hour)
	srv.cfg.ReadyWarm = ReadyWarmOpen
	deepIn, deepOut := make(chan struct{}), make(chan struct{})
	var calls []bool
	srv.warmHook = func(ctx context.Context, name string, deep bool) (rollout.WarmStats, error) {
		calls = append(calls, deep)
		if deep {
			close(deepIn)
			<-deepOut
		}
		return rollout.WarmStats{}, nil
	}
	done := make(chan struct{})
	go func() { srv.StartupWarm()(context.Background()); close(done) }()
	<-deepIn
	code, _, body := probe(t, ts, "/readyz")
	if r := readyBody(t, body); code != http.StatusOK || r.Warm != "done" || len(r.After) != 1 || r.After[0] != "rz" {
		t.Fatalf("/readyz during the data warm after the open warm: %d %s; want 200, done, rz warming after ready", code, body)
	}
	close(deepOut)
	<-done
	if code, _, body := probe(t, ts, "/readyz"); code != http.StatusOK || len(readyBody(t, body).After) != 0 {
		t.Fatalf("/readyz after the data warm: %d %s; want nothing warming after ready", code, body)
	}
	if len(calls) != 2 || calls[0] || !calls[1] {
		t.Errorf("warm calls (deep?) %v; want the open part, then the data", calls)
	}
}

func TestReadyWarmFromEnv(t *testing.T) {
	for v, want := range map[string]string{"": ReadyWarmAuto, "auto": ReadyWarmAuto, "full": ReadyWarmFull, "open": ReadyWarmOpen} {
		t.Setenv("LC_READY_WARM", v)
		if cfg, err := FromEnv(); err != nil || cfg.ReadyWarm != want {
			t.Errorf("LC_READY_WARM=%q: %q, %v; want %q", v, cfg.ReadyWarm, err, want)
		}
	}
	t.Setenv("LC_READY_WARM", "lazy")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "LC_READY_WARM") {
		t.Errorf("LC_READY_WARM=lazy: %v; want an error naming it", err)
	}
}

// TestOpenWarmOpensStoresSideBySide: where readiness waits only for each
// store's open part, the start-up warm opens the stores at once (on S3,
// one after another, each store's round trips added up); the full warm
// takes them one at a time.
func TestOpenWarmOpensStoresSideBySide(t *testing.T) {
	for _, mode := range []string{ReadyWarmOpen, ReadyWarmFull} {
		t.Run(mode, func(t *testing.T) {
			srv, _, _, entered, release := warmWorker(t, time.Hour)
			ctx := context.Background()
			for _, name := range []string{"s1", "s2"} {
				if _, err := srv.catalog.Create(ctx, name); err != nil {
					t.Fatal(err)
				}
			}
			srv.cfg.ReadyWarm = mode
			done := make(chan struct{})
			go func() { srv.StartupWarm()(ctx); close(done) }()
			want := 1
			if mode == ReadyWarmOpen {
				want = 3
			}
			var at []string
			for len(at) < want {
				select {
				case name := <-entered:
					at = append(at, name)
				case <-time.After(5 * time.Second):
					t.Fatalf("%s warm: %v entered before any returned; want %d at once", mode, at, want)
				}
			}
			select {
			case name := <-entered:
				t.Fatalf("%s warm: %v entered, then %s before any returned; want %d at once", mode, at, name, want)
			case <-time.After(100 * time.Millisecond):
			}
			release()
			for {
				select {
				case <-entered:
				case <-done:
					return
				}
			}
		})
	}
}
