package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/devmode"
	"github.com/lance-context/lance-context/master"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// benchMaster configures `bench master`.
type benchMaster struct {
	dir          string
	stores       int
	rowsPerStore int
	parallel     int
	listCalls    int
	baseRows     int
	pending      int
	recordCalls  int
	cpuProfile   string
}

func newBenchMasterCmd() *cobra.Command {
	b := &benchMaster{}
	cmd := &cobra.Command{
		Use:   "master",
		Short: "Benchmark the master's data-browser API: the experiments list over many stores, records by source and backlog",
		Long: `Runs an embedded etcd and a master in this process over --dir (default: a
temp dir, removed afterwards) and prints one JSON document:

  experiments  --stores stores of --rows-per-store rows each (one pending
               generation), registered in etcd; once the statistics cache
               is warm, GET /api/v1/experiments (first page) and
               ?search=store-09 (a 100-store match): p50/p99/max over
               --list-calls calls.
  records      one store with --base-rows merged rows, first with no pending
               generation, then with --pending generations of 2 records:
               GET /api/v1/experiments/{name}/records?source=S&limit=25 for
               fragments, wal and all; p50/p90/max over --record-calls calls
               after one warm-up call (reported as first_ms).

The master runs with maintenance off, so nothing merges the backlog.
Goals: fragments p50 flat in the backlog (ratio at --pending over none
<= 1.2); all p50 <= 150 ms at 1,000 pending generations on local disk.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return b.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVar(&b.dir, "dir", "", "empty local directory for data and etcd (default: a temp dir, removed afterwards)")
	f.IntVar(&b.stores, "stores", 1000, "stores for the experiments list")
	f.IntVar(&b.rowsPerStore, "rows-per-store", 3, "rows appended to each of those stores")
	f.IntVar(&b.parallel, "parallel", 8, "stores created at once")
	f.IntVar(&b.listCalls, "list-calls", 50, "timed calls per list query")
	f.IntVar(&b.baseRows, "base-rows", 10_000, "merged rows of the records store")
	f.IntVar(&b.pending, "pending", 1000, "pending generations of the records store in the second round")
	f.IntVar(&b.recordCalls, "record-calls", 20, "timed calls per records query")
	f.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed records calls at the full backlog here")
	return cmd
}

func bmMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// bmLatency summarizes timed calls.
type bmLatency struct {
	Calls   int     `json:"calls"`
	FirstMs float64 `json:"first_ms,omitempty"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
	Items   int     `json:"items"` // in the last answer
	Total   int     `json:"total,omitempty"`
}

func bmSummarize(ds []time.Duration) bmLatency {
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		return bmMs(s[min(max(i, 0), len(s)-1)])
	}
	return bmLatency{Calls: len(s), P50Ms: q(0.5), P90Ms: q(0.9), P99Ms: q(0.99), MaxMs: bmMs(s[len(s)-1])}
}

// bmGet fetches url and decodes its JSON into v.
func bmGet(ctx context.Context, cl *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}

// bmTime calls url n times after warm warm-up calls.
func bmTime(ctx context.Context, cl *http.Client, url string, warm, n int, count func([]byte) (int, int)) (bmLatency, error) {
	var first time.Duration
	for i := 0; i < warm; i++ {
		start := time.Now()
		var raw json.RawMessage
		if err := bmGet(ctx, cl, url, &raw); err != nil {
			return bmLatency{}, err
		}
		if i == 0 {
			first = time.Since(start)
		}
	}
	ds := make([]time.Duration, 0, n)
	var raw json.RawMessage
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := bmGet(ctx, cl, url, &raw); err != nil {
			return bmLatency{}, err
		}
		ds = append(ds, time.Since(start))
	}
	l := bmSummarize(ds)
	l.FirstMs = bmMs(first)
	l.Items, l.Total = count(raw)
	return l, nil
}

func bmRecords(prefix string, from, n int) []rollout.Record {
	out := make([]rollout.Record, n)
	for i := range out {
		text := fmt.Sprintf("step %d of %s: %s", from+i, prefix, strings.Repeat("lorem ipsum ", 16))
		out[i] = rollout.Record{ID: fmt.Sprintf("%s-%07d", prefix, from+i), RolloutID: fmt.Sprintf("%s-ro-%05d", prefix, (from+i)/16),
			SequenceOrder: int32((from + i) % 16), Content: &text}
	}
	return out
}

func (b *benchMaster) run(ctx context.Context, out io.Writer) error {
	if b.stores < 1 || b.listCalls < 1 || b.recordCalls < 1 || b.parallel < 1 {
		return errors.New("--stores, --list-calls, --record-calls and --parallel must be positive")
	}
	// Warnings (many pending generations, on purpose) would flood stderr.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	dir := b.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "lc-bench-master-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	e, etcdURL, err := devmode.StartEtcd(filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	defer e.Close()
	c, err := coord.Connect(ctx, coord.Config{Endpoints: []string{etcdURL}})
	if err != nil {
		return err
	}
	defer c.Close()
	root, err := objstore.Open(ctx, filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	writer := rollout.NewCatalog(root, rollout.ShardID("bench-writer"), rollout.Options{})
	defer func() { _ = writer.Close(context.Background()) }()
	res := map[string]any{"data_dir": "local", "stores": b.stores, "rows_per_store": b.rowsPerStore}

	// Stores for the list, created as workers would: table, rows, registry.
	start := time.Now()
	names := make(chan int)
	errc := make(chan error, b.parallel)
	var wg sync.WaitGroup
	for w := 0; w < b.parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				name := fmt.Sprintf("store-%04d", i)
				st, err := writer.Create(ctx, name)
				if err == nil && b.rowsPerStore > 0 {
					if _, err = st.Append(ctx, bmRecords(name, 0, b.rowsPerStore)); err == nil {
						err = st.Close(ctx) // seals the rows and stops the shard writer
					}
				}
				if err == nil {
					err = c.RegisterStore(ctx, name)
				}
				if err != nil {
					errc <- fmt.Errorf("create %s: %w", name, err)
					return
				}
			}
		}()
	}
