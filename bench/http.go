package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

// httpBenchMode is one load shape.
type httpBenchMode struct {
	Name        string
	Format      string // json or arrow
	Batch       int    // records per request
	Concurrency int
	Flush       bool // ?flush=true on every request
}

// httpBenchResult is what a mode prints.
type httpBenchResult struct {
	Mode           string  `json:"mode"`
	Format         string  `json:"format"`
	Batch          int     `json:"batch"`
	Concurrency    int     `json:"concurrency"`
	Flush          bool    `json:"flush"`
	Requests       int64   `json:"requests"`
	Records        int64   `json:"records"`
	Errors         int64   `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	DurationSecs   float64 `json:"duration_secs"`
	RecordsPerS    float64 `json:"records_per_s"`
	RequestsPerS   float64 `json:"requests_per_s"`
	MBPerS         float64 `json:"request_mb_per_s"`
	P50Ms          float64 `json:"p50_ms"`
	P90Ms          float64 `json:"p90_ms"`
	P99Ms          float64 `json:"p99_ms"`
	MaxMs          float64 `json:"max_ms"`
	CPUSecs        float64 `json:"process_cpu_secs"` // CPU of this process (client, and the worker when in-process) while measured
	CPUUsPerRecord float64 `json:"process_cpu_us_per_record"`
	// DeviceBytesPerRecord is what the data directory's block device took
	// in writes (from every process: WAL, generations, segment zero-fill,
	// journal) per record while measured: the cost that bounds the
	// disk-bound modes, and less noisy than their rates. 0 when unknown
	// (another machine's worker, tmpfs, S3).
	DeviceBytesPerRecord float64 `json:"device_write_bytes_per_record"`
	// RequestBytesPerRecord is what a record takes in the requests (the
	// record's size, as the client sends it), and DeviceBytesPerRequestByte
	// the device bytes over it: 1.0 means each record is written once, as
	// sent. WALEntryBytesPerRecord is what the WAL entries took per record
	// (the worker's lance_context_wal_entry_bytes; the rest of the device
	// bytes are generations, segment preallocation and the journal). 0 when
	// unknown.
	RequestBytesPerRecord     float64 `json:"request_bytes_per_record"`
	DeviceBytesPerRequestByte float64 `json:"device_write_bytes_per_request_byte,omitempty"`
	WALEntryBytesPerRecord    float64 `json:"wal_entry_bytes_per_record,omitempty"`
	StoredRows                int64   `json:"stored_rows"`      // rows the store holds after a final flush
	StoredExpected            int64   `json:"stored_rows_want"` // acknowledged records, warm-up included
}

func newBenchHTTPCmd() *cobra.Command {
	var (
		url, dataDir, token, modes, cpuProfile, memProfile, traceFile, interopDir, client string
		duration, warmup, flushEvery                                                      time.Duration
		conc, batchConc, arrowConc, arrowBatch, flushConc                                 int
		contentBytes                                                                      int
		lancedb                                                                           bool
		oneRowCommits, batchedCommits, lanceBatch                                         int
	)
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Load-test the worker's append API (in-process worker by default), side by side with LanceDB",
		Long: `Load-test the worker's append API and print one JSON line per mode.

Without --url it starts a worker in this process on --data-dir (default: a
temp dir, removed afterwards) with a one-hour flush interval, so appends are
measured without the sweeper, and with the worker command's GOGC and
GOMEMLIMIT defaults; the load generator runs in the same process.
Each mode writes to its own new store. Modes (--modes, comma-separated):

  single      1-record JSON posts, --concurrency connections (default 64)
  batch       100-record JSON posts, --batch-concurrency connections
  arrow       Arrow IPC posts of --arrow-batch records (default 1000), --arrow-concurrency connections
  flush-base  1-record JSON posts, --flush-concurrency connections (reference)
  flush       the same with ?flush=true: the latency a seal adds

The load generator (--client) is "conn" by default: each connection is a
goroutine writing requests and reading responses on its own keep-alive TCP
connection, like wrk, so that most of the machine's CPU goes to the worker
under test. "nethttp" uses Go's http.Client instead (its transport runs two
goroutines per connection and costs about as much CPU per request as the
server does).

