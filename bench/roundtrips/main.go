// Command roundtrips measures the object-store requests and the latency of
// each worker operation through test/latencyproxy, at several added
// latencies per request. It starts the proxy in process (in front of the
// S3 server named by AWS_ENDPOINT_URL) and a real worker (bin/lance-context
// worker) whose DATA_DIR is an s3:// prefix reached through the proxy,
// loads a merged store, then times each operation, warm (the same worker,
// the operation run once before) and cold (a restarted worker).
//
// bench/roundtrips.sh starts versitygw and runs it; see bench/README.md.
//
//	go run ./bench/roundtrips -bin bin/lance-context -url s3://lc-test/bench -delays 0,20ms
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/lance-context/lance-context/objstore/s3"
	"github.com/lance-context/lance-context/test/latencyproxy"
)

type config struct {
	bin         string
	url         string
	delays      []time.Duration
	records     int
	batch       int
	samples     int
	coldSamples int
	mergeGens   int
	pending     int
	lancedb     string        // the Node script of the LanceDB side; "" skips it
	trace       string        // operations whose requests are printed (-trace)
	interval    time.Duration // > 0: also time the warm reads with this read consistency interval
	data        string        // reuse this s3:// prefix (loaded by an earlier run with the same -records) instead of a fresh one
	only        string        // measure only the reads whose name contains this
	start       bool          // measure the worker's start-up warm and the reads after it
}

func main() {
	var c config
	var delays string
	flag.StringVar(&c.bin, "bin", "bin/lance-context", "worker binary")
	flag.StringVar(&c.url, "url", os.Getenv("LC_TEST_S3_URL"), "s3://bucket/prefix for the data (a fresh prefix is made under it)")
	flag.StringVar(&delays, "delays", "0,20ms", "latencies added per request, comma-separated")
	flag.IntVar(&c.records, "records", 20000, "records in the merged store")
	flag.IntVar(&c.batch, "batch", 1000, "records per append while loading")
	flag.IntVar(&c.samples, "samples", 9, "warm samples per operation")
	flag.IntVar(&c.coldSamples, "cold-samples", 3, "cold samples (worker restarts) per operation")
	flag.IntVar(&c.mergeGens, "merge-generations", 50, "pending generations of the merge measurement")
	flag.IntVar(&c.pending, "pending", 5, "pending generations left over the merged store (2 records each, ids spanning the table's, so every one is a candidate of a get)")
	flag.StringVar(&c.lancedb, "lancedb", "test/interop/bench_s3.mjs", "Node script timing LanceDB 0.31 on the same table (needs test/interop/node_modules); empty skips it")
	flag.StringVar(&c.trace, "trace", "", "print to stderr the object-store requests (start, end, depth, kind, key, range, bytes) of the cold and after-warm samples of operations whose name contains this")
	flag.StringVar(&c.data, "data", "", "s3:// prefix of the data to use as is: a store an earlier run with the same -records and -pending loaded there is reused (a 10M-row load takes ~11 minutes); empty makes a fresh prefix under -url")
	flag.StringVar(&c.only, "only", "", "measure only the reads whose name contains this (appends and merges are skipped)")
	flag.BoolVar(&c.start, "start", true, "also measure the worker's start-up warm and the first reads after it")
	flag.DurationVar(&c.interval, "read-consistency-interval", 0, "when > 0, also time the warm reads of a worker with ROLLOUT_READ_CONSISTENCY_INTERVAL set to it (e.g. 1s), beside the default (0)")
	flag.Parse()
	for _, d := range strings.Split(delays, ",") {
		if d == "0" {
			d = "0s"
		}
		v, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			fail(fmt.Errorf("-delays: %w", err))
		}
		c.delays = append(c.delays, v)
	}
	if !strings.HasPrefix(c.url, "s3://") {
		fail(fmt.Errorf("-url (or LC_TEST_S3_URL) must be s3://bucket/prefix, got %q", c.url))
	}
	if err := run(context.Background(), c); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "roundtrips:", err)
	os.Exit(1)
}

