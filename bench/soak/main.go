// Command soak runs a worker (the real binary, as its own process) under
// continuous ingest, merges, compactions, index upkeep and cleanups, with
// readers, for a set duration, and samples over time what a store's age
// must not grow: bytes on storage against the live version's bytes, file
// counts, the worker's RSS and open files, append and read p99, and how
// far the base table lags the tail. See bench/README.md.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	_ "github.com/lance-context/lance-context/objstore/drivers" // -data s3://...
)

type config struct {
	bin, dataDir          string
	duration, sampleEvery time.Duration
	batch                 int
	flush                 bool // append with ?flush=true
	rewrite               float64
	mergeEvery            int // appends per explicit merge (0: only the worker's age trigger)
	compactEvery          int // merges per compaction
	cleanupEvery          int // merges per explicit cleanup
	olderThan, grace      time.Duration
	mergeAge              time.Duration
	readers               int
	contentBytes          int
	keyspace              int64 // ids written at most; past it every write rewrites (0: no bound)
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "", "the lance-context binary (default: built from this module into a temporary directory)")
	flag.StringVar(&c.dataDir, "data", "", "the worker's DATA_DIR: a directory or s3://bucket/prefix (AWS_* from the environment); default a temporary directory")
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "how long to run")
	flag.DurationVar(&c.sampleEvery, "sample", 10*time.Second, "sampling period")
	flag.IntVar(&c.batch, "batch", 500, "records per append")
	flag.BoolVar(&c.flush, "flush", true, "append with ?flush=true (false: the worker's sweeper and full memtables seal, which seals large memtables in place)")
	flag.Float64Var(&c.rewrite, "rewrite", 0.3, "fraction of each append that rewrites ids already written")
	flag.IntVar(&c.mergeEvery, "merge-every", 1, "appends per explicit merge (0: none; the worker's age trigger merges)")
	flag.IntVar(&c.compactEvery, "compact-every", 100, "merges per compaction")
	flag.IntVar(&c.cleanupEvery, "cleanup-every", 25, "merges per explicit cleanup (compactions clean up too)")
	flag.DurationVar(&c.olderThan, "older-than", 0, "cleanup retention window (LC_CLEANUP_OLDER_THAN_SECS)")
	flag.DurationVar(&c.grace, "grace", 20*time.Second, "cleanup read grace (LC_CLEANUP_READ_GRACE_SECS)")
	flag.DurationVar(&c.mergeAge, "merge-age", 10*time.Second, "the worker's merge age trigger (LC_MERGE_AFTER_AGE_SECS)")
	flag.IntVar(&c.readers, "readers", 2, "concurrent readers (get, page, trajectory)")
	flag.IntVar(&c.contentBytes, "content", 1000, "bytes of content per record")
	flag.Int64Var(&c.keyspace, "keyspace", 0, "distinct ids at most: once written, every append rewrites, so the live data stops growing and what grows is age (0: no bound)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// sample is one line of the output.
type sample struct {
	T           float64        `json:"t_s"`
	Appended    int64          `json:"appended_records"`
	LiveRows    int64          `json:"live_rows"`
	Merges      int64          `json:"merges"`
	Compactions int64          `json:"compactions"`
	Cleanups    int64          `json:"cleanups"`
	BaseBytes   int64          `json:"base_bytes"` // _versions, data, _indices, _deletions, _transactions
	LiveBytes   int64          `json:"live_bytes"` // the latest version's files
	Ratio       float64        `json:"base_over_live"`
	WALBytes    int64          `json:"wal_bytes"`
	StoreBytes  int64          `json:"store_bytes"` // everything under the store's directory
	Files       map[string]int `json:"files"`
	RSSMB       float64        `json:"rss_mb"`
	FDs         int            `json:"fds"`
	AppendP50   float64        `json:"append_p50_ms"`
	AppendP99   float64        `json:"append_p99_ms"`
	ReadP50     float64        `json:"read_p50_ms"`
	ReadP99     float64        `json:"read_p99_ms"`
	// Each read's own figures: the three differ by tens of times in size.
	GetP50      float64          `json:"get_p50_ms"`
	GetP99      float64          `json:"get_p99_ms"`
	PageP50     float64          `json:"page_p50_ms"`
	PageP99     float64          `json:"page_p99_ms"`
	TrajP50     float64          `json:"trajectory_p50_ms"`
	TrajP99     float64          `json:"trajectory_p99_ms"`
	CPUCores    float64          `json:"worker_cpu_cores"` // the worker's CPU seconds per second since the last sample
	GCShare     float64          `json:"gc_cpu_share"`     // of that CPU, the share the collector took
	MergeLagMax float64          `json:"merge_lag_max_s"`  // worst lag seen by the lag prober since the last sample
	Errors      map[string]int64 `json:"errors,omitempty"`
}

// latencies collects durations between samples.
type latencies struct {
	mu sync.Mutex
	d  []float64
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, float64(d.Microseconds())/1000)
	l.mu.Unlock()
}