Records carry ~1 KB of content (--content-bytes) and unique ids. Each mode
runs --warmup (not measured) and then --duration. Latencies are client-side
per request. stored_rows is read from the store's stats after a final flush.

With --lancedb (default on when test/interop/node_modules exists) it then
runs node test/interop/bench.mjs DIR --one-row-commits N and
--batched-commits N --batch B and prints the ratio of our single-record
records/s to LanceDB's one-row-commit rows/s, and a summary line with the
goals.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := json.NewEncoder(cmd.OutOrStdout())
			out.SetEscapeHTML(false)
			if !cmd.Flags().Changed("lancedb") {
				lancedb = haveLanceDB(interopDir) == nil
			} else if lancedb {
				if err := haveLanceDB(interopDir); err != nil {
					return err
				}
			}
			maxConc := max(conc, batchConc, arrowConc, flushConc)
			var wk *inprocWorker
			var devWrites func() int64
			if url == "" {
				if err := gctune.Tune(); err != nil { // as the worker command does
					return err
				}
				var err error
				if wk, err = startInprocWorker(ctx, dataDir, flushEvery); err != nil {
					return err
				}
				defer wk.stop()
				url, token = wk.url, wk.token
				devWrites = deviceWrites(wk.dataDir)
			} else if token == "" {
				token = os.Getenv("LC_API_TOKEN")
			}
			url = strings.TrimRight(url, "/")
			if client != "conn" && client != "nethttp" {
				return fmt.Errorf("--client %q: use conn or nethttp", client)
			}
			cl := newBenchClient(url, token, maxConc)
			cl.raw = client == "conn"

			all := map[string]httpBenchMode{
				"single":     {Name: "single", Format: "json", Batch: 1, Concurrency: conc},
				"batch":      {Name: "batch", Format: "json", Batch: 100, Concurrency: batchConc},
				"arrow":      {Name: "arrow", Format: "arrow", Batch: arrowBatch, Concurrency: arrowConc},
				"flush-base": {Name: "flush-base", Format: "json", Batch: 1, Concurrency: flushConc},
				"flush":      {Name: "flush", Format: "json", Batch: 1, Concurrency: flushConc, Flush: true},
			}
			var run []httpBenchMode
			for _, m := range strings.Split(modes, ",") {
				mode, ok := all[strings.TrimSpace(m)]
				if !ok {
					return fmt.Errorf("unknown mode %q: use single, batch, arrow, flush-base, flush", m)
				}
				run = append(run, mode)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer func() {
					pprof.StopCPUProfile()
					f.Close()
				}()
			}
			if traceFile != "" {
				f, err := os.Create(traceFile)
				if err != nil {
					return err
				}
				if err := trace.Start(f); err != nil {
					return err
				}
				defer func() {
					trace.Stop()
					f.Close()
				}()
			}
			pool := contentPool()
			results := map[string]*httpBenchResult{}
			runID := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
			for _, m := range run {
				res, err := runHTTPMode(ctx, cl, m, "bench-"+m.Name+"-"+runID, pool, contentBytes, warmup, duration, devWrites)
				if err != nil {
					return fmt.Errorf("mode %s: %w", m.Name, err)
				}
				results[m.Name] = res
				if err := out.Encode(res); err != nil {
					return err
				}
			}
			if cpuProfile != "" {
				pprof.StopCPUProfile()
			}
			if memProfile != "" {
				if err := writeHeapProfile(memProfile); err != nil {
					return err
				}
			}
			if f, b := results["flush"], results["flush-base"]; f != nil && b != nil {
				_ = out.Encode(map[string]any{
					"mode": "flush_added_latency", "concurrency": f.Concurrency,
					"p50_ms": f.P50Ms - b.P50Ms, "p90_ms": f.P90Ms - b.P90Ms, "p99_ms": f.P99Ms - b.P99Ms,
				})
			}

			var oneRow float64
			if lancedb {
				dir, err := os.MkdirTemp("", "lc-bench-lancedb-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				r1, err := runLanceDBBench(ctx, interopDir, dir, "--one-row-commits", strconv.Itoa(oneRowCommits))
				if err != nil {
					return err
				}
				r1["source"] = "lancedb"
				_ = out.Encode(r1)
				r2, err := runLanceDBBench(ctx, interopDir, dir, "--name", "bench_batched", "--batched-commits", strconv.Itoa(batchedCommits), "--batch", strconv.Itoa(lanceBatch))
				if err != nil {
					return err
				}
				r2["source"] = "lancedb"
				_ = out.Encode(r2)
				oneRow, _ = r1["rows_per_s"].(float64)
			}
			return out.Encode(httpBenchSummary(results, oneRow, wk != nil))
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "worker base URL (default: start one in this process)")
	f.StringVar(&dataDir, "data-dir", "", "data dir or s3:// URL of the in-process worker (default: a temp dir, removed afterwards)")
	f.StringVar(&token, "token", "", "bearer token for --url (default: $LC_API_TOKEN)")
	f.StringVar(&client, "client", "conn", "load generator: conn (one raw keep-alive connection per goroutine) or nethttp (http.Client)")
	f.StringVar(&modes, "modes", "single,batch,arrow,flush-base,flush", "modes to run, in order")
	f.DurationVar(&duration, "duration", 5*time.Second, "measured time per mode")
	f.DurationVar(&warmup, "warmup", time.Second, "unmeasured time before each mode")
	f.DurationVar(&flushEvery, "flush-interval", time.Hour, "flush sweeper interval of the in-process worker (seals, and so WAL collection, happen during the run when shorter than it)")
	f.IntVar(&conc, "concurrency", 64, "connections of the single mode")
	f.IntVar(&batchConc, "batch-concurrency", 8, "connections of the batch mode")
	f.IntVar(&arrowConc, "arrow-concurrency", 4, "connections of the arrow mode")
	f.IntVar(&arrowBatch, "arrow-batch", 1000, "records per Arrow IPC request")
	f.IntVar(&flushConc, "flush-concurrency", 4, "connections of the flush and flush-base modes")
	f.IntVar(&contentBytes, "content-bytes", 1024, "content bytes per record (varies +-12%)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the modes (client and in-process worker) to this file")
	f.StringVar(&memProfile, "memprofile", "", "write a heap profile after the modes to this file (go tool pprof -sample_index=alloc_space shows what they allocated)")
	f.StringVar(&traceFile, "trace", "", "write an execution trace of the modes to this file (go tool trace)")
	f.BoolVar(&lancedb, "lancedb", false, "also run the LanceDB baseline (default: when test/interop/node_modules exists)")
	f.StringVar(&interopDir, "interop-dir", filepath.Join("test", "interop"), "directory of bench.mjs and its node_modules")
	f.IntVar(&oneRowCommits, "lancedb-one-row-commits", 200, "LanceDB one-row commits")
	f.IntVar(&batchedCommits, "lancedb-batched-commits", 50, "LanceDB batched commits")
	f.IntVar(&lanceBatch, "lancedb-batch", 100, "rows per LanceDB batched commit")
	return cmd
}

