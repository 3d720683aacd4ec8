// Package faults runs a fault campaign against the worker binary: the
// worker's object store (S3) is reached through test/latencyproxy, which
// answers 503s, drops connections, tears bodies and stalls at set rates,
// while appenders (JSON and Arrow, some with flush, failed appends sent
// again with the same ids and content, some acknowledged ones sent twice),
// readers, merges, compactions and cleanups run against it, and the worker
// is killed with SIGKILL at random moments, most of them while a merge,
// compaction or cleanup is in flight, and started again with the same
// INSTANCE_ID.
//
// A ledger keeps every acknowledged id and the write each id must show.
// At the end, with the faults off, the run flushes, merges everything, and
// walks records?source=all (and then source=fragments) with the cursor to
// the end: no acknowledged id may be missing (lost), listed twice
// (duplicated) or show another write than its newest acknowledged one or
// a later one whose outcome the client did not learn (wrong content).
//
// bench/faultsoak runs it for minutes and prints its samples;
// TestFaultSuiteNoAckLost runs a short version in CI.
package faults

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/test/latencyproxy"
)

// Config is one campaign.
type Config struct {
	Bin      string        // the lance-context binary
	DataDir  string        // the worker's DATA_DIR: s3://bucket/prefix (AWS_* credentials from the environment)
	Endpoint string        // the S3 server the proxy fronts, e.g. http://127.0.0.1:7070
	Duration time.Duration // of the load, before the final check

	Appenders    int     // concurrent appenders
	Batch        int     // records per append
	Rewrite      float64 // fraction of a batch that rewrites ids sent before
	FlushRate    float64 // fraction of appends with ?flush=true
	Resend       float64 // fraction of acknowledged appends sent again as they were (a client that lost the answer)
	ContentBytes int     // bytes of content per record
	Readers      int     // concurrent readers (get, page by cursor, trajectory)
	// Consumers are feed consumer groups (feed.go), each of which crashes
	// with probability ConsumerCrash per batch (before or around its commit).
	Consumers     int
	ConsumerCrash float64

	MergeEvery   time.Duration // between explicit merges
	CompactEvery time.Duration // between compactions (0: none)
	CleanupEvery time.Duration // between cleanups (0: none)

	CheckTimeout time.Duration // of the final check (default 30 min)

	Kills  int                 // SIGKILLs, spread at random over the load
	Faults latencyproxy.Faults // on during the load, off for the final check
	Seed   uint64

	SampleEvery time.Duration
	OnSample    func(Sample)         // each sample, as it is taken (nil: none)
	Logf        func(string, ...any) // progress and findings (nil: none)
	WorkerLog   io.Writer            // the worker's stdout and stderr (nil: discarded)
	WorkerEnv   []string             // more KEY=VALUE for the worker
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Appenders, 4)
	def(&c.Batch, 50)
	def(&c.ContentBytes, 200)
	def(&c.Readers, 2)
	if c.Duration == 0 {
		c.Duration = time.Minute
	}
	if c.MergeEvery == 0 {
		c.MergeEvery = 3 * time.Second
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = 30 * time.Minute
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = 10 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// ProxyCounts are the proxy's counters of injected faults.
type ProxyCounts struct {
	Requests    int `json:"requests"`
	Injected503 int `json:"injected_503"`
	Reset       int `json:"reset"`
	Torn        int `json:"torn"`
	Stalled     int `json:"stalled"`
}

// Sample is one line of progress.
type Sample struct {
	T           float64          `json:"t_s"`
	Acked       int64            `json:"acknowledged_ids"`
	AppendsOK   int64            `json:"appends_ok"`
	RecordsOK   int64            `json:"records_acked"`
	Merges      int64            `json:"merges"`
	Compactions int64            `json:"compactions"`
	Cleanups    int64            `json:"cleanups"`
	Kills       int              `json:"kills"`
	Crashes     int              `json:"crashes"`
	AppendP50   float64          `json:"append_p50_ms"`
	AppendP99   float64          `json:"append_p99_ms"`
	ReadP99     float64          `json:"read_p99_ms"`
	RSSMB       float64          `json:"rss_mb"`           // the worker's
	Errors      map[string]int64 `json:"errors,omitempty"` // since the last sample
	Proxy       ProxyCounts      `json:"proxy"`
}

// Summary is the result of a campaign.
type Summary struct {
	Checked      bool    `json:"checked"` // the final check ran to its end
	LoadSeconds  float64 `json:"load_s"`
	CheckSeconds float64 `json:"check_s"` // flush, merge and the two walks

	Acknowledged int64 `json:"acknowledged"` // ids with an acknowledged write
	Readable     int64 `json:"readable"`     // of those, listed by source=all
	Lost         int64 `json:"lost"`         // acknowledged, not listed: must be 0
	Duplicated   int64 `json:"duplicated"`   // listed more than once: must be 0
	WrongContent int64 `json:"wrong_content"`
	Phantom      int64 `json:"phantom"`         // listed, never sent: must be 0
	Unacked      int64 `json:"unacked_present"` // sent, never acknowledged, listed (allowed)
	Rows         int64 `json:"rows"`            // rows of the source=all walk

	FragmentsRows       int64 `json:"fragments_rows"` // after merging everything
	FragmentsLost       int64 `json:"fragments_lost"`
	FragmentsDuplicated int64 `json:"fragments_duplicated"`
	FragmentsWrong      int64 `json:"fragments_wrong_content"`

	// The feed, summed over the consumer groups (feed.go).
	FeedDelivered   int64 `json:"feed_delivered"`
	FeedDuplicated  int64 `json:"feed_duplicated"`   // a (shard, seq) committed twice by a group: must be 0
	FeedOutOfOrder  int64 `json:"feed_out_of_order"` // a shard's seq not above the group's last: must be 0
	FeedMissing     int64 `json:"feed_missing"`      // a row the store holds at the end, never delivered: must be 0
	FeedPhantom     int64 `json:"feed_phantom"`
	ConsumerCrashes int   `json:"consumer_crashes"`

	ReadMissing int64 `json:"read_missing"` // a get did not find an id acknowledged with flush: must be 0
	PageErrors  int64 `json:"page_errors"`  // a page or trajectory listed an id twice or out of order: must be 0

	AppendsOK     int64   `json:"appends_ok"`
	RecordsOK     int64   `json:"records_acked"`
	DriverRetries int64   `json:"driver_retries"` // appends sent again after a client-visible failure
	Resent        int64   `json:"resent"`         // acknowledged appends sent again
	Abandoned     int64   `json:"abandoned"`      // appends never acknowledged
	AppendP50     float64 `json:"append_p50_ms"`
	AppendP99     float64 `json:"append_p99_ms"`
	AppendMax     float64 `json:"append_max_ms"`
	ReadP99       float64 `json:"read_p99_ms"`
	// Latencies are p50, p99 and max in ms of the successful calls of
	// each kind of read and maintenance call.
	Latencies map[string][3]float64 `json:"latencies_ms"`

	Merges      int64          `json:"merges"`
	Compactions int64          `json:"compactions"`
	Cleanups    int64          `json:"cleanups"`
	Kills       int            `json:"kills"`
	KillsDuring map[string]int `json:"kills_during"`  // the maintenance calls in flight ("compact+merge"), or "appends only"
	Crashes     int            `json:"crashes"`       // exits that were not our kills
	MaxRSSMB    float64        `json:"max_rss_mb"`    // the worker's, sampled during the load and the check
	RestartMax  float64        `json:"restart_max_s"` // SIGKILL to a healthy worker, the longest

	// Answered are the worker's failed answers (5xx, or no answer) before
	// the client's retries, kills included: what the retries absorbed.
	Answered map[string]int64 `json:"failed_answers_before_retries"`
	// Errors are client-visible failures (after the client's retries) by
	// operation and kind, away from kills; AroundKills those of calls
	// that spanned a kill (the worker was down or changed under them).
	Errors      map[string]int64    `json:"errors"`
	AroundKills map[string]int64    `json:"errors_around_kills"`
	Proxy       ProxyCounts         `json:"proxy"`
	Faults      latencyproxy.Faults `json:"faults"`

	Examples map[string][]string `json:"examples,omitempty"`
}

// Failures lists what broke an invariant; empty when the run is clean.
func (s *Summary) Failures() []string {
	var f []string
	if !s.Checked {
		f = append(f, "the final check did not run to its end")
	}
	add := func(n int64, what string) {
		if n != 0 {
			f = append(f, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(s.Lost, "acknowledged ids lost")
	add(s.Duplicated, "ids listed more than once")
	add(s.WrongContent, "ids showing a write that is not their newest acknowledged one")
	add(s.Phantom, "ids listed that were never sent")
	add(s.FragmentsLost, "acknowledged ids missing from fragments after merging everything")
	add(s.FragmentsDuplicated, "ids listed more than once in fragments")
	add(s.FragmentsWrong, "ids with the wrong content in fragments")
	add(s.FeedDuplicated, "rows a feed consumer group got twice")
	add(s.FeedOutOfOrder, "feed rows out of their shard's order")
	add(s.FeedMissing, "rows in the store a feed consumer group never got")
	add(s.FeedPhantom, "feed rows never sent")
	add(s.ReadMissing, "gets that did not find an id acknowledged with flush")
	add(s.PageErrors, "pages or trajectories with an id twice or out of order")
	add(int64(s.Crashes), "worker exits that were not kills")
	return f
}

const store = "faults"

// run is the state of one campaign.
type run struct {
	cfg     Config
	proc    *proc
	proxy   *latencyproxy.Proxy
	cl      *client.Client
	seen    *countingTransport
	writers []*writer
	seq     atomic.Uint64
	feeds   []*consumer

	appendsOK, recordsOK, retries, resent, abandoned atomic.Int64
	merges, compactions, cleanups                    atomic.Int64
	readMissing, pageErrors                          atomic.Int64
	maxRSS                                           atomicMax

	mu          sync.Mutex
	errs        map[string]int64 // since the last sample
	errsAll     map[string]int64
	aroundKills map[string]int64
	examples    map[string][]string
	killsDuring map[string]int
	appendLat   latencies
	readLat     latencies
	opLat       map[string]*latencies // reads by kind, and the maintenance calls
	maint       map[string]int        // maintenance calls in flight, by kind
}

// Run runs the campaign and checks it. The error is for a run that could
// not be carried out (no worker, no S3) or checked (the final listing
// failed: then the Summary has the figures of the load alone); a run that
// found lost or duplicated records returns a Summary whose Failures say
// so.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg = cfg.withDefaults()
	if cfg.Bin == "" || cfg.DataDir == "" || cfg.Endpoint == "" {
		return nil, errors.New("faults: Config needs Bin, DataDir and Endpoint")
	}
	if !strings.HasPrefix(cfg.DataDir, "s3://") {
		return nil, fmt.Errorf("faults: data dir %q: want s3://bucket/prefix (only S3 goes through the proxy)", cfg.DataDir)
	}
	if cfg.Appenders > 99 {
		return nil, fmt.Errorf("faults: %d appenders: at most 99 (ids are aNN-...)", cfg.Appenders)
	}
	target, err := url.Parse(cfg.Endpoint)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("faults: endpoint %q: want http://host:port", cfg.Endpoint)
	}
	r := &run{cfg: cfg, errs: map[string]int64{}, errsAll: map[string]int64{}, aroundKills: map[string]int64{},
		examples: map[string][]string{}, killsDuring: map[string]int{}, opLat: map[string]*latencies{}, maint: map[string]int{}}
	for _, op := range []string{"get", "page", "trajectory", "merge", "compact", "cleanup"} {
		r.opLat[op] = &latencies{}
	}

	// The proxy, in this process, in front of the S3 server.
	r.proxy = latencyproxy.New(target, 0)
	// Forwards cut short by our own faults are not news.
	r.proxy.SetErrorLog(discardLog())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: the proxy's port: %w", err)
	}
	psrv := &http.Server{Handler: r.proxy, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog()}
	go func() { _ = psrv.Serve(ln) }()
	defer psrv.Close()

	env := []string{
		"DATA_DIR=" + cfg.DataDir,
		"INSTANCE_ID=faults",
		"AWS_ENDPOINT_URL=http://" + ln.Addr().String(),
		"ROLLOUT_FLUSH_INTERVAL_SECS=2",
		"LC_MERGE_AFTER_AGE_SECS=10",
		"LC_VERSION_CLEANUP_INTERVAL_SECS=0",
		"LC_CLEANUP_OLDER_THAN_SECS=0",
		"LC_CLEANUP_READ_GRACE_SECS=20",
		"LC_MEMORY_BUDGET_BYTES=" + strconv.Itoa(1<<30),
	}
	r.proc, err = newProc(cfg.Bin, append(env, cfg.WorkerEnv...), cfg.WorkerLog, cfg.Logf)
	if err != nil {
		return nil, err
	}
	superCtx, stopSuper := context.WithCancel(context.Background())
	ready := make(chan error, 1)
	superDone := make(chan struct{})
	go func() {
		defer close(superDone)
		r.proc.supervise(superCtx, ready)
	}()
	defer func() {
		stopSuper()
		r.proc.stop()
		<-superDone
	}()
	select {
	case err := <-ready:
		if err != nil {
			return nil, fmt.Errorf("faults: %w", err)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	r.seen = &countingTransport{base: tr, m: map[string]int64{}}
	// The client as users get it: its default retry policy.
	r.cl = client.New(r.proc.url, client.WithHTTPClient(&http.Client{Transport: r.seen, Timeout: 2 * time.Minute}))
	if err := r.createStore(ctx); err != nil {
		return nil, err
	}
	r.writers = make([]*writer, cfg.Appenders)
	for g := range r.writers {
		r.writers[g] = &writer{g: g}
	}

	// The load, with the faults on.
	r.proxy.SetFaults(cfg.Faults)
	began := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	var wg sync.WaitGroup
	for g := range cfg.Appenders {
		wg.Go(func() { r.appender(loadCtx, g) })
	}
	for k := range cfg.Readers {
		wg.Go(func() { r.reader(loadCtx, k) })
	}
	for k := range cfg.Consumers {
		c := &consumer{group: fmt.Sprintf("learners-%d", k)}
		r.feeds = append(r.feeds, c)
		wg.Go(func() { r.consume(loadCtx, c, cfg.ConsumerCrash, cfg.Seed+uint64(k)) })
	}
	wg.Go(func() { r.maintenance(loadCtx) })
	wg.Go(func() { r.killer(loadCtx, began) })
	r.sampleLoop(loadCtx, began)
	stopLoad()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	load := time.Now().Sub(began)

	// The check, with the faults off; the worker's RSS is still watched.
	r.proxy.SetFaults(latencyproxy.Faults{})
	rssCtx, stopRSS := context.WithCancel(ctx)
	defer stopRSS()
	go func() {
		for sleep(rssCtx, 2*time.Second) {
			r.maxRSS.max(rssMB(r.proc.pid()))
		}
	}()
	checkBegan := time.Now()
	sum := r.loadSummary()
	sum.LoadSeconds = load.Seconds()
	err = r.finalCheck(ctx, sum)
	sum.CheckSeconds = time.Since(checkBegan).Seconds()
	sum.MaxRSSMB = r.maxRSS.Load()
	return sum, err
}

func (r *run) createStore(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := r.cl.CreateStore(ctx, store)
		if err == nil || client.IsCode(err, api.CodeAlreadyExists) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("faults: creating the store: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fail counts a client-visible failure of op that began in worker life gen.
func (r *run) fail(op string, err error, gen int) {
	now, up := r.proc.generation()
	key := op + " " + kindOf(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if now != gen || !up {
		r.aroundKills[key]++
		return
	}
	r.errs[key]++
	r.errsAll[key]++
	if len(r.examples[key]) < 2 {
		msg := err.Error()
		if len(msg) > 400 {
			msg = msg[:400] + "..."
		}
		r.examples[key] = append(r.examples[key], msg)
		r.cfg.Logf("%s: %s", key, msg)
	}
}

func (r *run) finding(kind, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.examples[kind]) < 5 {
		r.examples[kind] = append(r.examples[kind], msg)
		r.cfg.Logf("FINDING %s: %s", kind, msg)
	}
}

// kindOf names a failure for the error counts.
func kindOf(err error) string {
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		if ae.Code != "" {
			return strconv.Itoa(ae.Status) + " " + ae.Code
		}
		return strconv.Itoa(ae.Status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	}
	return "transport"
}

// appender writes batches of its own ids until ctx ends.
func (r *run) appender(ctx context.Context, g int) {
	c := r.cfg
	rng := rand.New(rand.NewPCG(c.Seed, uint64(1000+g)))
	w := r.writers[g]
	created := time.Now().UTC().Truncate(time.Microsecond)
	for i := 0; ctx.Err() == nil; i++ {
		idx := w.pick(rng, c.Batch, c.Rewrite)
		seq := r.seq.Add(1)
		flush := rng.Float64() < c.FlushRate
		ids := make([]string, len(idx))
		for j, k := range idx {
			ids[j] = idOf(g, k)
		}
		// One body per batch, sent as often as it takes: a retry writes
		// exactly the same rows.
		var send func(context.Context) error
		release := func() {}
		if i%2 == 0 {
			recs := make([]api.Record, len(ids))
			for j, id := range ids {
				text := content(id, seq, c.ContentBytes)
				recs[j] = api.Record{ID: id, RolloutID: fmt.Sprintf("a%02d-r%03d", g, idx[j]%100),
					SequenceOrder: int32(idx[j]), Content: &text, CreatedAt: &created}
			}
			send = func(ctx context.Context) error {
				_, err := r.cl.Append(ctx, store, recs, client.AppendOptions{Flush: flush})
				return err
			}
		} else {
			batch := arrowBatch(g, idx, ids, seq, c.ContentBytes)
			release = batch.Release
			send = func(ctx context.Context) error {
				_, err := r.cl.AppendArrow(ctx, store, batch, flush)
				return err
			}
		}
		acked := false
		for attempt := 1; ctx.Err() == nil; attempt++ {
			if attempt > 1 {
				r.retries.Add(1)
				if r.proc.waitUp(ctx) != nil {
					break
				}
				sleep(ctx, time.Duration(rng.IntN(500))*time.Millisecond)
			}
			gen, _ := r.proc.generation()
			start := time.Now()
			err := send(ctx)
			if err == nil {
				r.appendLat.add(time.Since(start))
				acked = true
				break
			}
			if ctx.Err() != nil {
				break
			}
			r.fail("append", err, gen)
		}
		w.settle(idx, seq, acked, flush)
		if !acked {
			release()
			r.abandoned.Add(1)
			continue
		}
		r.appendsOK.Add(1)
		r.recordsOK.Add(int64(len(idx)))
		if rng.Float64() < c.Resend {
			// The answer "lost": the same append again must not add rows.
			gen, _ := r.proc.generation()
			if err := send(ctx); err != nil && ctx.Err() == nil {
				r.fail("resend", err, gen)
			} else if err == nil {
				r.resent.Add(1)
			}
		}
		release()
	}
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

var arrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String},
	{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int32},
	{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func arrowBatch(g int, idx []int, ids []string, seq uint64, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrowSchema)
	defer b.Release()
	for j, id := range ids {
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("a%02d-r%03d", g, idx[j]%100))
		b.Field(2).(*array.Int32Builder).Append(int32(idx[j]))
		b.Field(3).(*array.StringBuilder).Append(content(id, seq, n))
	}
	return b.NewRecordBatch()
}

// reader gets ids that must be there, pages from random cursors and reads
// trajectories, checking what each answer can be checked for alone.
func (r *run) reader(ctx context.Context, k int) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(2000+k)))
	for i := 0; ctx.Err() == nil; i++ {
		w := r.writers[rng.IntN(len(r.writers))]
		gen, _ := r.proc.generation()
		if err := r.proc.waitUp(ctx); err != nil {
			return
		}
		start := time.Now()
		var err error
		op := ""
		switch i % 3 {
		case 0:
			op = "get"
			id, ok := w.randomReadable(rng)
			if !ok {
				sleep(ctx, 50*time.Millisecond)
				continue
			}
			var found bool
			found, err = r.get(ctx, id)
			if err == nil && !found {
				r.readMissing.Add(1)
				r.finding("read_missing", fmt.Sprintf("GET records/%s found nothing; it was acknowledged with flush", id))
			}
		case 1:
			op = "page"
			n := w.sent()
			if n == 0 {
				continue
			}
			var page *client.ListPage
			after := idOf(w.g, rng.IntN(n))
			page, err = r.cl.List(ctx, store, client.ListOptions{Source: api.SourceAll, Limit: 100, Cursor: encodeCursor(after)})
			if err == nil {
				r.checkOrder("page (source=all, after "+after+")", page.Records, true)
			}
		case 2:
			op = "trajectory"
			var recs []api.Record
			recs, err = r.cl.Trajectory(ctx, store, fmt.Sprintf("a%02d-r%03d", w.g, rng.IntN(100)))
			if err == nil {
				r.checkOrder("trajectory", recs, false)
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				r.fail(op, err, gen)
			}
			continue
		}
		r.readLat.add(time.Since(start))
		r.opLat[op].add(time.Since(start))
	}
}

// get reads one record by id; found is false for {"record": null}.
func (r *run) get(ctx context.Context, id string) (bool, error) {
	// The client's Get turns a null record into a 404 like a missing
	// store's: tell them apart by the message it makes.
	_, err := r.cl.Get(ctx, store, id)
	if err == nil {
		return true, nil
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound && strings.HasPrefix(ae.Message, "no record ") {
		return false, nil
	}
	return false, err
}

// checkOrder: a page is in strictly ascending id order; a trajectory has
// each id once.
func (r *run) checkOrder(what string, recs []api.Record, ordered bool) {
	seen := make(map[string]bool, len(recs))
	for i, rec := range recs {
		if seen[rec.ID] || (ordered && i > 0 && recs[i-1].ID >= rec.ID) {
			r.pageErrors.Add(1)
			// The ids around it, so that a finding says which rows met.
			ids := make([]string, 0, 6)
			for _, x := range recs[max(0, i-3):min(len(recs), i+3)] {
				ids = append(ids, x.ID)
			}
			r.finding("page_error", fmt.Sprintf("a %s lists %s twice or out of order (position %d of %d; around it: %v)", what, rec.ID, i, len(recs), ids))
			return
		}
		seen[rec.ID] = true
	}
}

// maintenance runs merges every MergeEvery, and compactions and
// cleanups every CompactEvery and CleanupEvery on their own clocks, as a
// scheduler's tasks would: a merge of a long backlog may take minutes
// under faults and kills, and the others must still run (and be killed)
// meanwhile.
func (r *run) maintenance(ctx context.Context) {
	c := r.cfg
	var wg sync.WaitGroup
	every := func(op string, period time.Duration, f func() error, done *atomic.Int64) {
		if period <= 0 {
			return
		}
		wg.Go(func() {
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if r.proc.waitUp(ctx) != nil {
					return
				}
				gen, _ := r.proc.generation()
				r.inflight(op, 1)
				start := time.Now()
				err := f()
				r.inflight(op, -1)
				switch {
				case err == nil:
					r.opLat[op].add(time.Since(start))
					done.Add(1)
				case ctx.Err() == nil:
					r.fail(op, err, gen)
				}
			}
		})
	}
	every("merge", c.MergeEvery, func() error { _, err := r.cl.Merge(ctx, store); return err }, &r.merges)
	every("compact", c.CompactEvery, func() error { _, err := r.cl.Compact(ctx, store, nil); return err }, &r.compactions)
	every("cleanup", c.CleanupEvery, func() error { _, err := r.cl.Cleanup(ctx, store, nil); return err }, &r.cleanups)
	wg.Wait()
}

// inflight counts the maintenance calls of a kind in flight.
func (r *run) inflight(op string, d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maint[op] += d
}

// during names the maintenance calls in flight ("compact+merge"), or
// "appends only".
func (r *run) during() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ops []string
	for op, n := range r.maint {
		if n > 0 {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return "appends only"
	}
	slices.Sort(ops)
	return strings.Join(ops, "+")
}

// killer sends the SIGKILLs: kill i at a random moment of the i-th of
// Kills equal slots of the load. Two of three wait (up to 15 s) for a
// maintenance call in flight, the kinds in turns (compact, cleanup,
// merge), and strike inside it.
func (r *run) killer(ctx context.Context, began time.Time) {
	c := r.cfg
	if c.Kills <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(c.Seed, 3000))
	slot := c.Duration / time.Duration(c.Kills)
	targets := []string{"compact", "", "cleanup", "merge", "", "compact", "merge", ""}
	for i := range c.Kills {
		at := began.Add(time.Duration(i)*slot + time.Duration((0.15+0.6*rng.Float64())*float64(slot)))
		if !sleep(ctx, time.Until(at)) {
			return
		}
		if r.proc.waitUp(ctx) != nil {
			return
		}
		if target := targets[i%len(targets)]; target != "" {
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if strings.Contains(r.during(), target) {
					// Somewhere inside it, not at its first request.
					sleep(ctx, time.Duration(rng.IntN(400))*time.Millisecond)
					break
				}
				sleep(ctx, 5*time.Millisecond)
			}
		}
		during := r.during()
		if ctx.Err() != nil || !r.proc.kill() {
			continue
		}
		r.mu.Lock()
		r.killsDuring[during]++
		r.mu.Unlock()
		r.cfg.Logf("kill -9 of the worker (in flight: %s)", during)
	}
}

