// Command snapshots measures snapshots and bulk export (issue 31) against a
// worker served in process over loopback HTTP, on a local data directory:
//
//   - the latency of POST .../snapshots with 0, 1k and 100k pending rows
//     (sealed generations of 5k rows, the last 1k unsealed), and of 20
//     concurrent callers per wave under continuous ingest (p50, p99, max,
//     and the distinct versions a wave answered);
//   - the export of a large store (built with Arrow appends and merges) in
//     rows/s: our scan in process (the ceiling), GET .../export as an Arrow
//     IPC stream written to a file, GET .../export?format=parquet (encoded
//     by the worker with pqarrow, zstd) written to a file as it comes (what
//     lance-context export does), the way before it (the Arrow IPC stream
//     encoded as Parquet by the client; -client-parquet=false skips it),
//     and, in the same run, DuckDB's COPY (SELECT * FROM base) TO
//     'x.parquet' over the same base table (fed by the same in-process scan
//     through DuckDB's Arrow scan: build with -tags duckdb_arrow; without it
//     that line is skipped).
//
// One JSON line per measurement on stdout, a readable summary on stderr.
//
//	go run -tags duckdb_arrow ./bench/snapshots -rows 10000000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
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
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

type config struct {
	dir                    string
	rows                   int
	batch                  int
	waves, callers         int
	ingestBatch            int
	skipSnapshots, skipExp bool
	keep                   bool
	cpuProfile             string
	cpuProfileHTTP         string
	quick                  bool
	cpuProfileParquet      string
	clientParquet          bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "", "data directory (default: a fresh temporary one, removed at the end)")
	flag.IntVar(&cfg.rows, "rows", 1_000_000, "rows of the export store")
	flag.IntVar(&cfg.batch, "batch", 50_000, "rows per Arrow append while building the export store")
	flag.IntVar(&cfg.waves, "waves", 10, "waves of concurrent snapshot callers")
	flag.IntVar(&cfg.callers, "callers", 20, "concurrent snapshot callers per wave")
	flag.IntVar(&cfg.ingestBatch, "ingest-batch", 100, "rows per append of the background ingest during the waves")
	flag.BoolVar(&cfg.skipSnapshots, "skip-snapshots", false, "skip the snapshot latencies")
	flag.BoolVar(&cfg.skipExp, "skip-export", false, "skip the export")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the data directory")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the in-process scan here")
	flag.StringVar(&cfg.cpuProfileHTTP, "cpuprofile-http", "", "write a CPU profile of the full-width GET .../export (Arrow IPC, discarded) here: server and client, one process")
	flag.StringVar(&cfg.cpuProfileParquet, "cpuprofile-parquet", "", "write a CPU profile of GET .../export?format=parquet written to a file here")
	flag.BoolVar(&cfg.clientParquet, "client-parquet", true, "also time the way before format=parquet: the Arrow IPC stream encoded as Parquet by the client")
	flag.BoolVar(&cfg.quick, "quick", false, "export: only the in-process scan and the Arrow IPC streams discarded (no files, Parquet or DuckDB)")
	flag.Parse()
	// The worker's collector settings (GOGC 300, the memory limit), as
	// lance-context worker sets them: the export is measured as it serves.
	if err := gctune.Tune(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func run(ctx context.Context, cfg config) error {
	if cfg.dir == "" {
		d, err := os.MkdirTemp("", "lc-bench-snapshots-")
		if err != nil {
			return err
		}
		cfg.dir = d
		if !cfg.keep {
			defer os.RemoveAll(d)
		}
	}
	root, err := objstore.NewLocal(cfg.dir)
	if err != nil {
		return err
	}
	wcfg, err := worker.FromEnv()
	if err != nil {
		return err
	}
	wcfg.DataDir = cfg.dir
	wcfg.IndexColumns = []string{}
	catalog := rollout.NewCatalog(root, rollout.ShardID("bench"), wcfg.StoreOptions())
	defer catalog.Close(context.WithoutCancel(ctx))
	srv := httptest.NewServer(worker.NewServer(wcfg, catalog, worker.NewRegistry()).Handler())
	defer srv.Close()
	c := client.New(srv.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if !cfg.skipSnapshots {
		if err := benchSnapshots(ctx, cfg, c); err != nil {
			return err
		}
	}
	if !cfg.skipExp {
		if err := benchExport(ctx, cfg, catalog, c); err != nil {
			return err
		}
	}
	return nil
}

func records(prefix string, n int) []api.Record {
	out := make([]api.Record, n)
	content := strings.Repeat("rollout text ", 8)
	for i := range out {
		rw := rand.Float32()
		out[i] = api.Record{ID: fmt.Sprintf("%s-%08d", prefix, i), RolloutID: fmt.Sprintf("%s-r%05d", prefix, i/16), SequenceOrder: int32(i % 16), Content: &content, Reward: &rw}
	}
	return out
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchSnapshots times snapshot calls with 0, 1k and 100k pending rows,
// then waves of concurrent callers under ingest.
func benchSnapshots(ctx context.Context, cfg config, c *client.Client) error {
	const store = "snaps"
	if _, err := c.CreateStore(ctx, store); err != nil {
		return err
	}
	// A merged base to start from.
	for i := range 2 {
		if _, err := c.Append(ctx, store, records(fmt.Sprintf("base%d", i), 10000), client.AppendOptions{Flush: true}); err != nil {
			return err
		}
	}
	if _, err := c.Merge(ctx, store); err != nil {
		return err
	}
	seq := 0
	for _, pending := range []int{0, 1000, 100_000} {
		var lat []time.Duration
		for rep := range 3 {
			seq++
			prefix := fmt.Sprintf("p%d", seq)
			// Sealed generations of 5k rows; the last 1k (or all, when
			// fewer) unsealed.
			for off := 0; off < pending; off += 5_000 {
				n := min(5_000, pending-off)
				sealed := n
				if off+n == pending {
					sealed = max(n-1000, 0)
				}
				if sealed > 0 {
					if _, err := c.Append(ctx, store, records(fmt.Sprintf("%s-%d", prefix, off), sealed), client.AppendOptions{Flush: true}); err != nil {
						return err
					}
				}
				if n > sealed {
					if _, err := c.Append(ctx, store, records(fmt.Sprintf("%s-%du", prefix, off), n-sealed), client.AppendOptions{}); err != nil {
						return err
					}
				}
			}
			start := time.Now()
			sn, err := c.CreateSnapshot(ctx, store, 600, "bench")
			if err != nil {
				return err
			}
			lat = append(lat, time.Since(start))
			_ = rep
			if err := c.ReleaseSnapshot(ctx, store, sn.ID); err != nil {
				return err
			}
		}
		emit(map[string]any{"bench": "snapshot", "pending_rows": pending, "ms": []float64{ms(lat[0]), ms(lat[1]), ms(lat[2])}, "median_ms": ms(pct(lat, 0.5))})
		say("snapshot with %7d pending rows: median %8.1f ms (%.1f, %.1f, %.1f)", pending, ms(pct(lat, 0.5)), ms(lat[0]), ms(lat[1]), ms(lat[2]))
	}

	// Waves of concurrent callers while an appender ingests.
	ictx, stop := context.WithCancel(ctx)
	var ingested atomic.Int64
	var iwg sync.WaitGroup
	iwg.Add(1)
	go func() {
		defer iwg.Done()
		for i := 0; ictx.Err() == nil; i++ {
			if _, err := c.Append(ictx, store, records(fmt.Sprintf("ing%06d", i), cfg.ingestBatch), client.AppendOptions{}); err == nil {
				ingested.Add(int64(cfg.ingestBatch))
			}
		}
	}()
	var all []time.Duration
	maxVersions := 0
	wavesStart := time.Now()
	for range cfg.waves {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var lat []time.Duration
		var snaps []*api.Snapshot
		var firstErr error
		for range cfg.callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				sn, err := c.CreateSnapshot(ctx, store, 600, "wave")
				d := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					firstErr = err
					return
				}
				lat = append(lat, d)
				snaps = append(snaps, sn)
			}()
		}
		wg.Wait()
		if firstErr != nil {
			stop()
			return firstErr
		}
		versions := map[uint64]bool{}
		for _, sn := range snaps {
			versions[sn.Version] = true
			if err := c.ReleaseSnapshot(ctx, store, sn.ID); err != nil {
				stop()
				return err
			}
		}
		maxVersions = max(maxVersions, len(versions))
		all = append(all, lat...)
	}
	secs := time.Since(wavesStart).Seconds()
	stop()
	iwg.Wait()
	rate := float64(ingested.Load()) / secs
	emit(map[string]any{"bench": "snapshot_concurrent", "callers": cfg.callers, "waves": cfg.waves, "p50_ms": ms(pct(all, 0.5)), "p99_ms": ms(pct(all, 0.99)), "max_ms": ms(pct(all, 1)),
		"max_distinct_versions_per_wave": maxVersions, "ingest_rows_per_s": rate})
	say("%d concurrent callers x %d waves under ingest of %.0f rows/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms; at most %d distinct versions per wave",
		cfg.callers, cfg.waves, rate, ms(pct(all, 0.5)), ms(pct(all, 0.99)), ms(pct(all, 1)), maxVersions)
	return nil
}