// writeHeapProfile writes the heap profile, whose alloc_ samples count
// every allocation since the process started.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ---------------------------------------------------------------- worker

type inprocWorker struct {
	url, token string
	tmp        string
	dataDir    string
	cancel     context.CancelFunc
	done       chan error
}

// startInprocWorker serves the worker API from this process on a free
// loopback port, with the environment's configuration except the data dir
// and the flush interval.
func startInprocWorker(ctx context.Context, dataDir string, flushEvery time.Duration) (*inprocWorker, error) {
	cfg, err := worker.FromEnv()
	if err != nil {
		return nil, err
	}
	w := &inprocWorker{done: make(chan error, 1)}
	if dataDir == "" {
		if w.tmp, err = os.MkdirTemp("", "lc-bench-http-"); err != nil {
			return nil, err
		}
		dataDir = w.tmp
	}
	w.dataDir = dataDir
	cfg.DataDir = dataDir
	cfg.FlushInterval = flushEvery
	cfg.CleanupInterval = 0
	root, err := objstore.Open(ctx, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	catalog := rollout.NewCatalog(root, rollout.ShardID(cfg.InstanceID), cfg.StoreOptions())
	srv := worker.NewServer(cfg, catalog, worker.NewRegistry())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	w.url = "http://" + ln.Addr().String()
	w.token = cfg.APIToken
	go func() { w.done <- worker.Serve(sctx, ln, cfg, srv.Handler(), catalog, srv.RunSweepers) }()
	fmt.Fprintf(os.Stderr, "bench http: in-process worker on %s, data dir %s, GOMAXPROCS %d\n", w.url, dataDir, runtime.GOMAXPROCS(0))
	return w, nil
}

func (w *inprocWorker) stop() {
	w.cancel()
	if err := <-w.done; err != nil {
		fmt.Fprintln(os.Stderr, "bench http: worker shutdown:", err)
	}
	if w.tmp != "" {
		_ = os.RemoveAll(w.tmp)
	}
}

// ---------------------------------------------------------------- client

type benchClient struct {
	url, token string
	hc         *http.Client
	raw        bool // load through connClient instead of hc
}

// poster sends one POST of the load and returns the status and body.
type poster interface {
	post(ctx context.Context, path, ctype string, body []byte) (int, []byte, error)
}

// poster returns what one load goroutine sends requests with.
func (c *benchClient) poster() (poster, error) {
	if !c.raw {
		return c, nil
	}
	return dialConnClient(c.url, c.token)
}

func (c *benchClient) post(ctx context.Context, path, ctype string, body []byte) (int, []byte, error) {
	return c.do(ctx, "POST", path, ctype, body)
}

// connClient is one keep-alive HTTP/1.1 connection driven by its caller's
// goroutine: the request is written by hand and the response read with
// http.ReadResponse, with no transport goroutines in between.
type connClient struct {
	host, auth string
	conn       net.Conn
	br         *bufio.Reader
	req        []byte
	resp       []byte
}

func dialConnClient(url, token string) (*connClient, error) {
	host, ok := strings.CutPrefix(url, "http://")
	if !ok {
		return nil, fmt.Errorf("--client conn speaks plain http only, not %s (use --client nethttp)", url)
	}
	conn, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c := &connClient{host: host, conn: conn, br: bufio.NewReaderSize(conn, 16<<10)}
	if token != "" {
		c.auth = "Authorization: Bearer " + token + "\r\n"
	}
	return c, nil
}

func (c *connClient) post(ctx context.Context, path, ctype string, body []byte) (int, []byte, error) {
	if c.conn == nil { // the last exchange broke the connection
		conn, err := net.DialTimeout("tcp", c.host, 10*time.Second)
		if err != nil {
			return 0, nil, err
		}
		c.conn = conn
		c.br.Reset(conn)
	}
	code, b, err := c.exchange(ctx, path, ctype, body)
	if err != nil && c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	return code, b, err
}

func (c *connClient) exchange(ctx context.Context, path, ctype string, body []byte) (int, []byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(dl)
	} else {
		_ = c.conn.SetDeadline(time.Now().Add(2 * time.Minute))
	}
	r := append(c.req[:0], "POST "...)
	r = append(r, path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, c.host...)
	r = append(r, "\r\nContent-Type: "...)
	r = append(r, ctype...)
	r = append(r, "\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	r = append(r, "\r\n"...)
	r = append(r, c.auth...)
	r = append(r, "\r\n"...)
	c.req = r
	if _, err := (&net.Buffers{r, body}).WriteTo(c.conn); err != nil {
		return 0, nil, err
	}
	code, closeConn, err := c.readResponse()
	if err == nil && closeConn {
		c.conn.Close()
		c.conn = nil
	}
	return code, c.resp, err
}

// readResponse reads one HTTP/1.1 response into c.resp: the status line,
// the headers it needs (Content-Length, Transfer-Encoding, Connection) and
// the body. It is what wrk's parser does, and costs a fraction of
// http.ReadResponse, whose header map and body reader would otherwise be a
// tenth of the load generator's CPU, taken from the worker under test.
func (c *connClient) readResponse() (code int, closeConn bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 201 Created\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("malformed status line %q", line)
	}
	code, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked := -1, false
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		h := bytes.TrimRight(line, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closeConn = bytes.EqualFold(value, []byte("close"))
		}
	}
	if code == http.StatusNoContent || code == http.StatusNotModified || code < 200 {
		length = 0 // no body, whatever the headers say
	}
	buf := bytes.NewBuffer(c.resp[:0])
	switch {
	case chunked && length != 0:
		_, err = buf.ReadFrom(httputil.NewChunkedReader(c.br))
		if err == nil { // the trailer section ends with an empty line
			for {
				if line, err = c.br.ReadSlice('\n'); err != nil || len(bytes.TrimRight(line, "\r\n")) == 0 {
					break
				}
			}
		}
	case length >= 0:
		buf.Grow(length)
		_, err = io.ReadFull(c.br, buf.AvailableBuffer()[:length])
		c.resp = buf.AvailableBuffer()[:length]
		return code, closeConn, err
	default: // the body runs to the end of the connection
		_, err = buf.ReadFrom(c.br)
		closeConn = true
	}
	c.resp = buf.Bytes()
	return code, closeConn, err
}