func (r *run) sampleLoop(ctx context.Context, began time.Time) {
	t := time.NewTicker(r.cfg.SampleEvery)
	defer t.Stop()
	last := began
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
			if time.Since(last) < time.Second {
				return // the last tick was the end
			}
		case <-t.C:
		}
		last = time.Now()
		kills, crashes, _ := r.proc.counts()
		s := Sample{
			T: time.Now().Sub(began).Seconds(), Acked: acknowledged(r.writers),
			AppendsOK: r.appendsOK.Load(), RecordsOK: r.recordsOK.Load(),
			Merges: r.merges.Load(), Compactions: r.compactions.Load(), Cleanups: r.cleanups.Load(),
			Kills: kills, Crashes: crashes, Proxy: r.proxyCounts(),
		}
		s.RSSMB = rssMB(r.proc.pid())
		r.maxRSS.max(s.RSSMB)
		s.AppendP50, s.AppendP99, _ = r.appendLat.take()
		_, s.ReadP99, _ = r.readLat.take()
		r.mu.Lock()
		if len(r.errs) > 0 {
			s.Errors = r.errs
			r.errs = map[string]int64{}
		}
		r.mu.Unlock()
		if r.cfg.OnSample != nil {
			r.cfg.OnSample(s)
		}
	}
}

