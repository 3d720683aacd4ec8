// Command sample measures the group sampler (Store.Sample) as a store
// grows: a batch of --n groups (8 rows each) within the last --last
// policy versions, at each of --sizes rows. See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

type config struct {
	dir             string
	sizes           []int
	rowsPerVersion  int
	groupRows       int
	fragRows        int
	pending         int
	contentBytes    int
	n, last, calls  int
	warmup          int
	cpuProfile      string
	reuse           bool
	measureJSON     bool
	measureConsumer bool
}

func main() {
	var c config
	var sizes string
	flag.StringVar(&c.dir, "dir", "", "a new local directory for the store (required)")
	flag.StringVar(&sizes, "sizes", "100000,1000000,10000000", "base sizes to measure at, ascending")
	flag.IntVar(&c.rowsPerVersion, "rows-per-version", 100_000, "rows of each policy version (in append order)")
	flag.IntVar(&c.groupRows, "group-rows", 8, "rows of one group (a problem's rollouts)")
	flag.IntVar(&c.fragRows, "fragment-rows", 1<<20, "rows per loaded fragment")
	flag.IntVar(&c.pending, "pending", 20_000, "rows of the newest version appended through the WAL (sealed, not merged) before the timed calls")
	flag.IntVar(&c.contentBytes, "content-bytes", 128, "content bytes per row")
	flag.IntVar(&c.n, "n", 512, "groups per batch")
	flag.IntVar(&c.last, "last", 4, "policy versions of the window (the last K)")
	flag.IntVar(&c.calls, "calls", 50, "timed calls per measurement")
	flag.IntVar(&c.warmup, "warmup", 3, "untimed calls before the timed ones (the first one is reported as cold)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed calls")
	flag.BoolVar(&c.reuse, "reuse", false, "reuse the store a previous run left in --dir")
	flag.BoolVar(&c.measureJSON, "json", true, "also time the JSON encoding of the answer")
	flag.BoolVar(&c.measureConsumer, "consumer", true, "also time calls with a consumer group (a ledger entry per call)")
	flag.Parse()
	if c.dir == "" {
		fmt.Fprintln(os.Stderr, "--dir is required")
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
	if err := gctune.Tune(); err != nil { // the collector of a worker serving these calls
		fmt.Fprintln(os.Stderr, "sample:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "sample:", err)
		os.Exit(1)
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func version(c config, i int) string { return fmt.Sprintf("policy-%05d", i/c.rowsPerVersion) }

// reward: a group's rows alternate 0 and 1, but one group in four is all
// 1 (zero variance).
func reward(c config, i int) float32 {
	g := i / c.groupRows
	if g%4 == 0 {
		return 1
	}
	return float32(i % 2)
}

// batch builds rows [from, to): row i is row i%groupRows of problem
// i/groupRows, of version i/rowsPerVersion, created at t0 + i ms.
func batch(c config, from, to int, text string) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rollout.Schema)
	defer b.Release()
	for fi, f := range rollout.Schema.Fields() {
		fb := b.Field(fi)
		for i := from; i < to; i++ {
			switch f.Name {
			case rollout.ColID:
				fb.(*array.StringBuilder).Append(fmt.Sprintf("r%010d", i))
			case rollout.ColRolloutID:
				fb.(*array.StringBuilder).Append(fmt.Sprintf("ro%010d", i))
			case rollout.ColProblemID:
				fb.(*array.StringBuilder).Append(fmt.Sprintf("p%09d", i/c.groupRows))
			case rollout.ColSequenceOrder:
				fb.(*array.Int32Builder).Append(0)
			case rollout.ColRole:
				fb.(*array.StringBuilder).Append("assistant")
			case rollout.ColContentType:
				fb.(*array.StringBuilder).Append("text/plain")
			case rollout.ColCreatedAt:
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(i) * time.Millisecond).UnixMicro()))
			case "content":
				off := i % (len(text) / 2)
				fb.(*array.LargeStringBuilder).Append(text[off : off+c.contentBytes])
			case "policy_version":
				fb.(*array.StringBuilder).Append(version(c, i))
			case "reward":
				fb.(*array.Float32Builder).Append(reward(c, i))
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

// load appends rows [from, to) to the base table as fragments.
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
			rec, err := batch(c, b, min(b+8192, e), text)
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

// appendPending appends rows [from, from+n) through the store (WAL) and
// seals them: pending rows of the newest version, as a store in use has.
func appendPending(ctx context.Context, s *rollout.Store, c config, from, n int, text string) error {
	for at := from; at < from+n; at += 5000 {
		rec, err := batch(c, at, min(at+5000, from+n), text)
		if err != nil {
			return err
		}
		_, err = s.AppendArrow(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return s.Flush(ctx)
}

func pct(xs []time.Duration, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p/100*float64(len(s))))].Microseconds()) / 1000
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// toJSON encodes the answer as the worker's JSON route does.
func toJSON(res *rollout.SampleResult) error {
	recs, err := res.Records()
	if err != nil {
		return err
	}
	out := api.SampleResponse{Groups: make([]api.SampleGroup, len(res.Groups)), Count: len(res.Groups), Seed: res.Seed}
	for i, g := range res.Groups {
		out.Groups[i] = api.SampleGroup{Key: g.Key, Records: recs[i]}
	}
	return json.NewEncoder(io.Discard).Encode(out)
}

func run(ctx context.Context, c config) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	root, err := objstore.NewLocal(c.dir)
	if err != nil {
		return err
	}
	cat := rollout.NewCatalog(root, rollout.ShardID("bench-sample"), rollout.Options{Logger: slog.New(slog.DiscardHandler)})
	defer cat.Close(ctx)
	const name = "sample"
	s, err := cat.Create(ctx, name)
	loaded := 0
	if err != nil && c.reuse {
		if s, err = cat.Open(ctx, name); err == nil {
			var st *rollout.Stats
			if st, err = s.Stats(ctx); err == nil {
				loaded = int(st.BaseRows)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("create store %q in %s (use a new --dir, or --reuse): %w", name, c.dir, err)
	}
	tb := make([]byte, 2*max(c.contentBytes, 64))
	for i := range tb {
		tb[i] = "abcdefghijklmnopqrstuvwxyz      "[(i*7+i/32)%32]
	}
	text := string(tb)
	var prof *os.File
	if c.cpuProfile != "" {
		if prof, err = os.Create(c.cpuProfile); err != nil {
			return err
		}
		defer prof.Close()
	}
	enc := json.NewEncoder(os.Stdout)
	for _, size := range c.sizes {
		out := map[string]any{"rows": size, "n": c.n, "last": c.last, "rows_per_version": c.rowsPerVersion, "group_rows": c.groupRows,
			"pending_rows": c.pending, "go_version": runtime.Version(), "cpus": runtime.NumCPU()}
		start := time.Now()
		if loaded < size {
			// Merge what an earlier size left pending: the base grows in
			// version order.
			for {
				res, err := s.Merge(ctx)
				if err != nil {
					return fmt.Errorf("merge: %w", err)
				}
				if res.Remaining == 0 {
					break
				}
			}
			st, err := s.Stats(ctx)
			if err != nil {
				return err
			}
			if err := load(ctx, s.Root(), c, int(st.BaseRows), size, text); err != nil {
				return fmt.Errorf("load: %w", err)
			}
			if _, err := s.Index(ctx); err != nil {
				return fmt.Errorf("index: %w", err)
			}
			if c.pending > 0 {
				if err := appendPending(ctx, s, c, size, c.pending, text); err != nil {
					return fmt.Errorf("pending rows: %w", err)
				}
			}
		}
		loaded = size
		out["load_secs"] = time.Since(start).Seconds()
		syscall.Sync()

		req := rollout.SampleOptions{N: c.n, PolicyVersions: &rollout.PolicyWindow{Last: &c.last}}
		measure := func(what string, o func(i int) rollout.SampleOptions, withJSON bool) error {
			var times []time.Duration
			rows := 0
			for i := 0; i < c.warmup+c.calls; i++ {
				if i == c.warmup && prof != nil {
					if err := pprof.StartCPUProfile(prof); err != nil {
						return err
					}
				}
				if i == c.warmup {
					out[what+"_cpu0"] = cpuTime()
				}
				t := time.Now()
				res, err := s.Sample(ctx, o(i))
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				if withJSON {
					if err := toJSON(res); err != nil {
						return err
					}
				}
				d := time.Since(t)
				rows = int(res.Batch.NumRows())
				out[what+"_groups"] = len(res.Groups)
				out[what+"_eligible"] = res.Eligible
				res.Release()
				if i == 0 {
					out[what+"_first_call_ms"] = float64(d.Microseconds()) / 1000
				}
				if i >= c.warmup {
					times = append(times, d)
				}
			}
			if prof != nil {
				pprof.StopCPUProfile()
				prof = nil
			}
			cpu0 := out[what+"_cpu0"].(time.Duration)
			delete(out, what+"_cpu0")
			out[what+"_rows"] = rows
			out[what+"_p50_ms"] = pct(times, 50)
			out[what+"_p99_ms"] = pct(times, 99)
			out[what+"_cpu_ms_per_call"] = float64((cpuTime() - cpu0).Microseconds()) / 1000 / float64(len(times))
			return nil
		}
		seed := func(i int) *uint64 { v := uint64(i); return &v }
		if err := measure("arrow", func(i int) rollout.SampleOptions { o := req; o.Seed = seed(i); return o }, false); err != nil {
			return err
		}
		if err := measure("drop_zero_variance", func(i int) rollout.SampleOptions {
			o := req
			o.Seed, o.DropZeroVariance = seed(i), true
			return o
		}, false); err != nil {
			return err
		}
		if c.measureJSON {
			if err := measure("json", func(i int) rollout.SampleOptions { o := req; o.Seed = seed(i); return o }, true); err != nil {
				return err
			}
		}
		if c.measureConsumer {
			group := fmt.Sprintf("bench-%d-%d", size, time.Now().UnixNano())
			if err := measure("consumer", func(i int) rollout.SampleOptions {
				o := req
				o.Seed, o.Group = seed(i), group
				return o
			}, false); err != nil {
				return err
			}
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}
