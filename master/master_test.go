package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/devmode"
	"github.com/lance-context/lance-context/master"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/wal"
	"github.com/lance-context/lance-context/worker"
)

// One embedded etcd serves the package; every test works under its own key
// prefix, so each master leads its own election.
var (
	etcdOnce sync.Once
	etcdURL  string
	etcdDir  string
	etcdErr  error
	etcdStop func()
	prefixes atomic.Int64
)

func etcdEndpoint(t *testing.T) string {
	t.Helper()
	etcdOnce.Do(func() {
		if etcdDir, etcdErr = os.MkdirTemp("", "mastertest-etcd-"); etcdErr != nil {
			return
		}
		e, url, err := devmode.StartEtcd(etcdDir)
		etcdURL, etcdErr = url, err
		if err == nil {
			etcdStop = e.Close
		}
	})
	if etcdErr != nil {
		t.Fatal(etcdErr)
	}
	return etcdURL
}

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	code := m.Run()
	if etcdStop != nil {
		etcdStop()
	}
	if etcdDir != "" {
		_ = os.RemoveAll(etcdDir)
	}
	os.Exit(code)
}

// fixture is a master over a shared in-memory data directory, served by
// httptest; other "processes" (workers) get catalogs of their own over the
// same data.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	prefix string
	data   objstore.Store // the data directory every process shares
	c      *coord.Coord
	cat    *rollout.Catalog // the master's
	m      *master.Master
	srv    *httptest.Server
	token  string
}

type fixtureOpts struct {
	cfg   master.Config
	wrap  func(objstore.Store) objstore.Store // what the master reads through
	token string
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("/mastertest/%d-%d", time.Now().UnixNano(), prefixes.Add(1))
	c, err := coord.Connect(ctx, coord.Config{Endpoints: []string{etcdEndpoint(t)}, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	data := objstore.Store(objstore.NewMemory())
	mroot := data
	if o.wrap != nil {
		mroot = o.wrap(data)
	}
	cat := rollout.NewCatalog(mroot, rollout.ShardID("master-test"), rollout.Options{})
	if o.cfg.ID == "" {
		o.cfg.ID = "m-" + t.Name()
	}
	reg := prometheus.NewRegistry()
	m := master.New(o.cfg, c, cat, reg)
	srv := httptest.NewServer(m.Handler(reg, o.token))
	t.Cleanup(srv.Close)
	return &fixture{t: t, ctx: ctx, prefix: prefix, data: data, c: c, cat: cat, m: m, srv: srv, token: o.token}
}

// run starts the master's loops (refresh, election, scheduler, runner).
func (f *fixture) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.m.Run(ctx); close(done) }()
	f.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			f.t.Error("master Run did not return after its context ended")
		}
	})
}