func (r *run) proxyCounts() ProxyCounts {
	st := r.proxy.Stats()
	return ProxyCounts{Requests: st.Requests, Injected503: st.Injected503, Reset: st.Reset, Torn: st.Torn, Stalled: st.Stalled}
}

// loadSummary has the figures of the load.
func (r *run) loadSummary() *Summary {
	kills, crashes, restarts := r.proc.counts()
	s := &Summary{
		Acknowledged: acknowledged(r.writers),
		ReadMissing:  r.readMissing.Load(), PageErrors: r.pageErrors.Load(),
		AppendsOK: r.appendsOK.Load(), RecordsOK: r.recordsOK.Load(), DriverRetries: r.retries.Load(),
		Resent: r.resent.Load(), Abandoned: r.abandoned.Load(),
		Merges: r.merges.Load(), Compactions: r.compactions.Load(), Cleanups: r.cleanups.Load(),
		Kills: kills, Crashes: crashes, Proxy: r.proxyCounts(), Faults: r.cfg.Faults,
		MaxRSSMB: r.maxRSS.Load(), Answered: r.seen.counts(),
	}
	s.AppendP50, s.AppendP99, s.AppendMax = r.appendLat.all()
	_, s.ReadP99, _ = r.readLat.all()
	s.Latencies = map[string][3]float64{}
	for op, l := range r.opLat {
		a, b, c := l.all()
		s.Latencies[op] = [3]float64{a, b, c}
	}
	for _, d := range restarts {
		s.RestartMax = max(s.RestartMax, d.Seconds())
	}
	r.mu.Lock()
	s.Errors, s.AroundKills, s.KillsDuring = r.errsAll, r.aroundKills, r.killsDuring
	s.Examples = r.examples
	r.mu.Unlock()
	return s
}

