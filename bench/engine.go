package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/wal"
)

// engineBench configures `bench engine`: the store engine (rollout, wal,
// lance/table) in process, without HTTP.
type engineBench struct {
	dir          string
	phases       []string
	appenders    []int
	duration     time.Duration
	recordBytes  int
	pending      []int
	baseRows     int
	listCalls    int
	mergeGens    int
	mergeRows    int
	mergeMaxGens int
	mergeMaxMiB  int64
	cacheMiB     int64
	run          string // suffix of the store names, so runs can share a dir
}

func newBenchEngineCmd() *cobra.Command {
	b := &engineBench{}
	var appenders, pending string
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Benchmark the store engine in process: append throughput and latency, list latency by source and backlog, merge throughput and memory",
		Long: `Runs the rollout store engine in this process against --dir (a local
directory or s3://bucket/prefix with AWS_* settings) and prints one JSON
document:

  append  single-record appends of --record-bytes by N concurrent appenders
          for --duration each: appends/s, latency p50/p90/p99/max, and the
          group commit (WAL entries written, rows per entry).
  list    a page of 25 from each source (fragments, wal, all) over a base of
          --base-rows merged rows with 0, 100, 1000 pending generations:
          p50/p90/max over --list-calls calls, plus the first (cold) call.
  merge   --merge-gens generations of --merge-rows rows, merged in capped
          passes: rows/s and peak heap in use during the merges.

Each phase creates its own stores (names end in a run id).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if b.appenders, err = engineInts(appenders); err != nil {
				return fmt.Errorf("--appenders: %w", err)
			}
			if b.pending, err = engineInts(pending); err != nil {
				return fmt.Errorf("--pending: %w", err)
			}
			slices.Sort(b.pending)
			b.run = strconv.FormatInt(time.Now().Unix(), 36)
			return b.runAll(cmd.Context(), cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&b.dir, "dir", "", "local directory or s3://bucket/prefix (required)")
	f.StringSliceVar(&b.phases, "phases", []string{"append", "list", "merge"}, "phases to run")
	f.StringVar(&appenders, "appenders", "1,16,64", "concurrent appenders, one run each")
	f.DurationVar(&b.duration, "duration", 5*time.Second, "duration of each append run")
	f.IntVar(&b.recordBytes, "record-bytes", 1024, "approximate bytes per record")
	f.StringVar(&pending, "pending", "0,100,1000", "pending generations at which to measure list latency")
	f.IntVar(&b.baseRows, "base-rows", 10_000, "merged base rows under the list benchmark")
	f.IntVar(&b.listCalls, "list-calls", 20, "timed list calls per source and backlog")
	f.IntVar(&b.mergeGens, "merge-gens", 16, "generations to merge")
	f.IntVar(&b.mergeRows, "merge-rows", 5000, "rows per generation to merge")
	f.IntVar(&b.mergeMaxGens, "merge-max-gens", 8, "merge cap: generations per pass")
	f.Int64Var(&b.mergeMaxMiB, "merge-max-mib", 1024, "merge cap: generation MiB per pass")
	f.Int64Var(&b.cacheMiB, "gen-cache-mib", 256, "generation cache of each store (MiB)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func engineInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (b *engineBench) options() rollout.Options {
	return rollout.Options{
		Logger:              slog.New(slog.DiscardHandler),
		PendingWarn:         1 << 30, // the list phase builds a backlog on purpose
		MergeMaxGenerations: b.mergeMaxGens,
		MergeMaxBytes:       b.mergeMaxMiB << 20,
		Cache:               rollout.NewGenCache(b.cacheMiB << 20),
	}
}

func (b *engineBench) runAll(ctx context.Context, cmd *cobra.Command) error {
	root, err := objstore.Open(ctx, b.dir)
	if err != nil {
		return err
	}
	out := map[string]any{
		"dir": b.dir, "go": runtime.Version(), "cpus": runtime.NumCPU(), "gomaxprocs": runtime.GOMAXPROCS(0),
		"record_bytes": b.recordBytes,
	}
	for _, p := range b.phases {
		runtime.GC()
		var res any
		switch p {
		case "append":
			res, err = b.appendPhase(ctx, root)
		case "list":
			res, err = b.listPhase(ctx, root)
		case "merge":
			res, err = b.mergePhase(ctx, root)
		default:
			return fmt.Errorf("unknown phase %q (append, list, merge)", p)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out[p] = res
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func engineLog(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench engine: "+format+"\n", args...)
}

// engineText returns a pool of printable text to cut record contents from.
func engineText() string {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(32 + rng.IntN(95))
	}
	return string(b)
}

// engineRecords builds n records of about size bytes each.
func engineRecords(pool string, rng *rand.Rand, prefix string, from, n, size int) []rollout.Record {
	out := make([]rollout.Record, n)
	cl := max(size-100, 1) // id, rollout id, role, timestamps and the rest
	for i := range out {
		off := rng.IntN(len(pool) - cl)
		text := pool[off : off+cl]
		out[i] = rollout.Record{
			ID: fmt.Sprintf("%s-%09d", prefix, from+i), RolloutID: fmt.Sprintf("%s-ro-%06d", prefix, (from+i)/16),
			SequenceOrder: int32((from + i) % 16), Content: &text,
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// engineQuantile returns the q-quantile of sorted (nearest rank), in ms.
func engineQuantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)) + 0.5)
	return ms(sorted[min(max(i-1, 0), len(sorted)-1)])
}

type engineAppendResult struct {
	Appenders    int     `json:"appenders"`
	Appends      int64   `json:"appends"`
	Errors       int64   `json:"errors"`
	Secs         float64 `json:"secs"`
	AppendsPerS  float64 `json:"appends_per_s"`
	MBPerS       float64 `json:"mb_per_s"`
	P50Ms        float64 `json:"p50_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	WALEntries   uint64  `json:"wal_entries"`
	RowsPerEntry float64 `json:"rows_per_entry"` // the group commit: appends per WAL put
}