// catalog is another process's view of the data, writing its own shard.
func (f *fixture) catalog(instance string) *rollout.Catalog {
	c := rollout.NewCatalog(f.data, rollout.ShardID(instance), rollout.Options{})
	f.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (f *fixture) create(c *rollout.Catalog, name string) *rollout.Store {
	f.t.Helper()
	st, err := c.Create(f.ctx, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func recs(prefix string, n int, rolloutID string) []rollout.Record {
	out := make([]rollout.Record, n)
	for i := range out {
		text := "content of " + prefix
		out[i] = rollout.Record{ID: fmt.Sprintf("%s-%03d", prefix, i), RolloutID: rolloutID, SequenceOrder: int32(i), Content: &text}
	}
	return out
}

// appendFlush appends rs and seals them into a new generation.
func appendFlush(t *testing.T, st *rollout.Store, rs []rollout.Record) {
	t.Helper()
	if _, err := st.Append(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) request(method, path, body string) (*http.Response, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, b
}

// call does a request, checks the status and decodes the JSON answer.
func call[T any](f *fixture, method, path, body string, want int) T {
	f.t.Helper()
	resp, b := f.request(method, path, body)
	if resp.StatusCode != want {
		f.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		f.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
	}
	return v
}

func (f *fixture) status(method, path, body string, want int) {
	f.t.Helper()
	call[map[string]any](f, method, path, body, want)
}

type listPage struct {
	Experiments []master.Experiment `json:"experiments"`
	Total       int                 `json:"total"`
	Stale       bool                `json:"stale"`
	Limit       int                 `json:"limit"`
	Offset      int                 `json:"offset"`
}

func names(p listPage) string {
	var out []string
	for _, x := range p.Experiments {
		out = append(out, x.Name)
	}
	return strings.Join(out, ",")
}

func byName(p listPage, name string) *master.Experiment {
	for i := range p.Experiments {
		if p.Experiments[i].Name == name {
			return &p.Experiments[i]
		}
	}
	return nil
}

type recordsPage struct {
	Records []rollout.Record `json:"records"`
	HasMore bool             `json:"has_more"`
	Limit   int              `json:"limit"`
	Offset  int              `json:"offset"`
	Source  string           `json:"source"`
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestExperimentsListBackfillSearchPaging(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: 200 * time.Millisecond}})
	w := f.catalog("w1")
	for _, n := range []string{"alpha", "gamma", "delta"} {
		f.create(w, n)
		if err := f.c.RegisterStore(f.ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	appendFlush(t, f.create(w, "beta"), recs("b", 2, "ro")) // on storage only
	appendFlush(t, mustOpen(t, w, "alpha"), recs("a", 3, "ro"))
	f.run()

	var all listPage
	// The page is stale until a whole refresh pass has finished recently, even
	// when each store's figures are fresh (fetched on demand): wait for both.
	eventually(t, 15*time.Second, "every store listed with fresh statistics", func() bool {
		all = call[listPage](f, "GET", "/api/v1/experiments", "", 200)
		if all.Total != 4 || len(all.Experiments) != 4 || all.Stale {
			return false
		}
		for _, x := range all.Experiments {
			if x.Stale {
				return false
			}
		}
		return true
	})
	if names(all) != "alpha,beta,delta,gamma" || all.Limit != 25 || all.Offset != 0 || all.Stale {
		t.Fatalf("list %+v", all)
	}
	if a := byName(all, "alpha"); a.Rows != 3 || a.PendingGenerations != 1 || len(a.Shards) != 1 || a.Shards[0].ShardID != w.Shard() {
		t.Fatalf("alpha %+v", a)
	}
	if b := byName(all, "beta"); b.Rows != 2 {
		t.Fatalf("beta (found on storage) %+v", b)
	}
	reg, err := f.c.ListStores(f.ctx)
	if err != nil || len(reg) != 4 {
		t.Fatalf("the store found on storage was not backfilled into etcd: %+v %v", reg, err)
	}

	for q, want := range map[string]string{"AL": "alpha", "a": "alpha,beta,delta,gamma", "mm": "gamma", "zzz": ""} {
		p := call[listPage](f, "GET", "/api/v1/experiments?search="+q, "", 200)
		if names(p) != want || p.Total != strings.Count(want, ",")+min(1, len(want)) {
			t.Fatalf("search %q: %q total %d, want %q", q, names(p), p.Total, want)
		}
	}
	for _, c := range []struct {
		q     string
		names string
	}{
		{"limit=2", "alpha,beta"},
		{"limit=2&offset=2", "delta,gamma"},
		{"limit=3&offset=3", "gamma"},
		{"offset=4", ""},
		{"search=a&limit=1&offset=1", "beta"},
	} {
		p := call[listPage](f, "GET", "/api/v1/experiments?"+c.q, "", 200)
		if names(p) != c.names || p.Total != 4 {
			t.Fatalf("%s: %q total %d, want %q total 4", c.q, names(p), p.Total, c.names)
		}
	}
	if p := call[listPage](f, "GET", "/api/v1/experiments?limit=3&offset=1", "", 200); p.Limit != 3 || p.Offset != 1 {
		t.Fatalf("limit/offset not echoed: %+v", p)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "offset=-1", "offset=x"} {
		if e := call[errorBody](f, "GET", "/api/v1/experiments?"+q, "", 400); e.Error.Code != "INVALID_REQUEST" {
			t.Fatalf("%s: %+v", q, e)
		}
	}
}

func mustOpen(t *testing.T, c *rollout.Catalog, name string) *rollout.Store {
	t.Helper()
	st, err := c.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestExperimentFresh(t *testing.T) {
	// No Run: the cache changes only on demand.
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour}})
	st := f.create(f.catalog("w1"), "exp")
	appendFlush(t, st, recs("a", 3, "ro"))
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp", "", 200); x.Rows != 3 || x.PendingGenerations != 1 || x.Name != "exp" || x.Stale {
		t.Fatalf("first read %+v", x)
	}
	appendFlush(t, st, recs("b", 2, "ro"))
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp", "", 200); x.Rows != 3 {
		t.Fatalf("cached read %+v, want the cached 3 rows", x)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp?fresh=true", "", 200); x.Rows != 5 || x.PendingGenerations != 2 || x.Stale {
		t.Fatalf("fresh read %+v, want 5 rows in 2 generations", x)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp", "", 200); x.Rows != 5 {
		t.Fatalf("the fresh read did not update the cache: %+v", x)
	}
	if p := call[listPage](f, "GET", "/api/v1/experiments", "", 200); len(p.Experiments) != 1 || p.Experiments[0].Rows != 5 {
		t.Fatalf("list after fresh read %+v", p)
	}
}

func TestExperimentUnknown404(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for _, p := range []string{"/api/v1/experiments/nope", "/api/v1/experiments/nope?fresh=true", "/api/v1/experiments/_reserved"} {
		if e := call[errorBody](f, "GET", p, "", 404); e.Error.Code != "NOT_FOUND" {
			t.Fatalf("%s: %+v", p, e)
		}
	}
}

// Before the fix, the first GET of an unknown store left a cache entry for
// it: the second GET answered 200 with an empty, stale experiment, and the
// list showed the name until the next full refresh.
func TestRegression_UnknownExperimentNotCached(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour}})
	f.create(f.catalog("w1"), "real")
	if err := f.c.RegisterStore(f.ctx, "real"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		f.status("GET", "/api/v1/experiments/ghost", "", 404)
	}
	if p := call[listPage](f, "GET", "/api/v1/experiments", "", 200); names(p) != "real" || p.Total != 1 {
		t.Fatalf("list after GETs of an unknown store: %q total %d", names(p), p.Total)
	}
}

