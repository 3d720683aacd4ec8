// Command scale measures how key reads, lists, merges and index builds of
// one rollout store scale with its size (100k, 1M, 10M rows by default),
// and runs LanceDB 0.31 on the same table, without and with its own BTree
// indexes, for comparison. See bench/README.md.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

type config struct {
	dir          string
	sizes        []int
	recordBytes  int
	calls        int
	fragRows     int
	lancedb      bool
	interop      string
	callsNo      int
	merges       int
	profile      string
	readProfile  string
	reuse        bool
	buildProfile string
	measure      map[string]bool
	warmup       int
	compactMin   int
	osCache      string
	http         httpConfig
}

func main() {
	var c config
	var sizes string
	flag.StringVar(&c.dir, "dir", "", "a new local directory for the store (required)")
	flag.StringVar(&sizes, "sizes", "100000,1000000,10000000", "base sizes to measure at, ascending")
	flag.IntVar(&c.recordBytes, "record-bytes", 1024, "approximate content bytes per record")
	flag.IntVar(&c.calls, "calls", 200, "timed calls per read measurement")
	flag.IntVar(&c.fragRows, "fragment-rows", 1<<20, "rows per loaded fragment")
	flag.BoolVar(&c.lancedb, "lancedb", true, "also run LanceDB 0.31 (node test/interop/bench_index.mjs)")
	flag.StringVar(&c.interop, "interop", "test/interop", "directory of bench_index.mjs (with node_modules)")
	flag.IntVar(&c.callsNo, "lancedb-calls-noindex", 5, "timed LanceDB calls per measurement without an index")
	flag.IntVar(&c.merges, "merges", 5, "merges of 1,000 new rows timed at each size")
	flag.StringVar(&c.profile, "merge-cpuprofile", "", "write a CPU profile of the timed merges (all sizes) to this file")
	flag.StringVar(&c.readProfile, "read-cpuprofile", "", "write a CPU profile of the timed reads (all sizes) to this file")
	flag.BoolVar(&c.reuse, "reuse", false, "reuse the store a previous run left in --dir (rows already loaded are not loaded again)")
	flag.StringVar(&c.buildProfile, "build-cpuprofile", "", "write a CPU profile of the index build to this file")
	flag.IntVar(&c.warmup, "warmup", 20, "untimed calls of each read before the timed ones")
	flag.IntVar(&c.compactMin, "compact-min-fragments", 16, "compact before the reads when the table has this many fragments, as the master's scheduler does (LC_COMPACT_MIN_FRAGMENTS); 0: never")
	flag.StringVar(&c.osCache, "os-cache", osCacheWarm, "the OS page cache state reads are timed in: warm (the table's files read first, when they fit in memory), cold (dropped; root only) or as-is")
	flag.BoolVar(&orderedIDs, "ordered-ids", false, "ids that rise with the append order (as the server's UUIDv7 ids), not random ones")
	flag.BoolVar(&problemsPerBlock, "problems-per-block", false, "2,000 problems per 100k rows (50 rows a problem at every size) instead of 2,000 in all")
	flag.StringVar(&c.http.workerBin, "worker-bin", "bin/lance-context", "the service binary whose worker serves --measure http")
	flag.IntVar(&c.http.first, "http-first", 1000, "--measure http: reads timed from a fresh worker's first request")
	flag.IntVar(&c.http.untimed, "http-untimed", 3000, "--measure http: untimed reads after those")
	flag.IntVar(&c.http.after, "http-after", 1000, "--measure http: reads timed after the untimed ones")
	flag.BoolVar(&c.http.keepAlive, "http-keepalive", false, "--measure http: reuse connections (default: one connection per call)")
	flag.StringVar(&c.http.profile, "http-profile", "", "--measure http: with LC_DEBUG_LISTEN set, write CPU profiles of the worker over each window to this path prefix")
	flag.IntVar(&c.http.profileSecs, "http-profile-secs", 2, "--measure http: seconds each --http-profile covers, from the window's start")
	var measure string
	flag.StringVar(&measure, "measure", "build,get,trajectory,rollout,filtered,page,offset,merge", "what to measure (a subset of the default, or http: get and trajectory over HTTP from a fresh worker process, --worker-bin)")
	flag.Parse()
	c.measure = map[string]bool{}
	for _, m := range strings.Split(measure, ",") {
		c.measure[strings.TrimSpace(m)] = true
	}
	if c.dir == "" {
		fmt.Fprintln(os.Stderr, "--dir is required")
		os.Exit(2)
	}
	if err := checkOSCache(c.osCache); err != nil { // before a load of minutes
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || (len(c.sizes) > 0 && n <= c.sizes[len(c.sizes)-1]) {
			fmt.Fprintf(os.Stderr, "--sizes: %q must be ascending counts\n", sizes)
			os.Exit(2)
		}
		c.sizes = append(c.sizes, n)
	}
	if err := gctune.Tune(); err != nil { // the collector of a worker serving these reads
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// peak samples the Go heap in use every 20 ms. It reads runtime/metrics,
// which does not stop the world: runtime.ReadMemStats did, 50 times a
// second through every timed read (5% of a core in a read profile).
type peak struct{ max atomic.Uint64 }

func (p *peak) run(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	// HeapInuse: the bytes of in-use spans, objects and the gaps in them.
	ms := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			metrics.Read(ms)
			if inuse := ms[0].Value.Uint64() + ms[1].Value.Uint64(); inuse > p.max.Load() {
				p.max.Store(inuse)
			}
		}
	}
}

