// Command sql benchmarks SQL over a rollout store (package sqlquery, DuckDB
// embedded) against LanceDB 0.31's own query of the same table
// (lancedb_query.mjs). See bench/README.md.
//
//	go run ./bench/sql make  --dir DIR --rows N    write store "bench" (merged into fragments)
//	go run ./bench/sql query --dir DIR --q groupby|topk|charts [--runs 3] [--store bench] [--source fragments]
//
// query prints one JSON line: the query, rows, seconds of each run, the best
// and median, peak RSS of the process (VmHWM) and the first result rows.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/sqlquery"
)

// Queries are the benchmark's SQL; lancedb_query.mjs computes the same.
var Queries = map[string]string{
	"groupby": "SELECT policy_version, avg(reward) AS mean, count(*) AS n FROM records GROUP BY 1 ORDER BY 1",
	"topk":    "SELECT id, policy_version, reward FROM records WHERE reward > 0.99 ORDER BY reward DESC, id LIMIT 20",
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sql make|query ...")
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "", "data directory")
	rows := fs.Int("rows", 1_000_000, "rows to write (make)")
	q := fs.String("q", "groupby", "query: groupby, topk or charts")
	runs := fs.Int("runs", 3, "runs of the query")
	threads := fs.Int("threads", 2, "DuckDB threads")
	adhoc := fs.String("sql", "", "run this SQL instead of --q (query)")
	store := fs.String("store", "bench", "store to query (query)")
	source := fs.String("source", "fragments", "source of the query: fragments, wal or all (query)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile here")
	_ = fs.Parse(os.Args[2:])
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "--dir is required")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "make":
		err = makeStore(*dir, *rows)
	case "query":
		if *adhoc != "" {
			Queries["adhoc"], *q = *adhoc, "adhoc"
		}
		err = query(*dir, *store, rollout.Source(*source), *q, *runs, *threads)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func catalog(dir string) (*rollout.Catalog, error) {
	root, err := objstore.NewLocal(dir)
	if err != nil {
		return nil, err
	}
	return rollout.NewCatalog(root, rollout.ShardID("sqlbench"), rollout.Options{MergeMaxGenerations: -1}), nil
}

// makeStore writes rows records shaped like RL steps: 100 policy
// versions, uniform rewards, ~256 bytes of content.
func makeStore(dir string, rows int) error {
	ctx := context.Background()
	c, err := catalog(dir)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	s, err := c.Create(ctx, "bench")
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	const batch = 100_000
	letters := "abcdefghijklmnopqrstuvwxyz     "
	for done := 0; done < rows; {
		n := min(batch, rows-done)
		recs := make([]rollout.Record, n)
		for i := range recs {
			k := done + i
			b := make([]byte, 192+rng.IntN(128))
			for j := range b {
				b[j] = letters[rng.IntN(len(letters))]
			}
			content, pv := string(b), strconv.Itoa(k*100/rows)
			reward, ts, tok := rng.Float32(), t0.Add(time.Duration(k)*time.Second), int32(len(b)/4)
			recs[i] = rollout.Record{ID: fmt.Sprintf("r-%09d", k), RolloutID: fmt.Sprintf("rollout-%07d", k/8), ProblemID: fmt.Sprintf("p%d", k%1000),
				SequenceOrder: int32(k % 8), Role: "assistant", CreatedAt: &ts, Content: &content, Reward: &reward,
				PolicyVersion: &pv, NumOutputTokens: &tok}
		}
		if _, err := s.Append(ctx, recs); err != nil {
			return err
		}
		if err := s.Flush(ctx); err != nil {
			return err
		}
		done += n
	}
	for {
		res, err := s.Merge(ctx)
		if err != nil {
			return err
		}
		if res.Remaining == 0 {
			break
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": "make", "rows": st.BaseRows, "fragments": st.Fragments,
		"secs": time.Since(start).Seconds(), "table": dir + "/bench.rollout.lance"})
}

func query(dir, store string, src rollout.Source, name string, runs, threads int) error {
	ctx := context.Background()
	c, err := catalog(dir)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	eng := sqlquery.New(sqlquery.FromCatalog(c), sqlquery.Limits{MaxRowsScanned: 1 << 40, MaxTime: 10 * time.Minute, MaxMemoryMB: 4096, Threads: threads})
	var secs []float64
	var first any
	var scanned int64
	for i := 0; i < runs; i++ {
		start := time.Now()
		if name == "charts" {
			ch, err := eng.Charts(ctx, store, src)
			if err != nil {
				return err
			}
			scanned = ch.RowsScanned
			first = map[string]any{"versions": len(ch.RewardByPolicyVersion), "buckets": len(ch.RewardOverTime), "bins": len(ch.LengthHist)}
		} else {
			sql, ok := Queries[name]
			if !ok {
				return fmt.Errorf("unknown query %q", name)
			}
			res, err := eng.Query(ctx, sqlquery.Request{Store: store, SQL: sql, Source: src})
			if err != nil {
				return err
			}
			scanned = res.RowsScanned
			rows := res.JSONRows()
			first = rows[:min(3, len(rows))]
		}
		secs = append(secs, time.Since(start).Seconds())
	}
	sorted := append([]float64(nil), secs...)
	sort.Float64s(sorted)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"engine": "lance-context/duckdb", "query": name, "sql": Queries[name], "rows_scanned": scanned, "threads": threads,
		"secs": secs, "best_secs": sorted[0], "median_secs": sorted[len(sorted)/2], "peak_rss_mb": peakRSSMB(),
		"gomaxprocs": runtime.GOMAXPROCS(0), "result_head": first,
	})
}

// peakRSSMB is the process's peak resident set (VmHWM), in MiB; 0 where
// /proc is missing.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