func (l *latencies) take() (p50, p99 float64) {
	l.mu.Lock()
	d := l.d
	l.d = nil
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]
}

type counters struct {
	mu   sync.Mutex
	errs map[string]int64
}

func (c *counters) fail(what string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errs == nil {
		c.errs = map[string]int64{}
	}
	c.errs[what]++
	if c.errs[what] <= 3 {
		fmt.Fprintf(os.Stderr, "soak: %s: %v\n", what, err)
	}
}

func (c *counters) take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.errs
	c.errs = nil
	return e
}

func run(ctx context.Context, c config) error {
	tmp, err := os.MkdirTemp("", "lc-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if c.bin == "" {
		c.bin = filepath.Join(tmp, "lance-context")
		fmt.Fprintln(os.Stderr, "soak: building the binary")
		b := exec.CommandContext(ctx, "go", "build", "-o", c.bin, "./cmd/lance-context")
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("go build (run from the module root): %w", err)
		}
	}
	if c.dataDir == "" {
		c.dataDir = filepath.Join(tmp, "data")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	secs := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
	wk := exec.Command(c.bin, "worker")
	wk.Env = append(os.Environ(), "DATA_DIR="+c.dataDir, "LISTEN="+addr, "INSTANCE_ID=soak",
		"ROLLOUT_FLUSH_INTERVAL_SECS=1", "LC_MERGE_AFTER_AGE_SECS="+secs(c.mergeAge),
		"LC_VERSION_CLEANUP_INTERVAL_SECS=0", "LC_CLEANUP_OLDER_THAN_SECS="+secs(c.olderThan),
		"LC_CLEANUP_READ_GRACE_SECS="+secs(c.grace))
	logf, err := os.Create(filepath.Join(tmp, "worker.log"))
	if err != nil {
		return err
	}
	wk.Stdout, wk.Stderr = logf, logf
	if err := wk.Start(); err != nil {
		return err
	}
	defer func() {
		_ = wk.Process.Signal(syscall.SIGTERM)
		_ = wk.Wait()
	}()
	cl := client.New("http://"+addr, client.WithRetry(client.RetryPolicy{MaxAttempts: 3}))
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := cl.ListStores(ctx); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the worker did not start: %w (log: %s)", err, filepath.Join(tmp, "worker.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	const store = "soak"
	if _, err := cl.CreateStore(ctx, store); err != nil {
		return err
	}
	root, err := objstore.Open(ctx, c.dataDir)
	if err != nil {
		return err
	}
	tableRoot := objstore.Sub(root, store+".rollout.lance")

	runCtx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var (
		appendLat, readLat  latencies
		kindLat             [3]latencies // get, page, trajectory
		errs                counters
		appended, nextID    atomic.Int64
		merges, compactions atomic.Int64
		cleanups            atomic.Int64
		lagMax              atomicFloat
		wg                  sync.WaitGroup
		content             = strings.Repeat("x", c.contentBytes)
	)
	idOf := func(n int64) string { return fmt.Sprintf("rec-%09d", n) }
	// Ingest and maintenance: one driver, so merges, compactions and
	// cleanups interleave with appends as a scheduler's would.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 1))
		for i := 0; runCtx.Err() == nil; i++ {
			n := nextID.Load()
			ids := make([]string, c.batch)
			fresh := 0
			for j := range ids {
				if n > 0 && (rng.Float64() < c.rewrite || (c.keyspace > 0 && n+int64(fresh) >= c.keyspace)) {
					ids[j] = idOf(rng.Int64N(n))
				} else {
					ids[j] = idOf(n + int64(fresh))
					fresh++
				}
			}
			start := time.Now()
			var err error
			if i%2 == 0 {
				recs := make([]api.Record, len(ids))
				for j, id := range ids {
					recs[j] = api.Record{ID: id, RolloutID: fmt.Sprintf("r%d", rng.IntN(1000)), Content: &content}
				}
				_, err = cl.Append(runCtx, store, recs, client.AppendOptions{Flush: c.flush})
			} else {
				rec := arrowBatch(ids, content, rng)
				_, err = cl.AppendArrow(runCtx, store, rec, c.flush)
				rec.Release()
			}
			if err != nil {
				if runCtx.Err() == nil {
					errs.fail("append", err)
				}
				continue
			}
			appendLat.add(time.Since(start))
			appended.Add(int64(len(ids)))
			nextID.Add(int64(fresh))
			if c.mergeEvery == 0 || (i+1)%c.mergeEvery != 0 {
				continue
			}
			if _, err := cl.Merge(runCtx, store); err != nil {
				if runCtx.Err() == nil {
					errs.fail("merge", err)
				}
				continue
			}
			m := merges.Add(1)
			if c.compactEvery > 0 && m%int64(c.compactEvery) == 0 {
				if _, err := cl.Compact(runCtx, store, nil); err != nil && runCtx.Err() == nil {
					errs.fail("compact", err)
				} else {
					compactions.Add(1)
				}
			}
			if c.cleanupEvery > 0 && m%int64(c.cleanupEvery) == 0 {
				if _, err := cl.Cleanup(runCtx, store, nil); err != nil && runCtx.Err() == nil {
					errs.fail("cleanup", err)
				} else {
					cleanups.Add(1)
				}
			}
		}
	}()
	for r := range c.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(2, uint64(r)))
			for k := 0; runCtx.Err() == nil; k++ {
				n := nextID.Load()
				if n == 0 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				start := time.Now()
				var err error
				switch k % 3 {
				case 0:
					_, err = cl.Get(runCtx, store, idOf(rng.Int64N(n)))
				case 1:
					_, err = cl.List(runCtx, store, client.ListOptions{Source: "all", Limit: 50, Cursor: encodeCursor(idOf(rng.Int64N(n)))})
				case 2:
					_, err = cl.Trajectory(runCtx, store, fmt.Sprintf("r%d", rng.IntN(1000)))
				}
				if err != nil {
					if runCtx.Err() == nil {
						errs.fail("read", err)
					}
					continue
				}
				took := time.Since(start)
				readLat.add(took)
				kindLat[k%3].add(took)
			}
		}()
	}
	// The lag prober: how old the oldest pending generation is, every second.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				if st, err := cl.Stats(runCtx, store); err == nil {
					lagMax.max(st.MergeLagSeconds)
				}
			}
		}
	}()

	enc := json.NewEncoder(os.Stdout)
	var samples []sample
	began := time.Now()
	prevCPU, _ := workerCPU(ctx, addr)
	tick := time.NewTicker(c.sampleEvery)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-runCtx.Done():
			done = true
		case <-tick.C:
		}
		s, err := measure(ctx, tableRoot, wk.Process.Pid)
		if err != nil {
			errs.fail("sample", err)
			continue
		}
		s.T = time.Since(began).Seconds()
		s.Appended, s.Merges, s.Compactions, s.Cleanups = appended.Load(), merges.Load(), compactions.Load(), cleanups.Load()
		s.AppendP50, s.AppendP99 = appendLat.take()
		s.ReadP50, s.ReadP99 = readLat.take()
		s.GetP50, s.GetP99 = kindLat[0].take()
		s.PageP50, s.PageP99 = kindLat[1].take()
		s.TrajP50, s.TrajP99 = kindLat[2].take()
		if cpu, err := workerCPU(ctx, addr); err == nil {
			s.CPUCores, s.GCShare = cpu.since(prevCPU)
			prevCPU = cpu
		}
		s.MergeLagMax = lagMax.take()
		s.Errors = errs.take()
		_ = enc.Encode(s)
		samples = append(samples, s)
	}
	cancel()
	wg.Wait()
	return summarize(samples, c)
}