func (b *engineBench) appendPhase(ctx context.Context, root objstore.Store) ([]engineAppendResult, error) {
	pool := engineText()
	var out []engineAppendResult
	for _, n := range b.appenders {
		if n < 1 {
			continue
		}
		cat := rollout.NewCatalog(root, rollout.ShardID("bench-engine"), b.options())
		s, err := cat.Create(ctx, fmt.Sprintf("bench-append-%d-%s", n, b.run))
		if err != nil {
			return nil, err
		}
		// The first append claims the shard; it is not timed.
		if _, err := s.Append(ctx, engineRecords(pool, rand.New(rand.NewPCG(0, 0)), "warm", 0, 1, b.recordBytes)); err != nil {
			return nil, err
		}
		lat := make([][]time.Duration, n)
		var errs atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		deadline := start.Add(b.duration)
		for g := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(n), uint64(g)))
				for i := 0; time.Now().Before(deadline); i++ {
					recs := engineRecords(pool, rng, fmt.Sprintf("a%d", g), i, 1, b.recordBytes)
					t0 := time.Now()
					if _, err := s.Append(ctx, recs); err != nil {
						errs.Add(1)
						continue
					}
					lat[g] = append(lat[g], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		all := slices.Concat(lat...)
		slices.Sort(all)
		if err := s.Flush(ctx); err != nil {
			return nil, err
		}
		m, err := wal.LoadManifest(ctx, s.Root(), s.Shard())
		if err != nil {
			return nil, err
		}
		if err := cat.Close(ctx); err != nil {
			return nil, err
		}
		r := engineAppendResult{
			Appenders: n, Appends: int64(len(all)), Errors: errs.Load(), Secs: secs,
			AppendsPerS: float64(len(all)) / secs, MBPerS: float64(len(all)) * float64(b.recordBytes) / 1e6 / secs,
			P50Ms: engineQuantile(all, 0.5), P90Ms: engineQuantile(all, 0.9), P99Ms: engineQuantile(all, 0.99),
			WALEntries: m.ReplayAfter - 1, // the warm-up append took position 1
		}
		if len(all) > 0 {
			r.MaxMs = ms(all[len(all)-1])
		}
		if r.WALEntries > 0 {
			r.RowsPerEntry = float64(len(all)) / float64(r.WALEntries)
		}
		engineLog("append: %d appenders: %.0f appends/s, p50 %.2f ms, p99 %.2f ms, %.1f rows per WAL entry", n, r.AppendsPerS, r.P50Ms, r.P99Ms, r.RowsPerEntry)
		out = append(out, r)
	}
	return out, nil
}