feed:
	for i := 0; i < b.stores; i++ {
		select {
		case names <- i:
		case err := <-errc:
			close(names)
			wg.Wait()
			return err
		case <-ctx.Done():
			break feed
		}
	}
	close(names)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	res["create_stores_secs"] = time.Since(start).Seconds()

	reg := prometheus.NewRegistry()
	mcat := rollout.NewCatalog(root, rollout.ShardID("bench-master"), rollout.Options{})
	m := master.New(master.Config{ID: "bench", Maintenance: false}, c, mcat, reg)
	srv := httptest.NewServer(m.Handler(reg, ""))
	defer srv.Close()
	mctx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	defer func() { stop(); <-ran }() // before etcd and the client close
	start = time.Now()
	go func() { m.Run(mctx); close(ran) }()
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 5 * time.Minute}

	// Warm: every store listed with fresh statistics.
	type page struct {
		Experiments []struct {
			Stale bool `json:"stale"`
		} `json:"experiments"`
		Total int  `json:"total"`
		Stale bool `json:"stale"`
	}
	for {
		var p page
		if err := bmGet(ctx, cl, srv.URL+"/api/v1/experiments?limit=1000", &p); err != nil {
			return err
		}
		warm := p.Total == b.stores && !p.Stale
		for _, x := range p.Experiments {
			warm = warm && !x.Stale
		}
		if warm {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("the statistics cache did not warm in 10 minutes (%d stores listed)", p.Total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res["cache_warm_secs"] = time.Since(start).Seconds()
	countPage := func(raw []byte) (int, int) {
		var p struct {
			Experiments []json.RawMessage `json:"experiments"`
			Total       int               `json:"total"`
		}
		_ = json.Unmarshal(raw, &p)
		return len(p.Experiments), p.Total
	}
	listFirst, err := bmTime(ctx, cl, srv.URL+"/api/v1/experiments", 1, b.listCalls, countPage)
	if err != nil {
		return err
	}
	listSearch, err := bmTime(ctx, cl, srv.URL+"/api/v1/experiments?search=store-09", 1, b.listCalls, countPage)
	if err != nil {
		return err
	}
	res["experiments_first_page"], res["experiments_search"] = listFirst, listSearch

	// The records store: merged base rows, then a backlog.
	const name = "records-bench"
	st, err := writer.Create(ctx, name)
	if err != nil {
		return err
	}
	start = time.Now()
	for i := 0; i < b.baseRows; i += 1000 {
		if _, err := st.Append(ctx, bmRecords("base", i, min(1000, b.baseRows-i))); err != nil {
			return err
		}
		if err := st.Flush(ctx); err != nil {
			return err
		}
	}
	for {
		mr, err := st.Merge(ctx)
		if err != nil {
			return err
		}
		if mr.Remaining == 0 {
			break
		}
	}
	res["base_rows"], res["base_build_secs"] = b.baseRows, time.Since(start).Seconds()
	countRecords := func(raw []byte) (int, int) {
		var p struct {
			Records []json.RawMessage `json:"records"`
		}
		_ = json.Unmarshal(raw, &p)
		return len(p.Records), 0
	}
	sources := []string{"fragments", "all", "wal"} // all before wal: its first call meets a cold generation cache
	timeRecords := func() (map[string]bmLatency, error) {
		out := map[string]bmLatency{}
		for _, s := range sources {
			l, err := bmTime(ctx, cl, srv.URL+"/api/v1/experiments/"+name+"/records?source="+s+"&limit=25", 1, b.recordCalls, countRecords)
			if err != nil {
				return nil, err
			}
			out[s] = l
		}
		return out, nil
	}
	at0, err := timeRecords()
	if err != nil {
		return err
	}
	start = time.Now()
	for g := 0; g < b.pending; g++ {
		if _, err := st.Append(ctx, bmRecords("pend", 2*g, 2)); err != nil {
			return err
		}
		if err := st.Flush(ctx); err != nil {
			return err
		}
	}
	res["backlog_build_secs"] = time.Since(start).Seconds()
	var stats struct {
		PendingGenerations int   `json:"pending_generations"`
		Rows               int64 `json:"rows"`
		Fragments          int   `json:"fragments"`
	}
	if err := bmGet(ctx, cl, srv.URL+"/api/v1/experiments/"+name+"?fresh=true", &stats); err != nil {
		return err
	}
	if b.cpuProfile != "" {
		f, err := os.Create(b.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
	}
	atN, err := timeRecords()
	if b.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	res["records"] = map[string]any{
		"pending_0":                                        at0,
		fmt.Sprintf("pending_%d", b.pending):               atN,
		"store_after_backlog":                              stats,
		"fragments_p50_ratio_backlog_over_none":            atN["fragments"].P50Ms / at0["fragments"].P50Ms,
		fmt.Sprintf("all_p50_ms_at_%d_pending", b.pending): atN["all"].P50Ms,
	}
	ratio := atN["fragments"].P50Ms / at0["fragments"].P50Ms
	res["goals"] = map[string]any{
		"fragments_flat":          map[string]any{"ratio": ratio, "max": 1.2, "met": ratio <= 1.2},
		"all_at_backlog_le_150ms": map[string]any{"p50_ms": atN["all"].P50Ms, "pending": b.pending, "met": atN["all"].P50Ms <= 150},
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