func newBenchClient(url, token string, conns int) *benchClient {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		WriteBufferSize:     64 << 10,
		ReadBufferSize:      16 << 10,
	}
	return &benchClient{url: url, token: token, hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// do sends a request and returns the status and body.
func (c *benchClient) do(ctx context.Context, method, path, ctype string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// ---------------------------------------------------------------- load

// contentPool is printable ASCII without '"' and '\', so it can be put in
// JSON strings as is.
func contentPool() []byte {
	rng := rand.New(rand.NewPCG(7, 7))
	pool := make([]byte, 4<<20)
	for i := range pool {
		c := byte(32 + rng.IntN(95))
		if c == '"' || c == '\\' {
			c = 'x'
		}
		pool[i] = c
	}
	return pool
}

// bodyGen makes request bodies for one connection.
type bodyGen struct {
	mode    httpBenchMode
	prefix  string
	pool    []byte
	content int
	rng     *rand.Rand
	seq     int
	buf     []byte

	ipcBuf bytes.Buffer
	// The Arrow mode's columns, reused from request to request: fresh
	// builders allocated (and the kernel zeroed) about a request's size of
	// memory each time, a tenth of the client's CPU, taken from the worker.
	cols arrowCols
}

var benchArrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String},
	{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int32},
	{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
}, nil)