// finalCheck: with the faults off, flush, merge everything, walk
// source=all and then fragments, and compare both with the ledger.
func (r *run) finalCheck(ctx context.Context, s *Summary) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CheckTimeout)
	defer cancel()
	if err := r.proc.waitUp(ctx); err != nil {
		return fmt.Errorf("faults: the worker is not up for the final check: %w", err)
	}
	step := time.Now()
	if err := retry(ctx, func() error { return r.cl.Flush(ctx, store) }); err != nil {
		return fmt.Errorf("faults: final flush: %w", err)
	}
	r.cfg.Logf("final check: flushed in %.1f s", time.Since(step).Seconds())
	// Merge first: a page of source=all reads every pending generation,
	// and a backlog of hundreds (kills keep undoing long merges) makes
	// a walk of the tail take many minutes. The readers have read the
	// tail under faults all along.
	step = time.Now()
	for {
		var res *api.MergeResult
		if err := retry(ctx, func() (err error) { res, err = r.cl.Merge(ctx, store); return err }); err != nil {
			return fmt.Errorf("faults: final merge: %w", err)
		}
		if res.Remaining == 0 {
			break
		}
	}
	r.cfg.Logf("final check: merged everything in %.1f s", time.Since(step).Seconds())
	step = time.Now()
	all, err := r.walk(ctx, api.SourceAll)
	if err != nil {
		return err
	}
	r.cfg.Logf("final check: walked source=all, %d ids, in %.1f s", len(all), time.Since(step).Seconds())
	ta := check(r.writers, all)
	s.Readable, s.Lost, s.Duplicated, s.WrongContent = ta.readable, ta.lost, ta.duplicated, ta.wrong
	s.Phantom, s.Unacked, s.Rows = ta.phantom, ta.unacked, ta.rows
	for k, v := range ta.examples {
		s.Examples[k] = v
	}
	for _, c := range r.feeds {
		step = time.Now()
		if err := r.drainFeed(ctx, c); err != nil {
			return fmt.Errorf("faults: drain feed group %s: %w", c.group, err)
		}
		ft := checkFeed(r.writers, c, all, func(kind, ex string) {
			if len(s.Examples[kind]) < 5 {
				s.Examples[kind] = append(s.Examples[kind], ex)
			}
		})
		s.FeedDelivered += ft.delivered
		s.FeedDuplicated += ft.duplicated
		s.FeedOutOfOrder += ft.outOfOrder
		s.FeedMissing += ft.missing
		if ft.missing > 0 {
			r.explainMissing(ctx, c, ft.missingIDs)
		}
		s.FeedPhantom += ft.phantom
		s.ConsumerCrashes += c.crashes
		r.cfg.Logf("final check: feed group %s: %d rows delivered (%d reads, %d consumer crashes), drained in %.1f s", c.group, ft.delivered, c.reads, c.crashes, time.Since(step).Seconds())
	}
	all = nil
	step = time.Now()
	frags, err := r.walk(ctx, api.SourceFragments)
	if err != nil {
		return err
	}
	r.cfg.Logf("final check: walked source=fragments, %d ids, in %.1f s", len(frags), time.Since(step).Seconds())
	tf := check(r.writers, frags)
	s.FragmentsRows, s.FragmentsLost, s.FragmentsDuplicated, s.FragmentsWrong = tf.rows, tf.lost, tf.duplicated, tf.wrong
	for k, v := range tf.examples {
		s.Examples["fragments "+k] = v
	}
	s.Checked = true
	return nil
}