// buildBatch makes n rows of the export store as one Arrow batch.
func buildBatch(prefix string, n int) arrow.RecordBatch {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "rollout_id", Type: arrow.BinaryTypes.String},
		{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int32},
		{Name: "content", Type: arrow.BinaryTypes.String},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float32},
		{Name: "policy_version", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	content := strings.Repeat("a step of a rollout, ", 6)
	for i := range n {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%09d", prefix, i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%s-r%07d", prefix, i/32))
		b.Field(2).(*array.Int32Builder).Append(int32(i % 32))
		b.Field(3).(*array.StringBuilder).Append(content)
		b.Field(4).(*array.Float32Builder).Append(rand.Float32())
		b.Field(5).(*array.StringBuilder).Append(fmt.Sprintf("v%d", i%7))
	}
	return b.NewRecordBatch()
}

// benchExport builds the export store and times each way of exporting it.
func benchExport(ctx context.Context, cfg config, catalog *rollout.Catalog, c *client.Client) error {
	const store = "big"
	// With -dir and -keep, a second run reuses the store the first built.
	st, err := catalog.Open(ctx, store)
	build := errors.Is(err, rollout.ErrNotFound)
	if build {
		st, err = catalog.Create(ctx, store)
	}
	if err != nil {
		return err
	}
	start := time.Now()
	for off := 0; build && off < cfg.rows; off += cfg.batch {
		b := buildBatch(fmt.Sprintf("b%09d", off), min(cfg.batch, cfg.rows-off))
		_, err := st.AppendArrow(ctx, b)
		b.Release()
		if err != nil {
			return err
		}
		if err := st.Flush(ctx); err != nil {
			return err
		}
		if (off/cfg.batch)%20 == 19 || off+cfg.batch >= cfg.rows {
			for {
				res, err := st.Merge(ctx)
				if err != nil {
					return err
				}
				if res.Remaining == 0 {
					break
				}
			}
			say("built %d rows (%.0f s)", min(off+cfg.batch, cfg.rows), time.Since(start).Seconds())
		}
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	size := dirSize(filepath.Join(cfg.dir, store+".rollout.lance", "data"))
	emit(map[string]any{"bench": "export_store", "rows": stats.BaseRows, "fragments": stats.Fragments, "data_bytes": size, "build_seconds": time.Since(start).Seconds()})
	say("export store: %d rows in %d fragments, %.0f MB of data files, built in %.0f s", stats.BaseRows, stats.Fragments, float64(size)/1e6, time.Since(start).Seconds())
	rows := stats.BaseRows
	out := filepath.Join(cfg.dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// Each way's figures: wall time, and the process's CPU time (server and
	// client together, one process) since the previous report, which a
	// loaded machine disturbs less than the wall clock.
	lastCPU := cpuSeconds()
	report := func(name string, n int64, secs float64, bytes int64) {
		cpu := cpuSeconds()
		used := cpu - lastCPU
		lastCPU = cpu
		emit(map[string]any{"bench": "export", "way": name, "rows": n, "seconds": secs, "rows_per_s": float64(n) / secs, "bytes": bytes, "cpu_seconds": used})
		say("%-44s %9d rows %7.2f s %11.0f rows/s %8.1f MB  cpu %6.2f s (%.0f rows per cpu-s)", name, n, secs, float64(n)/secs, float64(bytes)/1e6, used, float64(n)/used)
	}
	opts := rollout.ExportOptions{Source: rollout.SourceFragments}

	// 1. Our scan, in process, batches discarded: the ceiling.
	if cfg.cpuProfile != "" {
		pf, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
	}
	t0 := time.Now()
	var n int64
	err = st.Export(ctx, opts, func(b arrow.RecordBatch) error { n += b.NumRows(); return nil })
	if cfg.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	report("scan in process (discard)", n, time.Since(t0).Seconds(), 0)

	// 2. GET .../export, the Arrow IPC stream as it comes, into a file.
	if err := exportArrowFile(ctx, cfg, c, store, out, rows, report); err != nil {
		return err
	}

	// 2b. The same stream, discarded (encoding and loopback HTTP only), and
	// a narrow projection (what a learner reads) the same way.
	for _, cols := range [][]string{nil, {"id", "rollout_id", "sequence_order", "reward", "policy_version"}} {
		if cols == nil && cfg.cpuProfileHTTP != "" {
			pf, err := os.Create(cfg.cpuProfileHTTP)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(pf); err != nil {
				return err
			}
		}
		t0 = time.Now()
		resp, err := c.OpenExport(ctx, store, client.ExportOptions{Source: api.SourceFragments, Columns: cols})
		if err != nil {
			return err
		}
		// Read in 1 MiB slices, as a reader that decodes the stream does
		// (io.Copy into io.Discard reads 8 KiB at a time: a syscall each).
		nb, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, make([]byte, 1<<20))
		resp.Body.Close()
		if cols == nil && cfg.cpuProfileHTTP != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			return err
		}
		if got, err := client.ExportRows(resp); err != nil || got != rows {
			return fmt.Errorf("export stream: %d rows, %v (want %d)", got, err, rows)
		}
		name := "HTTP export -> Arrow IPC stream, discarded"
		if cols != nil {
			name = fmt.Sprintf("HTTP export of %d columns -> discarded", len(cols))
		}
		report(name, rows, time.Since(t0).Seconds(), nb)
	}
	if cfg.quick {
		return nil
	}

	// 3. Parquet as lance-context export writes it: encoded by the worker
	// (format=parquet, pqarrow, zstd), the bytes written to a file as
	// they come.
	if cfg.cpuProfileParquet != "" {
		pf, err := os.Create(cfg.cpuProfileParquet)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
	}
	t0 = time.Now()
	n, nb, err := exportParquetFile(ctx, c, store, filepath.Join(out, "x.parquet"))
	if cfg.cpuProfileParquet != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	report("HTTP export?format=parquet -> file", n, time.Since(t0).Seconds(), nb)

	// 3b. Before: the Arrow IPC stream encoded as Parquet by the client.
	if cfg.clientParquet {
		t0 = time.Now()
		n, nb, err = exportParquet(ctx, c, store, filepath.Join(out, "client.parquet"))
		if err != nil {
			return err
		}
		report("HTTP export Arrow IPC -> Parquet in the client", n, time.Since(t0).Seconds(), nb)
	}

	// 4. DuckDB's COPY over the same base table, fed by the same scan.
	t0 = time.Now()
	n, err = duckCopy(ctx, st, filepath.Join(out, "duck.parquet"))
	switch {
	case err == errNoDuckArrow:
		say("DuckDB COPY skipped: %v", err)
	case err != nil:
		return err
	default:
		report("DuckDB COPY (SELECT *) TO parquet (zstd)", n, time.Since(t0).Seconds(), fileSize(filepath.Join(out, "duck.parquet")))
	}
	return nil
}