func (g *bodyGen) text() []byte {
	n := g.content + g.content/8 - g.rng.IntN(g.content/4+1)
	off := g.rng.IntN(len(g.pool) - n)
	return g.pool[off : off+n]
}

// arrowCols are the Arrow mode's columns as plain slices, wrapped into
// arrays without a copy.
type arrowCols struct {
	ids, rids varBytes[int32]
	texts     varBytes[int64]
	seqs      []int32
	scratch   []byte
}

type varBytes[O int32 | int64] struct {
	offs []O
	data []byte
}

func (v *varBytes[O]) add(b []byte) {
	if len(v.offs) == 0 {
		v.offs = append(v.offs, 0)
	}
	v.data = append(v.data, b...)
	v.offs = append(v.offs, O(len(v.data)))
}

func (v *varBytes[O]) array(dt arrow.DataType, n int) arrow.Array {
	if len(v.offs) == 0 {
		v.offs = append(v.offs, 0)
	}
	d := array.NewData(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(v.offs)), memory.NewBufferBytes(v.data)}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func (c *arrowCols) reset() {
	c.ids.offs, c.ids.data = c.ids.offs[:0], c.ids.data[:0]
	c.rids.offs, c.rids.data = c.rids.offs[:0], c.rids.data[:0]
	c.texts.offs, c.texts.data = c.texts.offs[:0], c.texts.data[:0]
	c.seqs = c.seqs[:0]
}