// walk lists a source to its end by cursor: id -> the content of each
// row. The id space is cut at the appenders' prefixes and the ranges are
// walked at once (a page costs seconds on a loaded machine); each range
// is a cursor walk of its own, from the cursor of its first id to the
// first id of the next range, the last one to the end.
func (r *run) walk(ctx context.Context, src api.Source) (map[string][]string, error) {
	n := len(r.writers)
	parts := make([]map[string][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			o := client.ListOptions{Source: src, Limit: 1000}
			if g > 0 {
				o.Cursor = encodeCursor(fmt.Sprintf("a%02d-", g)) // sorts before every id of appender g
			}
			end := ""
			if g < n-1 {
				end = fmt.Sprintf("a%02d-", g+1)
			}
			parts[g], errs[g] = r.walkRange(ctx, o, end)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("faults: listing source=%s: %w", src, err)
	}
	rows := parts[0]
	for _, p := range parts[1:] {
		for id, c := range p {
			rows[id] = append(rows[id], c...)
		}
	}
	return rows, nil
}

// walkRange follows cursors from o until an id >= end ("" : the end).
func (r *run) walkRange(ctx context.Context, o client.ListOptions, end string) (map[string][]string, error) {
	rows := map[string][]string{}
	for {
		var page *client.ListPage
		if err := retry(ctx, func() (err error) { page, err = r.cl.List(ctx, store, o); return err }); err != nil {
			return nil, err
		}
		for _, rec := range page.Records {
			if end != "" && rec.ID >= end {
				return rows, nil
			}
			c := ""
			if rec.Content != nil {
				c = *rec.Content
			}
			rows[rec.ID] = append(rows[rec.ID], c)
		}
		if !page.HasMore || page.NextCursor == "" {
			return rows, nil
		}
		o.Cursor = page.NextCursor
	}
}

// retry calls f until it succeeds, for at most 5 failures.
func retry(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
		sleep(ctx, 2*time.Second)
	}
	return err
}