// exportParquetFile writes GET .../export?format=parquet to path as it
// comes, as lance-context export does, and checks the row count.
func exportParquetFile(ctx context.Context, c *client.Client, store, path string) (int64, int64, error) {
	resp, err := c.OpenExport(ctx, store, client.ExportOptions{Source: api.SourceFragments, Format: "parquet"})
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	nb, err := io.CopyBuffer(struct{ io.Writer }{f}, resp.Body, make([]byte, 1<<20))
	if err != nil {
		return 0, 0, err
	}
	n, err := client.ExportRows(resp)
	if err != nil {
		return 0, 0, err
	}
	return n, nb, f.Sync()
}

// exportParquet is the way before format=parquet: the Arrow IPC stream
// decoded by the client and encoded there with the same writer.
func exportParquet(ctx context.Context, c *client.Client, store, path string) (int64, int64, error) {
	es, err := c.OpenExportStream(ctx, store, client.ExportOptions{Source: api.SourceFragments})
	if err != nil {
		return 0, 0, err
	}
	defer es.Close()
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	fw, err := rollout.NewParquetWriter(bw, es.Schema())
	if err != nil {
		return 0, 0, err
	}
	for es.Next() {
		if err := fw.Write(es.RecordBatch()); err != nil {
			return 0, 0, err
		}
	}
	n, err := es.Finish()
	if err != nil {
		return 0, 0, err
	}
	if err := fw.Close(); err != nil {
		return 0, 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, 0, err
	}
	return n, fileSize(path), nil
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// exportArrowFile times GET .../export written as it comes to an Arrow IPC
// stream file (skipped with -quick).
func exportArrowFile(ctx context.Context, cfg config, c *client.Client, store, out string, rows int64, report func(string, int64, float64, int64)) error {
	if cfg.quick {
		return nil
	}
	t0 := time.Now()
	resp, err := c.OpenExport(ctx, store, client.ExportOptions{Source: api.SourceFragments})
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "x.arrows"))
	if err != nil {
		return err
	}
	nb, err := io.Copy(f, resp.Body)
	resp.Body.Close()
	f.Close()
	if err != nil {
		return err
	}
	if got, err := client.ExportRows(resp); err != nil || got != rows {
		return fmt.Errorf("export stream: %d rows, %v (want %d)", got, err, rows)
	}
	report("HTTP export -> Arrow IPC stream file", rows, time.Since(t0).Seconds(), nb)
	return nil
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