// encodeCursor is the worker's cursor format (rollout.EncodeCursor),
// spelled out: the driver talks to the worker over HTTP only.
func encodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + id))
}

// measure lists the store and reads the worker's /proc entries.
func measure(ctx context.Context, root objstore.Store, pid int) (sample, error) {
	s := sample{Files: map[string]int{}}
	infos, err := root.List(ctx, "")
	if err != nil {
		return s, err
	}
	size := map[string]int64{}
	for _, o := range infos {
		size[o.Key] = o.Size
		s.StoreBytes += o.Size
		dir, _, _ := strings.Cut(o.Key, "/")
		s.Files[dir]++
		switch dir {
		case "_versions", "data", "_indices", "_deletions", "_transactions":
			s.BaseBytes += o.Size
		case "_lc_wal":
			s.WALBytes += o.Size
		}
	}
	d, err := table.Open(ctx, root)
	if err != nil {
		return s, err
	}
	s.LiveRows = d.CountRows()
	files, dirs, err := d.ReferencedFiles()
	if err != nil {
		return s, err
	}
	for _, f := range files {
		s.LiveBytes += size[f]
	}
	for _, o := range infos {
		for _, dir := range dirs {
			if strings.HasPrefix(o.Key, dir) {
				s.LiveBytes += o.Size
			}
		}
	}
	if s.LiveBytes > 0 {
		s.Ratio = float64(s.BaseBytes) / float64(s.LiveBytes)
	}
	s.RSSMB = float64(gctune.ProcKiB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")) / 1024
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.FDs = len(ents)
	}
	return s, nil
}