type engineListResult struct {
	Pending int     `json:"pending_generations"`
	Source  string  `json:"source"`
	Calls   int     `json:"calls"`
	FirstMs float64 `json:"first_ms"` // the first call, with a cold generation cache
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	MaxMs   float64 `json:"max_ms"`
	Rows    int     `json:"rows"` // rows on the page
}

// mergeAll merges the store's shard until nothing is pending.
func engineMergeAll(ctx context.Context, s *rollout.Store) ([]*rollout.MergeResult, error) {
	var out []*rollout.MergeResult
	for {
		res, err := s.Merge(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, res)
		if res.Remaining == 0 {
			return out, nil
		}
	}
}

func (b *engineBench) listPhase(ctx context.Context, root objstore.Store) (map[string]any, error) {
	pool := engineText()
	rng := rand.New(rand.NewPCG(3, 4))
	cat := rollout.NewCatalog(root, rollout.ShardID("bench-engine"), b.options())
	defer func() { _ = cat.Close(context.WithoutCancel(ctx)) }()
	s, err := cat.Create(ctx, "bench-list-"+b.run)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for i := 0; i < b.baseRows; i += 1000 {
		if _, err := s.Append(ctx, engineRecords(pool, rng, "base", i, min(1000, b.baseRows-i), b.recordBytes)); err != nil {
			return nil, err
		}
		if err := s.Flush(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := engineMergeAll(ctx, s); err != nil {
		return nil, err
	}
	engineLog("list: %d base rows merged in %.1fs", b.baseRows, time.Since(start).Seconds())
	var results []engineListResult
	p50 := map[string]map[int]float64{}
	have := 0
	for _, level := range b.pending {
		start := time.Now()
		for ; have < level; have++ {
			if _, err := s.Append(ctx, engineRecords(pool, rng, "pend", have*5, 5, b.recordBytes)); err != nil {
				return nil, err
			}
			if err := s.Flush(ctx); err != nil {
				return nil, err
			}
		}
		engineLog("list: %d pending generations (built in %.1fs)", level, time.Since(start).Seconds())
		for _, src := range []rollout.Source{rollout.SourceFragments, rollout.SourceWAL, rollout.SourceAll} {
			r := engineListResult{Pending: level, Source: string(src), Calls: b.listCalls}
			var ds []time.Duration
			for i := 0; i <= b.listCalls; i++ {
				t0 := time.Now()
				page, err := s.List(ctx, rollout.ListOptions{Source: src, Limit: 25})
				d := time.Since(t0)
				if err != nil {
					return nil, fmt.Errorf("list %s at %d pending: %w", src, level, err)
				}
				if i == 0 {
					r.FirstMs, r.Rows = ms(d), len(page.Records)
					continue
				}
				ds = append(ds, d)
			}
			slices.Sort(ds)
			r.P50Ms, r.P90Ms, r.MaxMs = engineQuantile(ds, 0.5), engineQuantile(ds, 0.9), ms(ds[len(ds)-1])
			if p50[r.Source] == nil {
				p50[r.Source] = map[int]float64{}
			}
			p50[r.Source][level] = r.P50Ms
			engineLog("list: %s at %d pending: first %.2f ms, p50 %.2f ms, p90 %.2f ms", src, level, r.FirstMs, r.P50Ms, r.P90Ms)
			results = append(results, r)
		}
	}
	out := map[string]any{"base_rows": b.baseRows, "results": results}
	if len(b.pending) > 1 {
		lo, hi := b.pending[0], b.pending[len(b.pending)-1]
		ratio := p50["fragments"][hi] / max(p50["fragments"][lo], 1e-3)
		out["goals"] = map[string]any{
			"fragments_p50_ratio":         fmt.Sprintf("%d/%d pending", hi, lo),
			"fragments_ratio":             ratio,
			"fragments_ratio_ok":          ratio <= 1.2,
			"all_p50_ms_at_max_pending":   p50["all"][hi],
			"all_p50_under_100ms":         p50["all"][hi] <= 100,
			"wal_p50_ms_at_max_pending":   p50["wal"][hi],
			"max_pending_generations":     hi,
			"fragments_p50_ms_by_backlog": p50["fragments"],
		}
	}
	return out, nil
}

type engineMergePass struct {
	Generations int     `json:"generations"`
	Rows        int64   `json:"rows"`
	Secs        float64 `json:"secs"`
}

func (b *engineBench) mergePhase(ctx context.Context, root objstore.Store) (map[string]any, error) {
	pool := engineText()
	rng := rand.New(rand.NewPCG(5, 6))
	cat := rollout.NewCatalog(root, rollout.ShardID("bench-engine"), b.options())
	defer func() { _ = cat.Close(context.WithoutCancel(ctx)) }()
	s, err := cat.Create(ctx, "bench-merge-"+b.run)
	if err != nil {
		return nil, err
	}
	for g := 0; g < b.mergeGens; g++ {
		for i := 0; i < b.mergeRows; i += 1000 {
			if _, err := s.Append(ctx, engineRecords(pool, rng, fmt.Sprintf("m%03d", g), i, min(1000, b.mergeRows-i), b.recordBytes)); err != nil {
				return nil, err
			}
		}
		if err := s.Flush(ctx); err != nil {
			return nil, err
		}
	}
	m, err := wal.LoadManifest(ctx, s.Root(), s.Shard())
	if err != nil {
		return nil, err
	}
	var genBytes int64
	for _, g := range m.Generations {
		genBytes += g.Bytes
	}
	engineLog("merge: %d generations, %d rows, %.1f MB written", len(m.Generations), int64(b.mergeGens*b.mergeRows), float64(genBytes)/1e6)

	runtime.GC()
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	baseline := st.HeapInuse
	var peak atomic.Uint64
	peak.Store(baseline)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var st runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&st)
				if st.HeapInuse > peak.Load() {
					peak.Store(st.HeapInuse)
				}
			}
		}
	}()
	start := time.Now()
	var passes []engineMergePass
	var rows int64
	for {
		t0 := time.Now()
		res, err := s.Merge(ctx)
		if err != nil {
			close(stop)
			return nil, err
		}
		passes = append(passes, engineMergePass{Generations: res.Generations, Rows: res.Rows, Secs: time.Since(t0).Seconds()})
		rows += res.Rows
		if res.Remaining == 0 {
			break
		}
	}
	secs := time.Since(start).Seconds()
	close(stop)
	<-sampled
	mib := func(n uint64) float64 { return float64(n) / (1 << 20) }
	out := map[string]any{
		"generations": len(m.Generations), "rows": rows, "generation_mb": float64(genBytes) / 1e6,
		"passes": passes, "secs": secs, "rows_per_s": float64(rows) / secs, "mb_per_s": float64(genBytes) / 1e6 / secs,
		"caps":                      map[string]any{"generations": b.mergeMaxGens, "mib": b.mergeMaxMiB},
		"gen_cache_mib":             b.cacheMiB,
		"heap_inuse_baseline_mib":   mib(baseline),
		"heap_inuse_peak_mib":       mib(peak.Load()),
		"heap_inuse_peak_delta_mib": mib(peak.Load() - baseline),
		"vm_hwm_mib":                engineVmHWM(), // the whole process so far, every phase
	}
	engineLog("merge: %d rows in %.1fs (%.0f rows/s), peak heap in use +%.0f MiB", rows, secs, float64(rows)/secs, mib(peak.Load()-baseline))
	return out, nil
}

// engineVmHWM returns the process's peak resident set in MiB (Linux), or 0.
func engineVmHWM() float64 {
	return float64(gctune.ProcKiB("/proc/self/status", "VmHWM")) / 1024
}