func (p *peak) reset()       { runtime.GC(); p.max.Store(0) }
func (p *peak) mib() float64 { return float64(p.max.Load()) / (1 << 20) }

// rssPeakMiB is the process's peak resident set (VmHWM).
func rssPeakMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// Row i of the loaded table.
// rowID is row i's id: random by default (ids a client draws, UUIDv4 or
// hashes: a listing's id order is unrelated to the append order), or with
// --ordered-ids rising with i (the UUIDv7 ids the server assigns when a
// record has none: id order is append order).
func rowID(i int) string {
	if orderedIDs {
		return fmt.Sprintf("%016x", i)
	}
	return fmt.Sprintf("%016x", mix(uint64(i)))
}

var orderedIDs bool

func rolloutID(i int) string { return fmt.Sprintf("ro-%09d", i/8) }

// problemID: 2,000 problems, a rollout's problem its number mod 2,000,
// so a problem's rows spread over the whole table and grow with it (50
// at 100k rows, 5,000 at 10M). With --problems-per-block each block of
// 100k rows has 2,000 problems of its own instead: 50 rows a problem at
// every size, laid out within its block as the default lays them out in
// a 100k-row table (a filter whose matches do not grow with the table).
func problemID(i int) string {
	r := i / 8
	if problemsPerBlock {
		return fmt.Sprintf("p-%06d", r/12500*2000+r%2000)
	}
	return fmt.Sprintf("p-%06d", r%2000)
}

