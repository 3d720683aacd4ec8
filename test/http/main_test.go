// Package httpe2e tests the worker's HTTP API end to end against the real
// binary: TestMain builds `lance-context` once, and each test runs
// `lance-context worker` as a child process on a free port, over local disk
// and, when LC_TEST_S3_URL is set (scripts/versitygw.sh env DIR), over an
// S3-compatible server. LC_REQUIRE_S3=1 turns the S3 skip into a failure.
package httpe2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the lance-context executable TestMain built.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lc-http-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "lance-context")
	build := exec.Command("go", "build", "-o", binary, "./cmd/lance-context")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build lance-context:", err)
		return 1
	}
	return m.Run()
}

// ---------------------------------------------------------------- backends

// backend is where a worker keeps its data.
type backend struct {
	name string
	// dataDir returns a fresh, empty data directory (a temp dir, or a new
	// prefix under LC_TEST_S3_URL).
	dataDir func(t *testing.T) string
}

var localBackend = backend{name: "local", dataDir: func(t *testing.T) string { return t.TempDir() }}

var s3Backend = backend{name: "s3", dataDir: func(t *testing.T) string {
	base := os.Getenv("LC_TEST_S3_URL")
	name := regexp.MustCompile(`[^A-Za-z0-9-]+`).ReplaceAllString(t.Name(), "-")
	return strings.TrimRight(base, "/") + "/" + strings.ToLower(name) + "-" + randHex(4)
}}

// forEachBackend runs fn as a subtest on local disk and on S3. The S3
// subtest skips when LC_TEST_S3_URL is unset (fails with LC_REQUIRE_S3=1).
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range []backend{localBackend, s3Backend} {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "s3" {
				requireS3(t)
			}
			fn(t, b)
		})
	}
}

func requireS3(t *testing.T) {
	t.Helper()
	if os.Getenv("LC_TEST_S3_URL") != "" {
		return
	}
	const why = "LC_TEST_S3_URL is not set (scripts/versitygw.sh start DIR; eval \"$(scripts/versitygw.sh env DIR)\")"
	if os.Getenv("LC_REQUIRE_S3") == "1" {
		t.Fatal(why + ", and LC_REQUIRE_S3=1")
	}
	t.Skip(why)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---------------------------------------------------------------- worker process

// workerProc is one running `lance-context worker`.
type workerProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	URL     string
	DataDir string
	env     map[string]string

	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
	err    error // the Wait result, once exited is closed
}

// workerEnvKeys are the variables the worker reads; the child gets only the
// values a test sets, never the developer's.
var workerEnvPrefixes = []string{"LC_API_TOKEN=", "LC_MAX_", "LC_HTTP_", "ROLLOUT_", "DATA_DIR=", "LISTEN=", "INSTANCE_ID=",
	"LC_MEMORY_", "LC_MEMTABLE_", "LC_INFLIGHT_", "LC_BLOB_", "LC_CLEANUP_", "LC_MERGE_", "LC_VERSION_", "GOMEMLIMIT=", "GOGC="}

// startWorker starts a worker on dataDir with the given extra environment
// (ROLLOUT_FLUSH_INTERVAL_SECS defaults to 3600 and INSTANCE_ID to
// "e2e-worker") and waits until it listens.
func startWorker(t *testing.T, dataDir string, env map[string]string) *workerProc {
	t.Helper()
	e := map[string]string{"ROLLOUT_FLUSH_INTERVAL_SECS": "3600", "INSTANCE_ID": "e2e-worker"}
	for k, v := range env {
		e[k] = v
	}
	w := &workerProc{t: t, DataDir: dataDir, env: e, exited: make(chan struct{})}
	w.start()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
		if t.Failed() {
			t.Logf("worker stderr (%s):\n%s", w.DataDir, w.Stderr())
		}
	})
	return w
}

var listeningRE = regexp.MustCompile(`worker listening"? url=(http://\S+)`)

func (w *workerProc) start() {
	t := w.t
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		skip := false
		for _, p := range workerEnvPrefixes {
			if strings.HasPrefix(kv, p) {
				skip = true
			}
		}
		if !skip {
			env = append(env, kv)
		}
	}
	for k, v := range w.env {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(binary, "worker", "--data-dir", w.DataDir, "--listen", "127.0.0.1:0")
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.cmd = cmd
	w.exited = make(chan struct{})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			w.mu.Lock()
			w.stderr.WriteString(line + "\n")
			w.mu.Unlock()
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	exited := w.exited
	go func() {
		err := cmd.Wait()
		pw.Close()
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(exited)
	}()
	select {
	case w.URL = <-urlc:
	case <-exited:
		t.Fatalf("worker exited at startup: %v\n%s", w.waitErr(), w.Stderr())
	case <-time.After(30 * time.Second):
		t.Fatalf("worker did not listen within 30s:\n%s", w.Stderr())
	}
	waitHealthy(t, w.URL)
}