// sample is one timed operation.
type sample struct {
	ms         float64
	requests   int
	sequential int
	byOp       map[latencyproxy.Op]int
	bytesRead  int64
	// When the answer came: what the caller waited for (background work
	// started by then, such as an index prewarm, counts in part).
	answerRequests, answerSequential int
	answerBytes                      int64
}

// result is one row of the report.
type result struct {
	Delay      string                  `json:"delay"`
	Op         string                  `json:"op"`
	Samples    int                     `json:"samples"`
	P50MS      float64                 `json:"p50_ms"`
	Requests   int                     `json:"requests"`   // of the median sample
	Sequential int                     `json:"sequential"` // of the median sample
	ByOp       map[latencyproxy.Op]int `json:"by_op"`
	BytesRead  int64                   `json:"bytes_read"` // response bodies of the median sample
	// The same counted when the answer came (Requests, Sequential and
	// BytesRead go on until the worker is idle: background work too).
	AnswerRequests   int   `json:"answer_requests"`
	AnswerSequential int   `json:"answer_sequential"`
	AnswerBytesRead  int64 `json:"answer_bytes_read"`
}

type bench struct {
	tracing string // the operation whose samples print their requests (-trace)
	cfg     config
	proxy   *latencyproxy.Proxy
	proxyEP string
	adminEP string // the proxy's admin handler (counters for the LanceDB script)
	dataURL string
	worker  *exec.Cmd
	env     []string // extra environment of the worker
	base    string   // worker URL
	logf    *os.File
	client  *http.Client
	nextID  int
}