// summarize prints the goals' figures to stderr: the storage ratio at the
// end and its worst over the second half, and how RSS, open files and
// p99s moved from the first to the last quarter of the second half.
func summarize(ss []sample, c config) error {
	if len(ss) < 4 {
		return errors.New("too few samples: run longer or sample more often")
	}
	last := ss[len(ss)-1]
	// The last sample is taken as the run stops: its interval is cut short.
	half := ss[len(ss)/2 : len(ss)-1]
	q := max(1, len(half)/4)
	mean := func(xs []sample, f func(sample) float64) float64 {
		var t float64
		for _, x := range xs {
			t += f(x)
		}
		return t / float64(len(xs))
	}
	drift := func(f func(sample) float64) string {
		a, b := mean(half[:q], f), mean(half[len(half)-q:], f)
		if a == 0 {
			return fmt.Sprintf("%.1f -> %.1f", a, b)
		}
		return fmt.Sprintf("%.1f -> %.1f (%+.1f%%)", a, b, (b/a-1)*100)
	}
	worst, lag := 0.0, 0.0
	ratios := make([]float64, len(half))
	for i, s := range half {
		worst = max(worst, s.Ratio)
		ratios[i] = s.Ratio
	}
	slices.Sort(ratios)
	for _, s := range ss {
		lag = max(lag, s.MergeLagMax)
	}
	fmt.Fprintf(os.Stderr, "\nsoak summary (%s, batch %d, rewrite %.0f%%, keyspace %d, merge every %d appends, compact every %d merges, cleanup every %d merges, window %s, grace %s, merge age %s, %s=%s)\n",
		c.duration, c.batch, c.rewrite*100, c.keyspace, c.mergeEvery, c.compactEvery, c.cleanupEvery, c.olderThan, c.grace, c.mergeAge, "LC_MEMORY_BUDGET_BYTES", os.Getenv("LC_MEMORY_BUDGET_BYTES"))
	fmt.Fprintf(os.Stderr, "  appended %d records, %d live rows; %d merges, %d compactions, %d cleanups\n", last.Appended, last.LiveRows, last.Merges, last.Compactions, last.Cleanups)
	fmt.Fprintf(os.Stderr, "  base table on storage / live version: %.2fx at the end (%.1f MB / %.1f MB); over the second half median %.2fx, worst %.2fx (a compaction's predecessor stays for the read grace)\n",
		last.Ratio, float64(last.BaseBytes)/1e6, float64(last.LiveBytes)/1e6, ratios[len(ratios)/2], worst)
	fmt.Fprintf(os.Stderr, "  files at the end: %v; WAL %.1f MB; whole store %.1f MB\n", last.Files, float64(last.WALBytes)/1e6, float64(last.StoreBytes)/1e6)
	fmt.Fprintf(os.Stderr, "  second half, first quarter -> last quarter: RSS MB %s, fds %s, append p99 ms %s, read p99 ms %s\n",
		drift(func(s sample) float64 { return s.RSSMB }), drift(func(s sample) float64 { return float64(s.FDs) }),
		drift(func(s sample) float64 { return s.AppendP99 }), drift(func(s sample) float64 { return s.ReadP99 }))
	fmt.Fprintf(os.Stderr, "  the same, p99 ms by read: get %s, page %s, trajectory %s; collector's share of the worker's CPU %s\n",
		drift(func(s sample) float64 { return s.GetP99 }), drift(func(s sample) float64 { return s.PageP99 }),
		drift(func(s sample) float64 { return s.TrajP99 }), drift(func(s sample) float64 { return s.GCShare * 100 }))
	fmt.Fprintf(os.Stderr, "  worst merge lag seen: %.1f s (merge age %s)\n", lag, c.mergeAge)
	return nil
}