// slowStore delays every read of keys under the listed prefixes (one
// store's directory): a store on a slow or stuck disk.
type slowStore struct {
	objstore.Store
	delay time.Duration
	mu    sync.Mutex
	slow  map[string]bool
	reads map[string]int // slow reads by key
}

// maxReads is the most slow reads of any one key.
func (s *slowStore) maxReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.reads {
		n = max(n, c)
	}
	return n
}

func (s *slowStore) set(prefix string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slow[prefix] = on
}

func (s *slowStore) wait(ctx context.Context, key string) error {
	s.mu.Lock()
	slow := false
	for p, on := range s.slow {
		slow = slow || (on && strings.HasPrefix(key, p))
	}
	if slow {
		if s.reads == nil {
			s.reads = map[string]int{}
		}
		s.reads[key]++
	}
	s.mu.Unlock()
	if !slow {
		return nil
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *slowStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.wait(ctx, key); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

func (s *slowStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := s.wait(ctx, key); err != nil {
		return nil, err
	}
	return s.Store.GetRange(ctx, key, off, n)
}

func (s *slowStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := s.wait(ctx, key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	return s.Store.Head(ctx, key)
}

func (s *slowStore) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := s.wait(ctx, prefix); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}

func TestSlowStoreServedStale(t *testing.T) {
	slow := &slowStore{delay: 5 * time.Second, slow: map[string]bool{"cold.rollout.lance/": true}}
	f := newFixture(t, fixtureOpts{
		cfg:  master.Config{RefreshInterval: 300 * time.Millisecond, StatsTimeout: 300 * time.Millisecond},
		wrap: func(s objstore.Store) objstore.Store { slow.Store = s; return slow },
	})
	w := f.catalog("w1")
	fast, slowSt := f.create(w, "fast"), f.create(w, "slow")
	f.create(w, "cold") // slow from the start: never read successfully
	appendFlush(t, fast, recs("f", 2, "ro"))
	appendFlush(t, slowSt, recs("s", 2, "ro"))
	f.run()
	eventually(t, 15*time.Second, "fast and slow listed fresh", func() bool {
		p := call[listPage](f, "GET", "/api/v1/experiments", "", 200)
		a, b := byName(p, "fast"), byName(p, "slow")
		return a != nil && b != nil && !a.Stale && !b.Stale && a.Rows == 2 && b.Rows == 2
	})

	slow.set("slow.rollout.lance/", true)
	appendFlush(t, fast, recs("f2", 1, "ro"))
	appendFlush(t, slowSt, recs("s2", 1, "ro"))
	var p listPage
	eventually(t, 15*time.Second, "the slow store marked stale while the fast one refreshes", func() bool {
		start := time.Now()
		p = call[listPage](f, "GET", "/api/v1/experiments", "", 200)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the list took %v: it waited for the slow store", d)
		}
		// The slow store is stale by age (two refresh intervals) before
		// its refresh times out and records the error: wait for both.
		a, b := byName(p, "fast"), byName(p, "slow")
		return a.Rows == 3 && !a.Stale && b.Stale && b.Error != ""
	})
	if b := byName(p, "slow"); b.Rows != 2 || b.Error == "" {
		t.Fatalf("slow store %+v: want its last figures (2 rows) and the error", b)
	}
	if c := byName(p, "cold"); c == nil || !c.Stale || c.Rows != 0 {
		t.Fatalf("cold store %+v: want listed, stale, without figures", c)
	}
	if !p.Stale {
		t.Fatal("the page holds stale entries but is not marked stale")
	}
	start := time.Now()
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/slow", "", 200); !x.Stale || x.Rows != 2 {
		t.Fatalf("cached read of the slow store %+v", x)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/slow?fresh=true", "", 200); !x.Stale || x.Rows != 2 || x.Error == "" {
		t.Fatalf("fresh read of the slow store %+v: want the old figures, stale", x)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("reads of the slow store took %v; the stats timeout is 300ms", d)
	}

	slow.set("slow.rollout.lance/", false)
	eventually(t, 15*time.Second, "the slow store to recover", func() bool {
		b := byName(call[listPage](f, "GET", "/api/v1/experiments", "", 200), "slow")
		return !b.Stale && b.Rows == 3 && b.Error == ""
	})
}

// recordsStore makes a store with 5 merged rows (rollout ro-a) and 3 pending
// ones (ro-b), plus a payload record in each tier.
func recordsStore(t *testing.T, f *fixture) {
	t.Helper()
	st := f.create(f.catalog("w1"), "rec")
	base := recs("a", 5, "ro-a")
	base = append(base, rollout.Record{ID: "blob-base", RolloutID: "ro-blob", ContentType: "image/png", BinaryPayload: []byte("\x89PNG base bytes")})
	appendFlush(t, st, base)
	if _, err := st.Merge(f.ctx); err != nil {
		t.Fatal(err)
	}
	pending := recs("b", 3, "ro-b")
	pending = append(pending, rollout.Record{ID: "blob-wal", RolloutID: "ro-blob", ContentType: "application/x-thing", BinaryPayload: []byte{0, 1, 2, 3, 255}})
	appendFlush(t, st, pending)
}