var problemsPerBlock bool

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// batch builds rows [from, to) in the rollout schema.
func batch(from, to int, text string) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rollout.Schema)
	defer b.Release()
	created := arrow.Timestamp(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	for fi, f := range rollout.Schema.Fields() {
		fb := b.Field(fi)
		for i := from; i < to; i++ {
			switch f.Name {
			case rollout.ColID:
				fb.(*array.StringBuilder).Append(rowID(i))
			case rollout.ColRolloutID:
				fb.(*array.StringBuilder).Append(rolloutID(i))
			case rollout.ColProblemID:
				fb.(*array.StringBuilder).Append(problemID(i))
			case rollout.ColSequenceOrder:
				fb.(*array.Int32Builder).Append(int32(i % 8))
			case rollout.ColRole:
				fb.(*array.StringBuilder).Append("assistant")
			case rollout.ColContentType:
				fb.(*array.StringBuilder).Append("text")
			case rollout.ColCreatedAt:
				fb.(*array.TimestampBuilder).Append(created + arrow.Timestamp(i))
			case "content":
				off := i % (len(text) / 2)
				fb.(*array.LargeStringBuilder).Append(text[off : off+len(text)/2])
			default:
				if !f.Nullable {
					return nil, fmt.Errorf("no generator for required column %q", f.Name)
				}
				fb.AppendNull()
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// load appends rows [from, to) as fragments of c.fragRows.
func load(ctx context.Context, st objstore.Store, c config, from, to int, text string) error {
	ds, err := table.Open(ctx, st)
	if err != nil {
		return err
	}
	var frags []*pb.DataFragment
	for s := from; s < to; s += c.fragRows {
		e := min(s+c.fragRows, to)
		fw, err := table.NewFragmentWriter(ctx, st, ds.Schema(), rollout.Schema, file.WriterOptions{})
		if err != nil {
			return err
		}
		for b := s; b < e; b += 8192 {
			rec, err := batch(b, min(b+8192, e), text)
			if err != nil {
				return err
			}
			err = fw.Write(rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
		f, err := fw.Finish()
		if err != nil {
			return err
		}
		frags = append(frags, f)
		slog.Info("loaded", "rows", e)
	}
	_, err = table.Append(ctx, st, frags, nil)
	return err
}

func pct(xs []time.Duration, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p/100*float64(len(s))))].Microseconds()) / 1000
}

// timeCalls times n calls of fn, or none when what is not measured.
func timeCalls(c config, what string, n int, fn func(i int) error) ([]time.Duration, error) {
	if !c.measure[what] {
		return nil, nil
	}
	// Untimed calls first (fn(n), fn(n+1)... take their own probes): the
	// figures are of a store in use, its index lookups and file footers
	// loaded, not of the first calls after a load.
	for j := 0; j < c.warmup && what != "offset"; j++ {
		if err := fn(n + j); err != nil {
			return nil, err
		}
	}
	// The index prewarm and the offsets reads the untimed calls started
	// (lance/index, lance/file) run in the background: the figures are of
	// the store once they are done, and the wait is reported.
	w := time.Now()
	if err := index.WaitPrewarm(context.Background()); err != nil {
		return nil, err
	}
	if err := file.WaitPrefetches(context.Background()); err != nil {
		return nil, err
	}
	prewarmWait[what] = time.Since(w).Seconds()
	// Then the steady state (see steadyMaxCalls): untimed calls, the same
	// probes again, until the collector has run twice more; and the timed
	// calls, at least n, run on to the end of a collection, so that they
	// span whole collector cycles.
	steady := what != "offset" && c.warmup > 0
	if steady {
		gc0, j := gcCycles(), 0
		for ; gcCycles() < gc0+2 && j < steadyMaxCalls; j++ {
			if err := fn(n + j%c.warmup); err != nil {
				return nil, err
			}
		}
		steadyCalls[what] = j
	}
	cpu0, in0, gc0 := cpuTime(), diskRead(), gcCycles()
	out := make([]time.Duration, 0, n)
	for i := 0; i < n || (steady && gcCycles() == gc0 && i < steadyMaxCalls); i++ {
		t := time.Now()
		if err := fn(i % (n + c.warmup)); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	cpuPerCall[what] = float64((cpuTime() - cpu0).Microseconds()) / 1000 / float64(len(out))
	diskPerCall[what] = float64(diskRead()-in0) / 1024 / float64(len(out))
	timedCalls[what] = len(out)
	return out, nil
}

func run(ctx context.Context, c config) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	root, err := objstore.NewLocal(c.dir)
	if err != nil {
		return err
	}
	var pk peak
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go pk.run(pctx)
	opts := rollout.Options{Logger: slog.New(slog.DiscardHandler)}
	cat := rollout.NewCatalog(root, rollout.ShardID("bench-scale"), opts)
	defer cat.Close(ctx)
	const name = "scale"
	s, err := cat.Create(ctx, name)
	loaded, extra := 0, 0 // loaded rows, rows added by timed merges
	if err != nil && c.reuse {
		if s, err = cat.Open(ctx, name); err == nil {
			var st state
			if st, err = loadState(ctx, c.dir, s); err == nil {
				loaded, extra = st.Loaded, st.Extra
			}
		}
	}
	if err != nil {
		return fmt.Errorf("create store %q in %s (use a new --dir, or --reuse): %w", name, c.dir, err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tb := make([]byte, 2*c.recordBytes)
	for i := range tb {
		tb[i] = "abcdefghijklmnopqrstuvwxyz      "[rng.IntN(32)]
	}
	text := string(tb)
	enc := json.NewEncoder(os.Stdout)
	for _, size := range c.sizes {
		out := map[string]any{"rows": size, "ordered_ids": orderedIDs, "problems_per_block": problemsPerBlock, "record_bytes": c.recordBytes, "go_version": runtime.Version(), "cpus": runtime.NumCPU()}
		t0 := time.Now()
		if loaded < size {
			if err := load(ctx, s.Root(), c, loaded, size, text); err != nil {
				return fmt.Errorf("load: %w", err)
			}
		}
		out["load_secs"] = time.Since(t0).Seconds()
		loaded = size
		// The load's writes reach the disk before the timed build, as
		// LanceDB's build (later, on the same files) finds them: a build
		// that reads while gigabytes are written back measures the disk's
		// writeback, not the build.
		syscall.Sync()

		pk.reset()
		t0 = time.Now()
		buildCPU := cpuTime()
		ir := &rollout.IndexResult{}
		if c.measure["build"] {
			if c.reuse {
				// Time a build from scratch, as on a fresh load.
				if err := dropIndexes(ctx, s.Root()); err != nil {
					return fmt.Errorf("drop indexes: %w", err)
				}
			}
			if c.buildProfile != "" {
				pf, err := os.Create(c.buildProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
			}
			if ir, err = s.Index(ctx); err != nil {
				return fmt.Errorf("index: %w", err)
			}
			if c.buildProfile != "" {
				pprof.StopCPUProfile()
			}
		}
		out["index_build_secs"] = time.Since(t0).Seconds()
		out["index_build_cpu_secs"] = (cpuTime() - buildCPU).Seconds()
		out["index_build_peak_heap_mib"] = pk.mib()
		newRows := int64(0)
		for _, r := range ir.Columns {
			newRows += r.NewRows
		}
		out["index_build_rows_read"] = newRows

		// The build's writes reach the disk first, likewise: the timed
		// merges sync their files, and would wait for a writeback that a
		// store in use does not have.
		syscall.Sync()

		// Merges of 1,000 new rows (appended and sealed untimed).
		var merges []time.Duration
		var mergeCPU time.Duration
		pk.reset()
		if c.profile != "" {
			pf, err := os.Create(c.profile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(pf); err != nil {
				return err
			}
		}
		for m := 0; m < c.merges && c.measure["merge"]; m++ {
			recs := make([]rollout.Record, 1000)
			for i := range recs {
				n := 1<<40 + extra
				extra++
				content := text[:c.recordBytes]
				recs[i] = rollout.Record{ID: rowID(n), RolloutID: fmt.Sprintf("ro-new-%09d", n/8), ProblemID: problemID(n), Content: &content}
			}
			if _, err := s.Append(ctx, recs); err != nil {
				return err
			}
			if err := s.Flush(ctx); err != nil {
				return err
			}
			t, cpu0 := time.Now(), cpuTime()
			for {
				res, err := s.Merge(ctx)
				if err != nil {
					return fmt.Errorf("merge: %w", err)
				}
				if res.Remaining == 0 {
					break
				}
			}
			merges = append(merges, time.Since(t))
			mergeCPU += cpuTime() - cpu0
		}
		if c.profile != "" {
			pprof.StopCPUProfile()
		}
		out["merge_1000"] = map[string]any{"p50_ms": pct(merges, 50), "max_ms": pct(merges, 100), "merges": len(merges), "peak_heap_mib": pk.mib(), "cpu_ms_per_merge": float64(mergeCPU.Microseconds()) / 1000 / float64(max(len(merges), 1))}
		// What the master's scheduler would have done by now: compact once
		// the table has its threshold of fragments (LC_COMPACT_MIN_FRAGMENTS,
		// default 16), which also rebuilds the indexes as one segment.
		// Reads are then measured on a store with the history production
		// gives it, the same at every size.
		if err := maintain(ctx, c, s, out); err != nil {
			return err
		}
		if err := saveState(c.dir, state{Loaded: loaded, Extra: extra}); err != nil {
			return err
		}
		syscall.Sync() // the compaction's writes, likewise
		tableDir := filepath.Join(c.dir, name+".rollout.lance")
		if out["os_cache"], err = prepareOSCache(ctx, tableDir, c.osCache); err != nil {
			return err
		}

		pk.reset()
		if c.readProfile != "" {
			pf, err := os.Create(c.readProfile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(pf); err != nil {
				return err
			}
		}
		probe := func() int { return rng.IntN(size) }
		ids := make([]string, c.calls+c.warmup)
		for i := range ids {
			ids[i] = rowID(probe())
		}
		if c.measure["get"] {
			s.Get(ctx, ids[0]) // open footers and lookups once
		}
		gets, err := timeCalls(c, "get", c.calls, func(i int) error {
			r, err := s.Get(ctx, ids[i])
			if err == nil && r.ID != ids[i] {
				err = fmt.Errorf("get %s returned %s", ids[i], r.ID)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		rollouts := make([]string, c.calls+c.warmup)
		for i := range rollouts {
			rollouts[i] = rolloutID(probe())
		}
		trajs, err := timeCalls(c, "trajectory", c.calls, func(i int) error {
			rs, err := s.Trajectory(ctx, rollouts[i])
			if err == nil && len(rs) != 8 {
				err = fmt.Errorf("trajectory %s: %d records, want 8", rollouts[i], len(rs))
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("trajectory: %w", err)
		}
		rolloutPage, err := timeCalls(c, "rollout", c.calls, func(i int) error {
			res, err := s.List(ctx, rollout.ListOptions{Source: rollout.SourceAll, Filters: []rollout.Filter{{Column: rollout.ColRolloutID, Value: rollouts[i]}}, Limit: 25})
			if err == nil && len(res.Records) != 8 {
				err = fmt.Errorf("rollout %s: %d records, want 8", rollouts[i], len(res.Records))
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("page filtered by rollout: %w", err)
		}
		problems := make([]string, c.calls+c.warmup)
		for i := range problems {
			problems[i] = problemID(probe())
		}
		filt, err := timeCalls(c, "filtered", c.calls, func(i int) error {
			res, err := s.List(ctx, rollout.ListOptions{Source: rollout.SourceAll, Filters: []rollout.Filter{{Column: rollout.ColProblemID, Value: problems[i]}}, Limit: 25})
			if err == nil && len(res.Records) == 0 {
				err = fmt.Errorf("problem %s: no records", problems[i])
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("filtered page: %w", err)
		}
		// Listings are in id order: a page is the 25 ids after a cursor
		// (here a random existing id, as a listing reaches any position by
		// following next_cursor). A deep offset counts rows in the same
		// order, O(offset): measured apart, with fewer calls.
		pages := map[string]any{}
		for _, src := range []rollout.Source{rollout.SourceFragments, rollout.SourceAll} {
			afters := make([]string, c.calls+c.warmup)
			for i := range afters {
				// Not among the last ids (1/4096 of the id space, or of
				// the rows): the page after the largest id is rightly empty.
				for {
					n := probe()
					if afters[i] = rowID(n); afters[i] < "fff0" && (!orderedIDs || n < size-size/4096-25) {
						break
					}
				}
			}
			ds, err := timeCalls(c, "page", c.calls, func(i int) error {
				res, err := s.List(ctx, rollout.ListOptions{Source: src, Limit: 25, After: afters[i]})
				if err == nil && len(res.Records) == 0 {
					err = fmt.Errorf("page after %s: no records", afters[i])
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("%s page: %w", src, err)
			}
			pages[string(src)+"_page_p50_ms"] = pct(ds, 50)
			deep, err := timeCalls(c, "offset", max(c.calls/10, 3), func(i int) error {
				res, err := s.List(ctx, rollout.ListOptions{Source: src, Limit: 25, Offset: rng.IntN(size - 25)})
				if err == nil && len(res.Records) != 25 {
					err = fmt.Errorf("page: %d records", len(res.Records))
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("%s deep-offset page: %w", src, err)
			}
			pages[string(src)+"_offset_page_p50_ms"] = pct(deep, 50)
		}
		if c.readProfile != "" {
			pprof.StopCPUProfile()
		}
		out["lance_context"] = map[string]any{
			"get_p50_ms": pct(gets, 50), "get_p99_ms": pct(gets, 99),
			"trajectory_p50_ms": pct(trajs, 50), "filtered_page_p50_ms": pct(filt, 50), "rollout_page_p50_ms": pct(rolloutPage, 50),
			"fragments_page_p50_ms": pages["fragments_page_p50_ms"], "all_page_p50_ms": pages["all_page_p50_ms"],
			"fragments_offset_page_p50_ms": pages["fragments_offset_page_p50_ms"], "all_offset_page_p50_ms": pages["all_offset_page_p50_ms"],
			"reads_peak_heap_mib": pk.mib(),
			"cpu_ms_per_call":     maps.Clone(cpuPerCall),
			"prewarm_wait_secs":   maps.Clone(prewarmWait),
			"disk_kib_per_call":   maps.Clone(diskPerCall),
			"steady_calls":        maps.Clone(steadyCalls),
			"timed_calls":         maps.Clone(timedCalls),
		}

		out["process_peak_rss_mib"] = rssPeakMiB()
		if c.measure["http"] {
			if out["http"], err = httpReads(ctx, c, size, rng); err != nil {
				return err
			}
		}

		if c.lancedb {
			// LanceDB's copy links the same files: the same cache state.
			if out["lancedb_os_cache"], err = prepareOSCache(ctx, tableDir, c.osCache); err != nil {
				return err
			}
			ld, err := runLanceDB(ctx, c, tableDir, ids[:c.calls], rollouts[:c.calls], problems[:c.calls])
			if err != nil {
				return fmt.Errorf("lancedb: %w", err)
			}
			out["lancedb"] = ld
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}

// runLanceDB runs bench_index.mjs on a hard-linked copy of the table with
// the indexes dropped (data files are immutable, so links are safe), so
// LanceDB is measured without an index and then with its own.
func runLanceDB(ctx context.Context, c config, src string, ids, rollouts, problems []string) (map[string]any, error) {
	cdir := filepath.Join(c.dir, "lancedb-copy")
	_ = os.RemoveAll(cdir)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(cdir)
	if out, err := exec.CommandContext(ctx, "cp", "-al", src, filepath.Join(cdir, "scale.rollout.lance")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cp -al: %v: %s", err, out)
	}
	cst, err := objstore.NewLocal(filepath.Join(cdir, "scale.rollout.lance"))
	if err != nil {
		return nil, err
	}
	if err := dropIndexes(ctx, cst); err != nil {
		return nil, fmt.Errorf("drop indexes in the copy: %w", err)
	}
	pf := filepath.Join(cdir, "probes.json")
	pb, _ := json.Marshal(map[string]any{"ids": ids, "rollouts": rollouts, "problems": problems})
	if err := os.WriteFile(pf, pb, 0o644); err != nil {
		return nil, err
	}
	script, err := filepath.Abs(filepath.Join(c.interop, "bench_index.mjs"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", script, cdir, "scale.rollout", "--probes", pf,
		"--calls", strconv.Itoa(min(c.calls, 100)), "--calls-noindex", strconv.Itoa(c.callsNo))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node bench_index.mjs: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("bench_index.mjs output %q: %w", out, err)
	}
	return doc, nil
}

// state is what a --reuse run needs to know of the store a run left: the
// loaded rows (row ids 0..Loaded-1) and the rows the timed merges added.
// Compaction mixes both in its fragments, so they are kept beside the store.
type state struct {
	Loaded int `json:"loaded"`
	Extra  int `json:"extra"`
}

const stateFile = "scale-state.json"

func saveState(dir string, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, stateFile), b, 0o644)
}

// loadState reads the state a run left. A store left before the file
// existed was never compacted: its merged fragments are the ones of 1,000
// rows.
func loadState(ctx context.Context, dir string, s *rollout.Store) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err == nil {
		return st, json.Unmarshal(b, &st)
	}
	if !os.IsNotExist(err) {
		return st, err
	}
	ds, err := table.Open(ctx, s.Root())
	if err != nil {
		return st, err
	}
	for _, f := range ds.Fragments() {
		if r := int(f.GetPhysicalRows()); r > 1000 {
			st.Loaded += r
		}
	}
	st.Extra = int(ds.CountRows()) - st.Loaded
	return st, nil
}

// maintain compacts the store when the master's scheduler would (at
// --compact-min-fragments fragments) and reports the history the reads
// then see: fragments, index segments per column, table version.
func maintain(ctx context.Context, c config, s *rollout.Store, out map[string]any) error {
	ds, err := table.Open(ctx, s.Root())
	if err != nil {
		return err
	}
	h := map[string]any{"fragments_before": len(ds.Fragments())}
	if c.compactMin > 0 && len(ds.Fragments()) >= c.compactMin {
		t := time.Now()
		res, err := s.Compact(ctx, rollout.CompactOptions{})
		if err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		h["compaction_secs"] = time.Since(t).Seconds() // with its index rebuild
		h["compacted_fragments"] = res.Removed
		if ds, err = table.Open(ctx, s.Root()); err != nil {
			return err
		}
	}
	idxs, err := ds.Indexes()
	if err != nil {
		return err
	}
	segs := map[string]int{}
	for _, m := range idxs {
		segs[m.GetName()]++
	}
	h["fragments"], h["index_segments"], h["table_version"] = len(ds.Fragments()), segs, ds.Version()
	out["history"] = h
	return nil
}

// dropIndexes commits the table at st without its indexes.
func dropIndexes(ctx context.Context, st objstore.Store) error {
	_, err := table.Commit(ctx, st, func(ctx context.Context, latest *table.Dataset) (*table.Change, error) {
		idxs, err := latest.Indexes()
		if err != nil {
			return nil, err
		}
		ch := &table.Change{Kind: table.KindCreateIndex}
		for _, m := range idxs {
			ch.IndexRemove = append(ch.IndexRemove, m.GetUuid().GetUuid())
		}
		return ch, nil
	})
	return err
}

// cpuPerCall is the process CPU time (user + system) per timed call of each
// measurement, in ms: on a shared machine it varies less than wall time.
var cpuPerCall = map[string]float64{}

// prewarmWait is the wait for the index prewarm and the queued offsets
// reads after the untimed calls of each read, in seconds.
var prewarmWait = map[string]float64{}

// steadyMaxCalls bounds the calls that bring a read to its steady state
// and those that run its timed calls on to the end of a collector cycle.
//
// Steady: the collector has run twice since the caches were filled. The
// heap's goal is GOGC 300 over the live heap, and the caches are most of
// it (a 10M store's index pages and offsets, ~330 MB: a goal of ~1.3 GB),
// so until the heap has grown to that goal once, the garbage of each call
// lands in pages the process never touched: ~4 page faults a get at 10M,
// none at 100k, whose ~120 MB goal the warmup reaches many times over. A
// serving process pays that once; the figures are of the process after.
// Whole cycles: a collection every ~25,000 gets at 10M (~2,000 at 100k),
// so 1,000 timed calls right after one would see none of its cost, and a
// larger store's figures would gain from its longer cycle.
const steadyMaxCalls = 200_000

// steadyCalls is the untimed calls each read took to reach the steady
// state, timedCalls the calls timed (n, or more to end a cycle).
var steadyCalls, timedCalls = map[string]int{}, map[string]int{}

// gcCycles returns the collector's completed cycles.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// diskPerCall is the bytes the process read from the disk (not the page
// cache) per timed call of each measurement, in KiB.
var diskPerCall = map[string]float64{}

// diskRead is the bytes the process has read from block devices
// (ru_inblock, 512-byte units).
func diskRead() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Inblock * 512
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