// encodeCursor is the worker's cursor format (rollout.EncodeCursor),
// spelled out: the driver talks to the worker over HTTP only.
func encodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + id))
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// latencies keeps durations for the samples and for the whole run.
type latencies struct {
	mu      sync.Mutex
	recent  []float64
	allTime []float64
}

func (l *latencies) add(d time.Duration) {
	ms := float64(d.Microseconds()) / 1000
	l.mu.Lock()
	l.recent = append(l.recent, ms)
	l.allTime = append(l.allTime, ms)
	l.mu.Unlock()
}

func (l *latencies) take() (p50, p99, maxv float64) {
	l.mu.Lock()
	d := l.recent
	l.recent = nil
	l.mu.Unlock()
	return quantiles(d)
}

func (l *latencies) all() (p50, p99, maxv float64) {
	l.mu.Lock()
	d := slices.Clone(l.allTime)
	l.mu.Unlock()
	return quantiles(d)
}

func quantiles(d []float64) (p50, p99, maxv float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[min(len(d)-1, len(d)*99/100)], d[len(d)-1]
}

// rssMB reads a process's resident set (Linux; 0 elsewhere).
func rssMB(pid int) float64 {
	return float64(gctune.ProcKiB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")) / 1024
}

// atomicMax keeps the largest value it was given.
type atomicMax struct {
	mu sync.Mutex
	v  float64
}

func (a *atomicMax) max(v float64) {
	a.mu.Lock()
	a.v = max(a.v, v)
	a.mu.Unlock()
}

func (a *atomicMax) Load() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v
}

// countingTransport counts the worker's failed answers, before the
// client's retries hide them.
type countingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	m    map[string]int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	key := ""
	switch {
	case err != nil && req.Context().Err() == nil:
		key = "no answer"
	case err == nil && resp.StatusCode >= 500:
		key = strconv.Itoa(resp.StatusCode)
	}
	if key != "" {
		c.mu.Lock()
		c.m[key]++
		c.mu.Unlock()
	}
	return resp, err
}

func (c *countingTransport) counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// JSON is the summary as one line.
func (s *Summary) JSON() string {
	b, _ := json.Marshal(struct {
		Summary *Summary `json:"summary"`
	}{s})
	return string(b)
}