func TestRecordsEndpoint(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	recordsStore(t, f)
	ids := func(p recordsPage) string {
		var out []string
		for _, r := range p.Records {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	base := "/api/v1/experiments/rec/records"
	p := call[recordsPage](f, "GET", base, "", 200)
	if p.Source != "fragments" || p.Limit != 25 || p.Offset != 0 || p.HasMore || len(p.Records) != 6 {
		t.Fatalf("default page: source %q limit %d offset %d has_more %v, %d records", p.Source, p.Limit, p.Offset, p.HasMore, len(p.Records))
	}
	if p.Records[0].ID != "a-000" || p.Records[0].RolloutID != "ro-a" || p.Records[0].Content == nil || *p.Records[0].Content != "content of a" {
		t.Fatalf("first record %+v", p.Records[0])
	}
	for _, c := range []struct {
		q    string
		want string
		more bool
	}{
		// Every source lists in id order.
		{"source=wal", "b-000,b-001,b-002,blob-wal", false},
		{"source=all&limit=5", "a-000,a-001,a-002,a-003,a-004", true},
		{"source=all&limit=5&offset=5", "b-000,b-001,b-002,blob-base,blob-wal", false},
		{"source=fragments&limit=2&offset=1", "a-001,a-002", true},
		{"source=all&rollout_id=ro-b", "b-000,b-001,b-002", false},
		{"rollout_id=ro-b", "", false}, // fragments: not merged yet
		{"rollout_id=ro-a&limit=100", "a-000,a-001,a-002,a-003,a-004", false},
		{"source=all&rollout_id=ro-blob", "blob-base,blob-wal", false},
		{"source=all&content_type=image/png", "blob-base", false},
		{"source=all&id=b-001", "b-001", false},
		{"source=all&rollout_id=", "a-000,a-001,a-002,a-003,a-004,b-000,b-001,b-002,blob-base,blob-wal", false},
		{`source=all&filters={"rollout_id":"ro-b"}`, "b-000,b-001,b-002", false},
		{`source=all&filters={"rollout_id":"ro-blob","content_type":"image/png"}`, "blob-base", false},
	} {
		p := call[recordsPage](f, "GET", base+"?"+c.q, "", 200)
		if ids(p) != c.want || p.HasMore != c.more {
			t.Fatalf("%s: %q has_more=%v, want %q has_more=%v", c.q, ids(p), p.HasMore, c.want, c.more)
		}
	}
	if p := call[recordsPage](f, "GET", base+"?source=all&limit=7&offset=2", "", 200); p.Source != "all" || p.Limit != 7 || p.Offset != 2 {
		t.Fatalf("echo: %+v", p)
	}
	for _, q := range []string{"source=bogus", "limit=0", "limit=101", "limit=-1", "limit=x", "offset=-1", "colour=red", "include_in_training=maybe", "rollout_id=a&rollout_id=b"} {
		if e := call[errorBody](f, "GET", base+"?"+q, "", 400); e.Error.Code != "INVALID_REQUEST" {
			t.Fatalf("%s: %+v", q, e)
		}
	}
	f.status("GET", base+"?limit=100", "", 200)
	f.status("GET", "/api/v1/experiments/nope/records", "", 404)
}

func TestRecordGetAndBlob(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	recordsStore(t, f)
	for _, c := range []struct {
		id, ctype string
		payload   []byte
	}{
		{"blob-base", "image/png", []byte("\x89PNG base bytes")},
		{"blob-wal", "application/x-thing", []byte{0, 1, 2, 3, 255}},
	} {
		r := call[map[string]map[string]any](f, "GET", "/api/v1/experiments/rec/records/"+c.id, "", 200)["record"]
		if r["id"] != c.id || r["rollout_id"] != "ro-blob" || r["payload_size"] != float64(len(c.payload)) {
			t.Fatalf("record %s: %v", c.id, r)
		}
		if _, ok := r["binary_payload"]; ok {
			t.Fatalf("record %s carries its payload inline", c.id)
		}
		resp, body := f.request("GET", "/api/v1/experiments/rec/records/"+c.id+"/blob", "")
		if resp.StatusCode != 200 || string(body) != string(c.payload) || resp.Header.Get("Content-Type") != c.ctype {
			t.Fatalf("blob %s: %d %q %q", c.id, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		disp, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
		if err != nil || disp != "attachment" || params["filename"] != c.id+".bin" {
			t.Fatalf("blob %s: Content-Disposition %q (%v)", c.id, resp.Header.Get("Content-Disposition"), err)
		}
	}
	if r := call[api.GetRecordResponse](f, "GET", "/api/v1/experiments/rec/records/b-001", "", 200).Record; r == nil || r.ID != "b-001" || r.RolloutID != "ro-b" {
		t.Fatalf("pending record %+v", r)
	}
	// A missing record is {"record": null}, as the reference answers.
	if r := call[map[string]any](f, "GET", "/api/v1/experiments/rec/records/nope", "", 200); len(r) != 1 || r["record"] != nil {
		t.Fatalf("missing record: %v", r)
	}
	f.status("GET", "/api/v1/experiments/rec/records/nope/blob", "", 404)
	f.status("GET", "/api/v1/experiments/rec/records/a-001/blob", "", 404) // no payload
	f.status("GET", "/api/v1/experiments/nope/records/a-001", "", 404)
}

type taskReply struct {
	Task    coord.Task `json:"task"`
	Created bool       `json:"created"`
}

// waitTask polls the task API until the task is done (or fails the test).
func (f *fixture) waitTask(id string) coord.Task {
	f.t.Helper()
	var tk coord.Task
	eventually(f.t, 60*time.Second, "task "+id+" to finish", func() bool {
		tk = call[coord.Task](f, "GET", "/api/v1/tasks/"+id, "", 200)
		if tk.State == coord.StateFailed || (tk.State == coord.StateQueued && tk.Error != "") {
			f.t.Fatalf("task %s: %+v", id, tk)
		}
		return tk.State == coord.StateDone
	})
	return tk
}

func TestMergeOrphanShard(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour, SchedulerInterval: 200 * time.Millisecond}})
	// Another process wrote 3 generations and one more acknowledged batch
	// that it never sealed, then went away; no worker owns its shard.
	gone := f.catalog("gone-worker")
	st := f.create(gone, "exp")
	for i := 0; i < 3; i++ {
		appendFlush(t, st, recs(fmt.Sprintf("g%d", i), 2, "ro"))
	}
	if _, err := st.Append(f.ctx, recs("unsealed", 1, "ro")); err != nil {
		t.Fatal(err)
	}
	before, err := wal.LoadManifest(f.ctx, st.Root(), gone.Shard())
	if err != nil {
		t.Fatal(err)
	}
	f.run()
	reply := call[taskReply](f, "POST", "/api/v1/experiments/exp/merge", "", 202)
	if !reply.Created || reply.Task.Kind != coord.KindMerge || reply.Task.Store != "exp" || reply.Task.ID == "" || reply.Task.Source != "api" {
		t.Fatalf("merge reply %+v", reply)
	}
	tk := f.waitTask(reply.Task.ID)
	var result api.TaskResult
	if err := json.Unmarshal(tk.Result, &result); err != nil || result.Rows != 7 || result.Generations != 4 || result.Passes == 0 || result.Version == 0 {
		t.Fatalf("task result %s (%v)", tk.Result, err)
	}
	after, err := wal.LoadManifest(f.ctx, st.Root(), gone.Shard())
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch <= before.Epoch {
		t.Fatalf("the orphan merge did not claim the shard: epoch %d -> %d", before.Epoch, after.Epoch)
	}
	if len(after.Generations) != 0 {
		t.Fatalf("generations left in the shard: %+v", after.Generations)
	}
	x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp?fresh=true", "", 200)
	if x.PendingGenerations != 0 || x.Rows != 7 || x.Fragments == 0 {
		t.Fatalf("after the merge %+v, want 7 rows merged, nothing pending", x)
	}
	if p := call[recordsPage](f, "GET", "/api/v1/experiments/exp/records?limit=100", "", 200); len(p.Records) != 7 {
		t.Fatalf("fragments after the merge hold %d records, want 7", len(p.Records))
	}
}

func TestMergeAsksOwnerWorker(t *testing.T) {
	const token = "s3cret"
	t.Setenv("LC_API_TOKEN", token) // what the master sends to workers
	f := newFixture(t, fixtureOpts{token: token, cfg: master.Config{RefreshInterval: time.Hour, APIToken: token}})
	wcfg, err := worker.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	wcfg.InstanceID, wcfg.APIToken = "w-owner", token
	wcat := rollout.NewCatalog(f.data, rollout.ShardID(wcfg.InstanceID), wcfg.StoreOptions())
	t.Cleanup(func() { _ = wcat.Close(context.Background()) })
	ws := worker.NewServer(wcfg, wcat, prometheus.NewRegistry())
	var merges atomic.Int32
	var auth atomic.Value
	h := ws.Handler()
	wsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/merge") {
			merges.Add(1)
			auth.Store(r.Header.Get("Authorization"))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(wsrv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	regDone := make(chan struct{})
	go func() {
		_ = f.c.RegisterWorker(ctx, coord.WorkerInfo{InstanceID: wcfg.InstanceID, ShardID: wcat.Shard(), Endpoint: wsrv.URL, Version: "test"}, 10)
		close(regDone)
	}()
	t.Cleanup(func() { cancel(); <-regDone })

	st := f.create(wcat, "exp")
	for i := 0; i < 3; i++ {
		appendFlush(t, st, recs(fmt.Sprintf("g%d", i), 2, "ro"))
	}
	before, err := wal.LoadManifest(f.ctx, st.Root(), wcat.Shard())
	if err != nil {
		t.Fatal(err)
	}
	var workers struct {
		Workers []coord.WorkerInfo `json:"workers"`
	}
	eventually(t, 10*time.Second, "the worker to be listed", func() bool {
		workers = call[struct {
			Workers []coord.WorkerInfo `json:"workers"`
		}](f, "GET", "/api/v1/workers", "", 200)
		return len(workers.Workers) == 1
	})
	if w := workers.Workers[0]; w.InstanceID != "w-owner" || w.ShardID != wcat.Shard() || w.Endpoint != wsrv.URL {
		t.Fatalf("workers API %+v", w)
	}
	f.run()
	reply := call[taskReply](f, "POST", "/api/v1/experiments/exp/merge", "", 202)
	f.waitTask(reply.Task.ID)
	if merges.Load() == 0 {
		t.Fatal("the owning worker was not asked to merge")
	}
	if got := auth.Load(); got != "Bearer "+token {
		t.Fatalf("the master called the worker with Authorization %q", got)
	}
	after, err := wal.LoadManifest(f.ctx, st.Root(), wcat.Shard())
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch {
		t.Fatalf("the master claimed a shard with a live owner: epoch %d -> %d", before.Epoch, after.Epoch)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/exp?fresh=true", "", 200); x.PendingGenerations != 0 || x.Rows != 6 {
		t.Fatalf("after the merge %+v", x)
	}
	// The worker still owns its shard and keeps writing.
	appendFlush(t, st, recs("after", 1, "ro"))
	// Without the token the master refuses.
	f.token = ""
	f.status("GET", "/api/v1/experiments", "", 401)
}

// fragments gives a store n base fragments (one merge per row).
func fragments(t *testing.T, st *rollout.Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		appendFlush(t, st, recs(fmt.Sprintf("f%02d", i), 1, "ro"))
		if _, err := st.Merge(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// backlog gives a store n pending generations in an orphan shard.
func backlog(t *testing.T, f *fixture, instance, name string, n int) {
	t.Helper()
	st := f.create(f.catalog(instance), name)
	for i := 0; i < n; i++ {
		appendFlush(t, st, recs(fmt.Sprintf("p%02d", i), 1, "ro"))
	}
}

func schedulerFixture(t *testing.T, maintenance bool) *fixture {
	f := newFixture(t, fixtureOpts{cfg: master.Config{
		Maintenance: maintenance, MergeThreshold: 3, // CompactMinFragments: the default, 16
		RefreshInterval: 200 * time.Millisecond, SchedulerInterval: 200 * time.Millisecond,
	}})
	backlog(t, f, "orphan-deep", "deep", 3)       // at the threshold
	backlog(t, f, "orphan-shallow", "shallow", 2) // below it
	w := f.catalog("w-frag")
	fragments(t, f.create(w, "frag16"), 16)
	fragments(t, f.create(w, "frag15"), 15)
	if err := w.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

func tasksOf(f *fixture) map[string][]coord.Task {
	f.t.Helper()
	ts, err := f.c.ListTasks(f.ctx, 100)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string][]coord.Task{}
	for _, tk := range ts {
		out[tk.Kind+"/"+tk.Store] = append(out[tk.Kind+"/"+tk.Store], *tk)
	}
	return out
}

func TestSchedulerMaintenanceOn(t *testing.T) {
	f := schedulerFixture(t, true)
	f.run()
	eventually(t, 30*time.Second, "the scheduler's merge of deep and compaction of frag16 to finish", func() bool {
		ts := tasksOf(f)
		done := func(k string) bool {
			for _, tk := range ts[k] {
				if tk.State == coord.StateDone {
					return true
				}
			}
			return false
		}
		// A compaction is followed by an index task (index after compaction)
		// and a cleanup task (what the compaction superseded goes once the
		// retention window allows).
		return done("merge/deep") && done("compact/frag16") && done("index/frag16") && done("cleanup/frag16")
	})
	time.Sleep(time.Second) // a few more scheduler rounds
	ts := tasksOf(f)
	for k, list := range ts {
		if k != "merge/deep" && k != "compact/frag16" && k != "index/frag16" && k != "cleanup/frag16" {
			t.Errorf("unexpected task %s: %+v", k, list)
		}
		for _, tk := range list {
			if tk.Source != "scheduler" {
				t.Errorf("task %s from %q", k, tk.Source)
			}
		}
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/deep?fresh=true", "", 200); x.PendingGenerations != 0 || x.Rows != 3 {
		t.Fatalf("deep after the scheduled merge %+v", x)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/frag16?fresh=true", "", 200); x.Fragments >= 16 || x.Rows != 16 || x.LastCompaction == nil || x.NeedsCompaction {
		t.Fatalf("frag16 after the scheduled compaction %+v", x)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/frag15?fresh=true", "", 200); x.Fragments != 15 || x.NeedsCompaction {
		t.Fatalf("frag15 %+v", x)
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/shallow?fresh=true", "", 200); x.PendingGenerations != 2 {
		t.Fatalf("shallow %+v", x)
	}
}

func TestSchedulerMaintenanceOff(t *testing.T) {
	f := schedulerFixture(t, false)
	f.run()
	eventually(t, 15*time.Second, "the statistics to show the backlog and the fragments", func() bool {
		p := call[listPage](f, "GET", "/api/v1/experiments", "", 200)
		d, c := byName(p, "deep"), byName(p, "frag16")
		return d != nil && c != nil && d.PendingGenerations == 3 && c.Fragments == 16 && c.NeedsCompaction
	})
	time.Sleep(1500 * time.Millisecond) // seven scheduler intervals
	if ts := tasksOf(f); len(ts) != 0 {
		t.Fatalf("maintenance off, yet tasks: %+v", ts)
	}
	// Explicit requests still run.
	reply := call[taskReply](f, "POST", "/api/v1/experiments/deep/merge", "", 202)
	f.waitTask(reply.Task.ID)
}

func TestTasksAPI(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.create(f.catalog("w1"), "exp")
	if ts := call[struct {
		Tasks []coord.Task `json:"tasks"`
	}](f, "GET", "/api/v1/tasks", "", 200); ts.Tasks == nil || len(ts.Tasks) != 0 {
		t.Fatalf("no tasks yet: %+v", ts)
	}
	for _, body := range []string{`{"kind":"vacuum","store":"exp"}`, `{"kind":"","store":"exp"}`, `{"kind":"merge","store":"exp","x":1}`, `not json`} {
		if e := call[errorBody](f, "POST", "/api/v1/tasks", body, 400); e.Error.Code != "INVALID_REQUEST" {
			t.Fatalf("%s: %+v", body, e)
		}
	}
	for _, body := range []string{`{"kind":"merge","store":"nope"}`, `{"kind":"compact","store":""}`} {
		if e := call[errorBody](f, "POST", "/api/v1/tasks", body, 404); e.Error.Code != "NOT_FOUND" {
			t.Fatalf("%s: %+v", body, e)
		}
	}
	tk := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"compact","store":"exp"}`, 201)
	if tk.Kind != coord.KindCompact || tk.Store != "exp" || tk.State != coord.StateQueued || tk.Source != "api" {
		t.Fatalf("created %+v", tk)
	}
	if again := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"compact","store":"exp"}`, 200); again.ID != tk.ID {
		t.Fatalf("second request made task %s, want the live %s", again.ID, tk.ID)
	}
	if via := call[taskReply](f, "POST", "/api/v1/experiments/exp/compact", "", 200); via.Created || via.Task.ID != tk.ID {
		t.Fatalf("experiment compact while one is live: %+v", via)
	}
	merge := call[taskReply](f, "POST", "/api/v1/experiments/exp/merge", "", 202)
	if !merge.Created || merge.Task.ID == tk.ID {
		t.Fatalf("merge %+v", merge)
	}
	if got := call[coord.Task](f, "GET", "/api/v1/tasks/"+tk.ID, "", 200); got.ID != tk.ID || got.State != coord.StateQueued {
		t.Fatalf("get %+v", got)
	}
	list := call[struct {
		Tasks []coord.Task `json:"tasks"`
	}](f, "GET", "/api/v1/tasks", "", 200)
	if len(list.Tasks) != 2 || list.Tasks[0].ID != merge.Task.ID || list.Tasks[1].ID != tk.ID {
		t.Fatalf("list (newest first) %+v", list)
	}
	if e := call[errorBody](f, "GET", "/api/v1/tasks/no-such-task", "", 404); e.Error.Code != "NOT_FOUND" {
		t.Fatalf("unknown task: %+v", e)
	}
	f.status("POST", "/api/v1/experiments/nope/merge", "", 404)
	f.status("POST", "/api/v1/experiments/nope/compact", "", 404)
}

func TestWorkersAPI(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	type workersReply struct {
		Workers []coord.WorkerInfo `json:"workers"`
	}
	if w := call[workersReply](f, "GET", "/api/v1/workers", "", 200); w.Workers == nil || len(w.Workers) != 0 {
		t.Fatalf("no workers: %+v", w)
	}
	register := func(id string) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			_ = f.c.RegisterWorker(ctx, coord.WorkerInfo{InstanceID: id, ShardID: rollout.ShardID(id), Endpoint: "http://" + id + ":3000", Version: "v-test"}, 10)
			close(done)
		}()
		t.Cleanup(func() { cancel(); <-done })
		return cancel, done
	}
	stopA, doneA := register("wa")
	register("wb")
	var w workersReply
	eventually(t, 10*time.Second, "two workers listed", func() bool {
		w = call[workersReply](f, "GET", "/api/v1/workers", "", 200)
		return len(w.Workers) == 2
	})
	if a := w.Workers[0]; a.InstanceID != "wa" || a.ShardID != rollout.ShardID("wa") || a.Endpoint != "http://wa:3000" || a.Version != "v-test" || a.RegisteredAt.IsZero() {
		t.Fatalf("worker %+v", a)
	}
	stopA()
	<-doneA
	if w := call[workersReply](f, "GET", "/api/v1/workers", "", 200); len(w.Workers) != 1 || w.Workers[0].InstanceID != "wb" {
		t.Fatalf("after wa left: %+v", w)
	}
}