// Stderr returns what the worker logged so far.
func (w *workerProc) Stderr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stderr.String()
}

func (w *workerProc) waitErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Kill sends SIGKILL and waits for the process to go.
func (w *workerProc) Kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}

// Terminate sends SIGTERM and waits up to timeout; it returns the exit
// error (nil for status 0).
func (w *workerProc) Terminate(timeout time.Duration) error {
	w.t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
		return w.waitErr()
	case <-time.After(timeout):
		_ = w.cmd.Process.Kill()
		<-w.exited
		return fmt.Errorf("worker did not exit within %v of SIGTERM", timeout)
	}
}

// Restart starts the worker again on the same data dir and environment
// (so the same INSTANCE_ID and shard). It must have exited.
func (w *workerProc) Restart() {
	w.t.Helper()
	select {
	case <-w.exited:
	default:
		w.t.Fatal("Restart: the worker is still running")
	}
	w.start()
}

func waitHealthy(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker at %s not healthy: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---------------------------------------------------------------- client

// client talks to one worker; Token, when set, is sent as a bearer token.
type client struct {
	t     *testing.T
	base  string
	Token string
	hc    *http.Client
}

func newClient(t *testing.T, w *workerProc) *client {
	return &client{t: t, base: w.URL, hc: &http.Client{Timeout: 60 * time.Second}}
}

// response is a decoded reply.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map (numbers as json.Number).
func (r *response) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("status %d: body is not a JSON object: %v: %q", r.Status, err, r.Body)
	}
	return m
}

func (c *client) do(method, path, ctype string, body []byte, hdr ...string) *response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// must asserts the status and returns the decoded JSON body.
func (c *client) must(want int, r *response, what string) map[string]any {
	c.t.Helper()
	if r.Status != want {
		c.t.Fatalf("%s: status %d, want %d: %s", what, r.Status, want, r.Body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.JSON(c.t)
}

func (c *client) createStore(name string) {
	c.t.Helper()
	c.must(http.StatusCreated, c.do("POST", "/api/v1/rollouts", "application/json", []byte(`{"name":"`+name+`"}`)), "create store "+name)
}

// appendJSON posts {"records": recs} with the query (e.g. "?flush=true").
func (c *client) appendJSON(store, query string, recs ...map[string]any) *response {
	c.t.Helper()
	body, err := json.Marshal(map[string]any{"records": recs})
	if err != nil {
		c.t.Fatal(err)
	}
	return c.do("POST", "/api/v1/rollouts/"+store+"/records"+query, "application/json", body)
}

func (c *client) flush(store string) {
	c.t.Helper()
	c.must(http.StatusOK, c.do("POST", "/api/v1/rollouts/"+store+"/flush", "", nil), "flush "+store)
}

// listAll pages through a store's records in source (query is extra
// parameters, e.g. "&rollout_id=x") and returns them.
func (c *client) listAll(store, source, query string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	for offset := 0; ; {
		r := c.must(http.StatusOK, c.do("GET", fmt.Sprintf("/api/v1/rollouts/%s/records?source=%s&limit=1000&offset=%d%s", store, source, offset, query), "", nil), "list "+store)
		recs, _ := r["records"].([]any)
		for _, x := range recs {
			out = append(out, x.(map[string]any))
		}
		offset += len(recs)
		if r["has_more"] != true {
			return out
		}
	}
}

// count returns how many records source holds (with extra query filters).
func (c *client) count(store, source, query string) int {
	c.t.Helper()
	return len(c.listAll(store, source, query))
}

// ids returns the ids of recs.
func ids(recs []map[string]any) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i], _ = r["id"].(string)
	}
	return out
}

// metrics scrapes /metrics and returns it as text.
func (c *client) metrics() string {
	c.t.Helper()
	r := c.do("GET", "/metrics", "", nil)
	if r.Status != http.StatusOK {
		c.t.Fatalf("/metrics: status %d", r.Status)
	}
	return string(r.Body)
}

// metricValue returns the value of an unlabelled sample (0 when absent).
func metricValue(t *testing.T, text, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("metric %s: %q: %v", name, line, err)
			}
			return v
		}
	}
	return 0
}

// expectError asserts the status and the error envelope
// {"error":{"code","message"}} and returns the code.
func expectError(t *testing.T, r *response, status int, what string) string {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q, want application/json", what, ct)
	}
	m := r.JSON(t)
	e, ok := m["error"].(map[string]any)
	if !ok || len(m) != 1 {
		t.Fatalf("%s: body is not the error envelope: %s", what, r.Body)
	}
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if code == "" || msg == "" {
		t.Fatalf("%s: envelope without code or message: %s", what, r.Body)
	}
	return code
}

// withTimeout returns a context that ends after d, cancelled at cleanup.
func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