// record wraps the columns (n rows) as a batch of benchArrowSchema, valid
// until the next reset.
func (c *arrowCols) record(n int) arrow.RecordBatch {
	sd := array.NewData(arrow.PrimitiveTypes.Int32, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(c.seqs))}, nil, 0, 0)
	seqs := array.MakeFromData(sd)
	sd.Release()
	cols := []arrow.Array{
		c.ids.array(arrow.BinaryTypes.String, n),
		c.rids.array(arrow.BinaryTypes.String, n),
		seqs,
		c.texts.array(arrow.BinaryTypes.LargeString, n),
	}
	rec := array.NewRecordBatch(benchArrowSchema, cols, int64(n))
	for _, a := range cols {
		a.Release()
	}
	return rec
}

// next returns the next body (valid until the following call), its record
// count and content type.
func (g *bodyGen) next() ([]byte, string, error) {
	if g.mode.Format == "arrow" {
		c := &g.cols
		c.reset()
		for i := 0; i < g.mode.Batch; i++ {
			c.ids.add(strconv.AppendInt(append(c.scratch[:0], g.prefix...), int64(g.seq), 10))
			c.rids.add(strconv.AppendInt(append(append(c.scratch[:0], g.prefix...), 'r'), int64(g.seq/16), 10))
			c.seqs = append(c.seqs, int32(g.seq%16))
			c.texts.add(g.text())
			g.seq++
		}
		rec := c.record(g.mode.Batch)
		defer rec.Release()
		g.ipcBuf.Reset()
		w := ipc.NewWriter(&g.ipcBuf, ipc.WithSchema(benchArrowSchema))
		if err := w.Write(rec); err != nil {
			return nil, "", err
		}
		if err := w.Close(); err != nil {
			return nil, "", err
		}
		return g.ipcBuf.Bytes(), "application/vnd.apache.arrow.stream", nil
	}
	b := append(g.buf[:0], `{"records":[`...)
	for i := 0; i < g.mode.Batch; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = append(b, g.prefix...)
		b = strconv.AppendInt(b, int64(g.seq), 10)
		b = append(b, `","rollout_id":"`...)
		b = append(b, g.prefix...)
		b = append(b, 'r')
		b = strconv.AppendInt(b, int64(g.seq/16), 10)
		b = append(b, `","sequence_order":`...)
		b = strconv.AppendInt(b, int64(g.seq%16), 10)
		b = append(b, `,"content":"`...)
		b = append(b, g.text()...)
		b = append(b, `"}`...)
		g.seq++
	}
	b = append(b, "]}"...)
	g.buf = b
	return b, "application/json", nil
}