// Before the fix, every list call started a background refresh of every
// registered store without statistics, even when one was already running:
// a page polled during a cold start (or with a slow store) piled up
// duplicate reads of each store.
func TestRegression_ListDoesNotPileUpRefreshes(t *testing.T) {
	slow := &slowStore{delay: 5 * time.Second, slow: map[string]bool{"cold.rollout.lance/": true}}
	f := newFixture(t, fixtureOpts{
		cfg:  master.Config{RefreshInterval: time.Hour, StatsTimeout: 500 * time.Millisecond},
		wrap: func(s objstore.Store) objstore.Store { slow.Store = s; return slow },
	})
	f.create(f.catalog("w1"), "cold")
	if err := f.c.RegisterStore(f.ctx, "cold"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		p := call[listPage](f, "GET", "/api/v1/experiments", "", 200)
		if x := byName(p, "cold"); x == nil || !x.Stale {
			t.Fatalf("cold store %+v", x)
		}
	}
	time.Sleep(1500 * time.Millisecond) // every refresh started has reached storage and timed out
	if n := slow.maxReads(); n != 1 {
		t.Fatalf("10 list calls read the cold store %d times, want one refresh", n)
	}
}

// TestReferenceMasterCalls replays the reference master's browser calls:
// the records listing (default fragments, its page fields), a trajectory,
// a task posted with the reference's names (kind merge_wal, target), and a
// query's {columns, rows, row_count, truncated}.
func TestReferenceMasterCalls(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour, SchedulerInterval: 200 * time.Millisecond}})
	recordsStore(t, f)
	var page map[string]json.RawMessage
	page = call[map[string]json.RawMessage](f, "GET", "/api/v1/experiments/rec/records", "", 200)
	for _, k := range []string{"records", "has_more", "limit", "offset", "source"} {
		if _, ok := page[k]; !ok {
			t.Fatalf("records page without %q: %v", k, page)
		}
	}
	if string(page["source"]) != `"fragments"` || string(page["limit"]) != "25" {
		t.Fatalf("default page: source %s limit %s", page["source"], page["limit"])
	}
	tr := call[api.TrajectoryResponse](f, "GET", "/api/v1/experiments/rec/trajectories/ro-b", "", 200)
	if tr.Count != 3 || tr.Records[0].ID != "b-000" || tr.RolloutID != "ro-b" {
		t.Fatalf("trajectory %+v", tr)
	}
	f.run()
	tk := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"merge_wal","target":"rec"}`, 201)
	if tk.Kind != coord.KindMerge || tk.Store != "rec" {
		t.Fatalf("task %+v", tk)
	}
	if e := call[errorBody](f, "POST", "/api/v1/tasks", `{"kind":"merge","store":"rec","target":"other"}`, 400); e.Error.Code != "INVALID_REQUEST" {
		t.Fatalf("disagreeing store and target: %+v", e)
	}
	done := f.waitTask(tk.ID)
	var res api.TaskResult
	if err := json.Unmarshal(done.Result, &res); err != nil || res.Rows != 4 {
		t.Fatalf("merge result %s (%v)", done.Result, err)
	}
	q := call[map[string]json.RawMessage](f, "POST", "/api/v1/experiments/rec/query", `{"sql":"SELECT count(*) AS n FROM records"}`, 200)
	for _, k := range []string{"columns", "rows", "row_count", "truncated"} {
		if _, ok := q[k]; !ok {
			t.Fatalf("query answer without %q: %v", k, q)
		}
	}
	if e := call[errorBody](f, "POST", "/api/v1/experiments/rec/query", `{"sql":"DELETE FROM records"}`, 400); e.Error.Code != "INVALID_REQUEST" {
		t.Fatalf("non-SELECT: %+v", e)
	}
}

// TestSchedulerCleansUpPeriodically: besides the cleanup after a
// compaction, the scheduler enqueues a cleanup of every store once per
// CleanupEvery (the first a period after the master first saw the store),
// and the task reports what it removed.
func TestSchedulerCleansUpPeriodically(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{
		Maintenance: true, MergeThreshold: 100, CleanupEvery: 500 * time.Millisecond,
		RefreshInterval: 100 * time.Millisecond, SchedulerInterval: 100 * time.Millisecond,
	}})
	w := f.catalog("w-clean")
	fragments(t, f.create(w, "old"), 3) // three merges: versions to clean
	if err := w.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.run()
	var got coord.Task
	eventually(t, 30*time.Second, "a periodic cleanup of old to finish", func() bool {
		for _, tk := range tasksOf(f)["cleanup/old"] {
			if tk.State == coord.StateDone {
				got = tk
				return true
			}
		}
		return false
	})
	var res api.TaskResult
	if err := json.Unmarshal(got.Result, &res); err != nil || res.Version == 0 || got.Source != "scheduler" {
		t.Fatalf("cleanup task %+v: %v", got, err)
	}
}