// cpuTimes are a worker's CPU seconds, all and the collector's, from its
// /metrics, and when they were read.
type cpuTimes struct {
	at           time.Time
	total, gcCPU float64
}

// since returns the cores used between p and c and the collector's share.
func (c cpuTimes) since(p cpuTimes) (cores, gcShare float64) {
	d := c.total - p.total
	if p.at.IsZero() || d <= 0 {
		return 0, 0
	}
	return d / c.at.Sub(p.at).Seconds(), (c.gcCPU - p.gcCPU) / d
}

func workerCPU(ctx context.Context, addr string) (cpuTimes, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return cpuTimes{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return cpuTimes{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return cpuTimes{}, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	t := cpuTimes{at: time.Now()}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			t.total, _ = strconv.ParseFloat(v, 64)
		case "go_cpu_classes_gc_total_cpu_seconds_total":
			t.gcCPU, _ = strconv.ParseFloat(v, 64)
		}
	}
	return t, sc.Err()
}

// atomicFloat keeps a maximum between takes.
type atomicFloat struct {
	mu sync.Mutex
	v  float64
}

func (a *atomicFloat) max(v float64) {
	a.mu.Lock()
	a.v = max(a.v, v)
	a.mu.Unlock()
}

func (a *atomicFloat) take() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.v
	a.v = 0
	return v
}

var soakSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String},
	{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func arrowBatch(ids []string, content string, rng *rand.Rand) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, soakSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("r%d", rng.IntN(1000)))
		b.Field(2).(*array.StringBuilder).Append(content)
	}
	return b.NewRecordBatch()
}