// devWrites, when not nil, reads the bytes written to the worker's device.
func runHTTPMode(ctx context.Context, cl *benchClient, m httpBenchMode, store string, pool []byte, content int, warmup, duration time.Duration, devWrites func() int64) (*httpBenchResult, error) {
	if code, body, err := cl.do(ctx, "POST", "/api/v1/rollouts", "application/json", []byte(`{"name":"`+store+`"}`)); err != nil || code != http.StatusCreated {
		return nil, fmt.Errorf("create store %s: %d %s %v", store, code, body, err)
	}
	path := "/api/v1/rollouts/" + store + "/records"
	if m.Flush {
		path += "?flush=true"
	}
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)
	var cpuFrom atomic.Int64
	cpuFrom.Store(int64(processCPU()))
	var diskFrom, walFrom atomic.Int64
	cpuTimer := time.AfterFunc(warmup, func() {
		cpuFrom.Store(int64(processCPU()))
		if devWrites != nil {
			diskFrom.Store(devWrites())
		}
		walFrom.Store(int64(walEntryBytes(ctx, cl)))
	})
	var (
		wg                   sync.WaitGroup
		errs, acked          atomic.Int64
		firstErr             atomic.Value
		lat                  = make([][]time.Duration, m.Concurrency)
		reqs, recs, reqBytes = make([]int64, m.Concurrency), make([]int64, m.Concurrency), make([]int64, m.Concurrency)
		lastDone             = make([]time.Time, m.Concurrency)
	)
	for c := 0; c < m.Concurrency; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := &bodyGen{mode: m, prefix: fmt.Sprintf("%s-%d-", m.Name, c), pool: pool, content: content, rng: rand.New(rand.NewPCG(uint64(c), 99))}
			pc, err := cl.poster()
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				errs.Add(1)
				return
			}
			if cc, ok := pc.(*connClient); ok {
				defer func() {
					if cc.conn != nil {
						cc.conn.Close()
					}
				}()
			}
			lat[c] = make([]time.Duration, 0, 1<<14)
			for {
				body, ctype, err := g.next()
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					errs.Add(1)
					return
				}
				t0 := time.Now()
				if t0.After(end) || ctx.Err() != nil {
					return
				}
				code, rb, err := pc.post(ctx, path, ctype, body)
				t1 := time.Now()
				if err != nil || code != http.StatusCreated {
					if err == nil {
						err = fmt.Errorf("status %d: %.200s", code, rb)
					}
					firstErr.CompareAndSwap(nil, err.Error())
					errs.Add(1)
					continue
				}
				acked.Add(int64(m.Batch))
				if t0.Before(measureFrom) {
					continue
				}
				lat[c] = append(lat[c], t1.Sub(t0))
				reqs[c]++
				recs[c] += int64(m.Batch)
				reqBytes[c] += int64(len(body))
				lastDone[c] = t1
			}
		}()
	}
	wg.Wait()
	cpuTimer.Stop()
	cpuUsed := processCPU() - time.Duration(cpuFrom.Load())
	var diskUsed int64
	if devWrites != nil {
		diskUsed = devWrites() - diskFrom.Load()
	}
	walUsed := walEntryBytes(ctx, cl) - float64(walFrom.Load())
	res := &httpBenchResult{Mode: m.Name, Format: m.Format, Batch: m.Batch, Concurrency: m.Concurrency, Flush: m.Flush, Errors: errs.Load()}
	if e, ok := firstErr.Load().(string); ok {
		res.FirstError = e
	}
	var all []time.Duration
	var bytesSent int64
	stop := measureFrom
	for c := range lat {
		all = append(all, lat[c]...)
		res.Requests += reqs[c]
		res.Records += recs[c]
		bytesSent += reqBytes[c]
		if lastDone[c].After(stop) {
			stop = lastDone[c]
		}
	}
	secs := stop.Sub(measureFrom).Seconds()
	res.DurationSecs = secs
	if secs > 0 {
		res.RecordsPerS = float64(res.Records) / secs
		res.RequestsPerS = float64(res.Requests) / secs
		res.MBPerS = float64(bytesSent) / 1e6 / secs
	}
	res.CPUSecs = cpuUsed.Seconds()
	if res.Records > 0 {
		res.CPUUsPerRecord = float64(cpuUsed.Microseconds()) / float64(res.Records)
		if devWrites != nil {
			res.DeviceBytesPerRecord = float64(diskUsed) / float64(res.Records)
		}
		res.RequestBytesPerRecord = float64(bytesSent) / float64(res.Records)
		if res.DeviceBytesPerRecord > 0 {
			res.DeviceBytesPerRequestByte = res.DeviceBytesPerRecord / res.RequestBytesPerRecord
		}
		if walUsed > 0 {
			res.WALEntryBytesPerRecord = walUsed / float64(res.Records)
		}
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := min(len(all)-1, int(p*float64(len(all))))
		return float64(all[i].Microseconds()) / 1000
	}
	res.P50Ms, res.P90Ms, res.P99Ms = pct(0.50), pct(0.90), pct(0.99)
	if len(all) > 0 {
		res.MaxMs = float64(all[len(all)-1].Microseconds()) / 1000
	}

	// Check what was stored: flush, then the store's row count.
	res.StoredExpected = acked.Load()
	if code, body, err := cl.do(ctx, "POST", "/api/v1/rollouts/"+store+"/flush", "", nil); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("flush %s: %d %s %v", store, code, body, err)
	}
	code, body, err := cl.do(ctx, "GET", "/api/v1/rollouts/"+store, "", nil)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("stats %s: %d %s %v", store, code, body, err)
	}
	var st struct {
		Rows int64 `json:"rows"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, err
	}
	res.StoredRows = st.Rows
	if res.StoredRows != res.StoredExpected {
		fmt.Fprintf(os.Stderr, "bench http: mode %s: the store holds %d rows, %d were acknowledged\n", m.Name, res.StoredRows, res.StoredExpected)
	}
	return res, nil
}

// walEntryBytes returns the worker's lance_context_wal_entry_bytes_sum
// (every store's WAL entries, in bytes), or 0 when it cannot be read.
func walEntryBytes(ctx context.Context, cl *benchClient) float64 {
	code, body, err := cl.do(ctx, "GET", "/metrics", "", nil)
	if err != nil || code != http.StatusOK {
		return 0
	}
	const name = "lance_context_wal_entry_bytes_sum "
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// processCPU returns the user and system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ---------------------------------------------------------------- LanceDB

func haveLanceDB(interopDir string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return errors.New("--lancedb: node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(interopDir, "node_modules", "@lancedb", "lancedb", "package.json")); err != nil {
		return fmt.Errorf("--lancedb: %s/node_modules has no @lancedb/lancedb (npm ci there, or set --interop-dir)", interopDir)
	}
	return nil
}

// runLanceDBBench runs bench.mjs DIR args... and returns its JSON line.
func runLanceDBBench(ctx context.Context, interopDir, dir string, args ...string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(interopDir, "bench.mjs"), dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node bench.mjs %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil {
		return nil, fmt.Errorf("node bench.mjs %s: output %q: %w", strings.Join(args, " "), b, err)
	}
	return m, nil
}

// httpBenchSummary compares the figures with the goals (which hold for the
// in-process worker on local disk of a 2-core machine).
func httpBenchSummary(r map[string]*httpBenchResult, lanceOneRow float64, inproc bool) map[string]any {
	out := map[string]any{"mode": "summary", "in_process_worker": inproc, "gomaxprocs": runtime.GOMAXPROCS(0)}
	goals := map[string]any{}
	if s := r["single"]; s != nil {
		goals["single_records_per_s>=15000"] = s.RecordsPerS >= 15000
		goals["single_p99_ms<=25"] = s.P99Ms <= 25
		if lanceOneRow > 0 {
			ratio := s.RecordsPerS / lanceOneRow
			out["single_vs_lancedb_one_row_commits"] = ratio
			goals["single_vs_lancedb>=50x"] = ratio >= 50
		}
	}
	// Issue 32's goals: JSON batches and Arrow at the device's pace, each
	// record written about once before the merge.
	if b := r["batch"]; b != nil {
		goals["batch_records_per_s>=200000"] = b.RecordsPerS >= 200000
		if b.DeviceBytesPerRequestByte > 0 { // known: local disk
			goals["batch_device_bytes_per_request_byte<=1.3"] = b.DeviceBytesPerRequestByte <= 1.3
		}
	}
	if a := r["arrow"]; a != nil {
		goals["arrow_records_per_s>=300000"] = a.RecordsPerS >= 300000
		goals["arrow_p99_ms<=50"] = a.P99Ms <= 50
		if a.DeviceBytesPerRequestByte > 0 {
			goals["arrow_device_bytes_per_request_byte<=1.3"] = a.DeviceBytesPerRequestByte <= 1.3
		}
	}
	errs := int64(0)
	for _, x := range r {
		errs += x.Errors
		if x.StoredRows != x.StoredExpected {
			goals["stored_rows_match_acknowledged"] = false
		}
	}
	if _, ok := goals["stored_rows_match_acknowledged"]; !ok && len(r) > 0 {
		goals["stored_rows_match_acknowledged"] = true
	}
	goals["no_errors"] = errs == 0
	out["goals"] = goals
	return out
}