func run(ctx context.Context, cfg config) error {
	target, err := url.Parse(s3.ConfigFromEnv().Endpoint)
	if err != nil || target.Host == "" {
		return fmt.Errorf("AWS_ENDPOINT_URL must name the S3 server (eval \"$(scripts/versitygw.sh env DIR)\")")
	}
	b := &bench{cfg: cfg, proxy: latencyproxy.New(target, 0), client: &http.Client{Timeout: 5 * time.Minute}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b.proxy, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	b.proxyEP = "http://" + ln.Addr().String()
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	adm := &http.Server{Handler: b.proxy.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	go adm.Serve(aln)
	defer adm.Close()
	b.adminEP = "http://" + aln.Addr().String()
	var rnd [4]byte
	rand.Read(rnd[:])
	b.dataURL = strings.TrimSuffix(cfg.url, "/") + "/roundtrips-" + hex.EncodeToString(rnd[:])
	if cfg.data != "" {
		b.dataURL = strings.TrimSuffix(cfg.data, "/")
	}
	if b.logf, err = os.CreateTemp("", "roundtrips-worker-*.log"); err != nil {
		return err
	}
	slog.Info("worker log", "path", b.logf.Name(), "data", b.dataURL)
	if err := b.startWorker(); err != nil {
		return err
	}
	defer b.stopWorker()

	if _, err := b.call(ctx, "GET", store, nil); err != nil || cfg.data == "" {
		if err := b.load(ctx); err != nil {
			return err
		}
	} else {
		slog.Info("reusing the loaded store", "data", b.dataURL)
	}
	var all []result
	for _, d := range cfg.delays {
		b.proxy.SetDelay(d)
		rs, err := b.measure(ctx, d)
		if err != nil {
			return err
		}
		all = append(all, rs...)
		printTable(d, rs)
		if cfg.interval > 0 {
			is, err := b.measureInterval(ctx, d)
			if err != nil {
				return err
			}
			all = append(all, is...)
			printTable(d, is)
		}
		if cfg.lancedb != "" {
			ls, err := b.lanceDB(ctx, d)
			if err != nil {
				return err
			}
			all = append(all, ls...)
			printTable(d, ls)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range all {
		enc.Encode(r)
	}
	return nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (b *bench) startWorker() error {
	addr, err := freePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(b.cfg.bin, "worker")
	cmd.Env = append(os.Environ(),
		"DATA_DIR="+b.dataURL, "LISTEN="+addr, "INSTANCE_ID=bench",
		"AWS_ENDPOINT_URL="+b.proxyEP, "AWS_ENDPOINT_URL_S3="+b.proxyEP,
		// No background work: the merge by age would fold the pending
		// generations a read is measured over (and count its requests
		// with a read's), the idle close would make a warm read cold.
		"ROLLOUT_FLUSH_INTERVAL_SECS=0", "ROLLOUT_MERGE_AFTER_GENERATIONS=0", "ROLLOUT_CLEANUP_INTERVAL_SECS=0",
		"LC_MERGE_AFTER_AGE_SECS=0", "LC_VERSION_CLEANUP_INTERVAL_SECS=0", "LC_STORE_IDLE_CLOSE_SECS=0",
		// A cold read is a cold process's: no start-up warm (measured on
		// its own, measureStart).
		"LC_WARM_MAX_STORES=0",
		"ETCD_ENDPOINTS=",
	)
	cmd.Env = append(cmd.Env, b.env...)
	cmd.Stdout, cmd.Stderr = b.logf, b.logf
	if err := cmd.Start(); err != nil {
		return err
	}
	b.worker, b.base = cmd, "http://"+addr
	for range 300 {
		resp, err := http.Get(b.base + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("worker did not answer on %s (log %s)", addr, b.logf.Name())
}

// measureStart times a worker's start up to /readyz 200 (its start-up
// warm: what it reads ahead, at this latency), then, on a new worker each
// time, the first read of each kind once it is ready. A build without
// /readyz (404) is taken as ready at its first answer.
func (b *bench) measureStart(ctx context.Context, delay time.Duration, reads []namedOp) ([]result, error) {
	env := b.env
	b.env = append(slices.Clip(env), "LC_WARM_MAX_STORES=32")
	defer func() { b.env = env }()
	var out []result
	var starts []sample
	for i := -1; i < len(reads); i++ {
		b.stopWorker()
		b.proxy.SetDelay(delay)
		if err := b.proxy.WaitIdle(ctx, 400*time.Millisecond); err != nil {
			return nil, err
		}
		b.proxy.Reset()
		if i < 0 {
			b.traceOn("worker start to ready")
		}
		t0 := time.Now()
		if err := b.startWorker(); err != nil {
			return nil, err
		}
		if err := b.waitReady(ctx); err != nil {
			return nil, err
		}
		el := time.Since(t0)
		st := b.proxy.Stats()
		if b.tracing != "" {
			printTrace(b.tracing, st.Trace)
			b.traceOn("")
		}
		starts = append(starts, sample{ms: float64(el.Microseconds()) / 1000, requests: st.Requests, sequential: st.Sequential, byOp: st.ByOp, bytesRead: st.BytesOut,
			answerRequests: st.Requests, answerSequential: st.Sequential, answerBytes: st.BytesOut})
		if i < 0 {
			continue // the first start only warms
		}
		b.traceOn(reads[i].name + " (after start-up warm)")
		s, err := b.timed(ctx, reads[i].op)
		b.traceOn("")
		if err != nil {
			return nil, fmt.Errorf("%s (after start-up warm): %w", reads[i].name, err)
		}
		out = append(out, summarize(delay, reads[i].name+" (after start-up warm)", []sample{s}))
	}
	return append([]result{summarize(delay, "worker start to ready (start-up warm)", starts)}, out...), nil
}

// waitReady polls /readyz until it answers 200 (or 404: a build without it).
func (b *bench) waitReady(ctx context.Context) error {
	for range 6000 {
		resp, err := http.Get(b.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("worker not ready after 5 minutes (log %s)", b.logf.Name())
}

func (b *bench) stopWorker() {
	if b.worker == nil {
		return
	}
	b.worker.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { b.worker.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.worker.Process.Kill()
		<-done
	}
	b.worker = nil
}

func (b *bench) restartWorker() error {
	b.stopWorker()
	return b.startWorker()
}

// call does one request and fails on a non-2xx answer.
func (b *bench) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, out)
	}
	return out, nil
}

// The measured reads go to store "bench", a merged store with -pending
// generations over it that no measurement merges; appends go to "appends" and each merge measurement to a
// store of its own, so every latency reads the same table.
const (
	store        = "/api/v1/rollouts/bench"
	appendsStore = "/api/v1/rollouts/appends"
)

// record is a rollout record of about 1 KB: text, 64 tokens, a reward.
func record(id, rolloutID string, seq int) map[string]any {
	toks := make([]int, 64)
	for i := range toks {
		toks[i] = i * seq
	}
	return map[string]any{
		"id": id, "rollout_id": rolloutID, "sequence_order": seq, "role": "assistant",
		"content":       strings.Repeat("the quick brown fox jumps over the lazy dog ", 16),
		"output_tokens": toks, "reward": 0.5,
	}
}

// load creates the store and fills it with cfg.records records in
// trajectories of 10, merged into the base table (no latency added).
func (b *bench) load(ctx context.Context) error {
	b.proxy.SetDelay(0)
	start := time.Now()
	for _, name := range []string{"bench", "appends"} {
		if _, err := b.call(ctx, "POST", "/api/v1/rollouts", map[string]any{"name": name}); err != nil {
			return err
		}
	}
	for i := 0; i < b.cfg.records; i += b.cfg.batch {
		var recs []map[string]any
		for j := i; j < min(i+b.cfg.batch, b.cfg.records); j++ {
			recs = append(recs, record(fmt.Sprintf("rec-%06d", j), fmt.Sprintf("traj-%05d", j/10), j%10))
		}
		if _, err := b.call(ctx, "POST", store+"/records?flush=true", map[string]any{"records": recs}); err != nil {
			return err
		}
	}
	if err := b.mergeAll(ctx, store); err != nil {
		return err
	}
	// Pending generations over the base: ids at both ends of the table's
	// (so each generation's id range holds every base id and a get must
	// look in all of them), in a trajectory of their own.
	for g := range b.cfg.pending {
		recs := []any{
			record(fmt.Sprintf("rec-%06d-p%d", 0, g), "traj-pending", 2*g),
			record(fmt.Sprintf("rec-%06d-p%d", b.cfg.records-1, g), "traj-pending", 2*g+1),
		}
		if _, err := b.call(ctx, "POST", store+"/records?flush=true", map[string]any{"records": recs}); err != nil {
			return err
		}
	}
	slog.Info("loaded", "records", b.cfg.records, "pending_generations", b.cfg.pending, "secs", time.Since(start).Seconds())
	return nil
}

func (b *bench) mergeAll(ctx context.Context, store string) error {
	for range 10000 {
		out, err := b.call(ctx, "POST", store+"/merge", nil)
		if err != nil {
			return err
		}
		var res struct {
			Remaining   int `json:"remaining"`
			Generations int `json:"generations"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			return err
		}
		if res.Remaining == 0 {
			return nil
		}
	}
	return fmt.Errorf("merge never finished")
}

// timed runs op with the proxy's counters reset and returns its sample.
// Requests the worker makes in the background after an operation (a
// flush's cleanup, the WAL writer's hint, at most 4 a second) are counted
// with it: the counters are read once the proxy has been idle for 400 ms,
// and reset only after such a pause.
func (b *bench) timed(ctx context.Context, op func(context.Context) error) (sample, error) {
	if err := b.proxy.WaitIdle(ctx, 400*time.Millisecond); err != nil {
		return sample{}, err
	}
	b.proxy.Reset()
	start := time.Now()
	if err := op(ctx); err != nil {
		return sample{}, err
	}
	el := time.Since(start)
	at := b.proxy.Stats()
	if err := b.proxy.WaitIdle(ctx, 400*time.Millisecond); err != nil {
		return sample{}, err
	}
	st := b.proxy.Stats()
	if b.tracing != "" {
		printTrace(b.tracing, st.Trace)
	}
	return sample{ms: float64(el.Microseconds()) / 1000, requests: st.Requests, sequential: st.Sequential, byOp: st.ByOp, bytesRead: st.BytesOut,
		answerRequests: at.Requests, answerSequential: at.Sequential, answerBytes: at.BytesOut}, nil
}

// traceOn makes the next timed samples print their requests, as name,
// when -trace matches name ("" turns it off).
func (b *bench) traceOn(name string) {
	if name != "" && (b.cfg.trace == "" || !strings.Contains(name, b.cfg.trace)) {
		name = ""
	}
	b.tracing = name
	b.proxy.SetTrace(name != "")
}

// printTrace lists a sample's requests, in the order they ended.
func printTrace(name string, tr []latencyproxy.TraceEntry) {
	fmt.Fprintf(os.Stderr, "\ntrace of %s: %d requests\n", name, len(tr))
	for _, e := range tr {
		fmt.Fprintf(os.Stderr, "  %8.1f %8.1f  d%-3d %-15s %9d  %s %s\n", e.StartMS, e.EndMS, e.Depth, e.Op, e.Bytes, e.Key, e.Range)
	}
}

func summarize(delay time.Duration, name string, ss []sample) result {
	slices.SortFunc(ss, func(a, b sample) int {
		switch {
		case a.ms < b.ms:
			return -1
		case a.ms > b.ms:
			return 1
		}
		return 0
	})
	m := ss[(len(ss)-1)/2]
	return result{Delay: delay.String(), Op: name, Samples: len(ss), P50MS: m.ms, Requests: m.requests, Sequential: m.sequential, ByOp: m.byOp, BytesRead: m.bytesRead,
		AnswerRequests: m.answerRequests, AnswerSequential: m.answerSequential, AnswerBytesRead: m.answerBytes}
}

func (b *bench) measure(ctx context.Context, delay time.Duration) ([]result, error) {
	appendOne := func(flush bool) func(context.Context) error {
		return func(ctx context.Context) error {
			b.nextID++
			q := ""
			if flush {
				q = "?flush=true"
			}
			_, err := b.call(ctx, "POST", appendsStore+"/records"+q, map[string]any{"records": []any{record(fmt.Sprintf("one-%d-%d", delay.Milliseconds(), b.nextID), "one", 0)}})
			return err
		}
	}
	reads := b.reads()
	var ops []namedOp
	if b.cfg.only == "" {
		ops = []namedOp{
			{"append 1 record", appendOne(false)},
			{"append 1 record ?flush=true", appendOne(true)},
		}
	}
	ops = append(ops, reads...)
	var out []result
	for _, o := range ops {
		if err := o.op(ctx); err != nil { // warm up
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		var ss []sample
		for range b.cfg.samples {
			s, err := b.timed(ctx, o.op)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			ss = append(ss, s)
		}
		out = append(out, summarize(delay, o.name+" (warm)", ss))
	}
	// Cold: a restarted worker, the first request of its kind. Without
	// the index prewarm a first lookup starts (a background read of the
	// whole index, ~25 MB at 1M rows in ~100 sequential requests, which
	// the counts at the answer would take for the read's own): the rows
	// give the read's own path; the start-up warm is measured after.
	env := b.env
	b.env = append(slices.Clip(env), "LC_INDEX_PREWARM=off")
	for _, o := range reads {
		var ss []sample
		for i := range b.cfg.coldSamples {
			b.proxy.SetDelay(0)
			if err := b.restartWorker(); err != nil {
				return nil, err
			}
			b.proxy.SetDelay(delay)
			if i == 0 {
				b.traceOn(o.name + " (cold)")
			}
			s, err := b.timed(ctx, o.op)
			b.traceOn("")
			if err != nil {
				return nil, fmt.Errorf("%s (cold): %w", o.name, err)
			}
			ss = append(ss, s)
		}
		out = append(out, summarize(delay, o.name+" (cold)", ss))
	}
	b.env = env
	// A worker's start with its start-up warm, at this latency, and the
	// first read of each kind once /readyz says it is ready.
	if b.cfg.start {
		start, err := b.measureStart(ctx, delay, reads)
		if err != nil {
			return nil, err
		}
		out = append(out, start...)
	}
	// A merge of cfg.mergeGens pending generations (each from one flushed
	// append), every pass until none is left.
	if b.cfg.mergeGens > 0 && b.cfg.only == "" {
		b.proxy.SetDelay(0)
		name := fmt.Sprintf("merge%d", delay.Milliseconds())
		ms := "/api/v1/rollouts/" + name
		if _, err := b.call(ctx, "POST", "/api/v1/rollouts", map[string]any{"name": name}); err != nil {
			return nil, err
		}
		for g := range b.cfg.mergeGens {
			b.nextID++
			if _, err := b.call(ctx, "POST", ms+"/records?flush=true", map[string]any{"records": []any{record(fmt.Sprintf("gen-%d-%d", delay.Milliseconds(), g), "gen", g)}}); err != nil {
				return nil, err
			}
		}
		b.proxy.SetDelay(delay)
		s, err := b.timed(ctx, func(ctx context.Context) error { return b.mergeAll(ctx, ms) })
		if err != nil {
			return nil, err
		}
		out = append(out, summarize(delay, fmt.Sprintf("merge %d generations (all passes)", b.cfg.mergeGens), []sample{s}))
	}
	return out, nil
}

type namedOp = struct {
	name string
	op   func(context.Context) error
}

// reads are the measured reads of store "bench".
func (b *bench) reads() []namedOp {
	get := func(path string) func(context.Context) error {
		return func(ctx context.Context) error { _, err := b.call(ctx, "GET", path, nil); return err }
	}
	all := []namedOp{
		{"stats", get(store)},
		{"page fragments (25)", get(store + "/records?source=fragments&limit=25")},
		{"page all (25)", get(store + "/records?source=all&limit=25")},
		{"page filtered by rollout_id (25)", get(store + fmt.Sprintf("/records?source=all&limit=25&rollout_id=traj-%05d", b.cfg.records/10*211/1000))},
		{"get by id", get(store + fmt.Sprintf("/records/rec-%06d", b.cfg.records*617/1000))},
		{"trajectory (10 records)", get(store + fmt.Sprintf("/trajectories/traj-%05d", b.cfg.records/10*389/1000))},
	}
	return slices.DeleteFunc(all, func(o namedOp) bool { return !strings.Contains(o.name, b.cfg.only) })
}

// measureInterval times the warm reads of a worker started with
// ROLLOUT_READ_CONSISTENCY_INTERVAL=cfg.interval (then restarts the worker
// without it). Each sample follows an untimed run of the same read by
// the counters' idle wait (0.4 s and more; the samples themselves are
// further apart), so with an interval above that it reuses the metadata
// that run validated, as a worker serving a steady stream of reads does.
// A read after the interval has passed costs what a strong read does.
func (b *bench) measureInterval(ctx context.Context, delay time.Duration) ([]result, error) {
	b.proxy.SetDelay(0)
	b.env = []string{"ROLLOUT_READ_CONSISTENCY_INTERVAL=" + b.cfg.interval.String()}
	if err := b.restartWorker(); err != nil {
		return nil, err
	}
	defer func() {
		b.proxy.SetDelay(0)
		b.env = nil
		if err := b.restartWorker(); err != nil {
			slog.Error("restart worker", "err", err)
		}
	}()
	b.proxy.SetDelay(delay)
	var out []result
	for _, o := range b.reads() {
		if err := o.op(ctx); err != nil { // warm up
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		var ss []sample
		listed := 0 // samples that validated again (the interval had passed)
		for range b.cfg.samples {
			if err := o.op(ctx); err != nil { // validates
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			s, err := b.timed(ctx, o.op)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			if s.byOp[latencyproxy.OpList] > 0 {
				listed++
			}
			ss = append(ss, s)
		}
		out = append(out, summarize(delay, fmt.Sprintf("%s (warm, interval %v, %d/%d listed)", o.name, b.cfg.interval, listed, len(ss)), ss))
	}
	return out, nil
}

// lanceDB times LanceDB 0.31 on the same table through the same proxy
// (cfg.lancedb, see test/interop/bench_s3.mjs), with its default
// consistency (no version check on a held table) and with a version check
// on every read (as ours do).
func (b *bench) lanceDB(ctx context.Context, delay time.Duration) ([]result, error) {
	b.proxy.SetDelay(delay)
	var out []result
	for _, mode := range []string{"default", "strong"} {
		cmd := exec.CommandContext(ctx, "node", b.cfg.lancedb, b.dataURL, "bench.rollout",
			"--id", fmt.Sprintf("rec-%06d", b.cfg.records*617/1000),
			"--rollout", fmt.Sprintf("traj-%05d", b.cfg.records/10*389/1000),
			"--samples", fmt.Sprint(b.cfg.samples), "--admin", b.adminEP, "--consistency", mode)
		cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+b.proxyEP)
		cmd.Stderr = b.logf
		js, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("lancedb (%s): %w (log %s)", b.cfg.lancedb, err, b.logf.Name())
		}
		var res struct {
			UsesIndex bool `json:"uses_index"`
			Ops       map[string]struct {
				P50MS      float64 `json:"p50_ms"`
				Requests   int     `json:"requests"`
				Sequential int     `json:"sequential"`
				Samples    int     `json:"samples"`
			} `json:"ops"`
		}
		if err := json.Unmarshal(js, &res); err != nil {
			return nil, fmt.Errorf("lancedb: %w: %s", err, js)
		}
		for _, op := range []struct{ key, name string }{
			{"count", "count"}, {"get", "get by id"}, {"page", "page (25)"}, {"traj", "trajectory (10 records)"},
		} {
			o := res.Ops[op.key]
			name := fmt.Sprintf("lancedb %s (%s)", op.name, mode)
			if op.key == "get" && !res.UsesIndex {
				name += " [no index]"
			}
			out = append(out, result{Delay: delay.String(), Op: name, Samples: o.Samples, P50MS: o.P50MS, Requests: o.Requests, Sequential: o.Sequential})
		}
	}
	return out, nil
}

func printTable(delay time.Duration, rs []result) {
	fmt.Fprintf(os.Stderr, "\n+%v per request\n", delay)
	// "at answer" counts what was done when the answer came; the rest go
	// on until the worker is idle (background work the operation started).
	fmt.Fprintf(os.Stderr, "| %-38s | %8s | %10s | %9s | %9s | %17s | %s\n", "operation", "requests", "sequential", "p50 ms", "KiB read", "at answer: req/seq/KiB", "by kind")
	fmt.Fprintf(os.Stderr, "|%s|%s|%s|%s|%s|%s|---\n", strings.Repeat("-", 40), strings.Repeat("-", 10), strings.Repeat("-", 12), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 24))
	for _, r := range rs {
		var kinds []string
		for _, k := range []latencyproxy.Op{latencyproxy.OpList, latencyproxy.OpHead, latencyproxy.OpGet, latencyproxy.OpGetRange,
			latencyproxy.OpPut, latencyproxy.OpPutConditional, latencyproxy.OpMultipart, latencyproxy.OpDelete, latencyproxy.OpOther} {
			if n := r.ByOp[k]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			}
		}
		at := fmt.Sprintf("%d / %d / %.1f", r.AnswerRequests, r.AnswerSequential, float64(r.AnswerBytesRead)/1024)
		if r.AnswerRequests == 0 && r.Requests > 0 {
			at = "-" // not measured (LanceDB's script counts at the end only)
		}
		fmt.Fprintf(os.Stderr, "| %-38s | %8d | %10d | %9.1f | %9.1f | %22s | %s\n", r.Op, r.Requests, r.Sequential, r.P50MS, float64(r.BytesRead)/1024, at, strings.Join(kinds, ", "))
	}
}
