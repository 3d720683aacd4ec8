// Command faultsoak runs a worker (the real binary, as its own process) on
// S3 reached through a fault-injecting proxy (503s, dropped connections,
// torn bodies, stalls), under appends, merges, compactions, cleanups and
// reads, and kills it with SIGKILL at random moments, for a set duration
// (package test/faults). Then, faults off, it checks every acknowledged id
// against a full listing. It prints a JSON line per sample and a summary
// line, and exits 1 when anything acknowledged was lost, duplicated or
// shows the wrong write. See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/lance-context/lance-context/test/faults"
	"github.com/lance-context/lance-context/test/latencyproxy"
)

func main() {
	var (
		c         faults.Config
		killEvery time.Duration
		workerLog string
	)
	flag.StringVar(&c.Bin, "bin", "", "the lance-context binary (default: built from this module into a temporary directory)")
	flag.StringVar(&c.DataDir, "data", "", "the worker's DATA_DIR, s3://bucket/prefix (default: $LC_TEST_S3_URL/faultsoak-<time>)")
	flag.StringVar(&c.Endpoint, "endpoint", os.Getenv("AWS_ENDPOINT_URL"), "the S3 server the proxy fronts ($AWS_ENDPOINT_URL); credentials from AWS_*")
	flag.DurationVar(&c.Duration, "duration", 10*time.Minute, "how long the load runs, before the final check")
	flag.DurationVar(&c.SampleEvery, "sample", 10*time.Second, "sampling period")
	flag.IntVar(&c.Appenders, "appenders", 4, "concurrent appenders")
	flag.IntVar(&c.Batch, "batch", 50, "records per append")
	flag.Float64Var(&c.Rewrite, "rewrite", 0.3, "fraction of a batch that rewrites ids written before")
	flag.Float64Var(&c.FlushRate, "flush", 0.5, "fraction of appends with ?flush=true")
	flag.Float64Var(&c.Resend, "resend", 0.05, "fraction of acknowledged appends sent again as they were")
	flag.IntVar(&c.ContentBytes, "content", 200, "bytes of content per record")
	flag.IntVar(&c.Readers, "readers", 2, "concurrent readers (get, page by cursor, trajectory)")
	flag.IntVar(&c.Consumers, "consumers", 2, "feed consumer groups")
	flag.Float64Var(&c.ConsumerCrash, "consumer-crash", 0.1, "chance a consumer dies around each commit (before it, or with its answer lost)")
	flag.DurationVar(&c.MergeEvery, "merge-every", 3*time.Second, "time between explicit merges")
	flag.DurationVar(&c.CompactEvery, "compact-every", 45*time.Second, "time between compactions (0: none)")
	flag.DurationVar(&c.CleanupEvery, "cleanup-every", time.Minute, "time between cleanups (0: none)")
	flag.DurationVar(&killEvery, "kill-every", 30*time.Second, "mean time between SIGKILLs of the worker (0: none)")
	flag.Float64Var(&c.Faults.Error503, "error503", 0.05, "fraction of S3 requests answered 503 SlowDown")
	flag.Float64Var(&c.Faults.Reset, "reset", 0.005, "fraction of S3 requests whose connection is dropped without an answer (half after the server carried them out)")
	flag.Float64Var(&c.Faults.Tear, "tear", 0.01, "fraction of S3 answers whose body is cut at a random byte")
	flag.Float64Var(&c.Faults.Stall, "stall", 0.002, "fraction of S3 requests stalled for -stall-for (before forwarding or mid-body)")
	flag.DurationVar(&c.Faults.StallFor, "stall-for", 3*time.Second, "how long a stall lasts")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the load, the kills and the faults")
	flag.StringVar(&workerLog, "worker-log", "", "file for the worker's log (default: a temporary file, kept when the run fails)")
	flag.Parse()
	c.Faults.Seed = c.Seed
	if killEvery > 0 {
		c.Kills = int(c.Duration / killEvery)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, c, workerLog)
	if err != nil {
		fail(1, "faultsoak: %v", err)
	}
	os.Exit(code)
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(code)
}

func run(ctx context.Context, c faults.Config, workerLog string) (int, error) {
	tmp, err := os.MkdirTemp("", "lc-faultsoak-")
	if err != nil {
		return 1, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	if c.Endpoint == "" {
		return 1, fmt.Errorf("no S3 endpoint: set -endpoint or AWS_ENDPOINT_URL (scripts/versitygw.sh start DIR; eval \"$(scripts/versitygw.sh env DIR)\")")
	}
	if c.DataDir == "" {
		base := os.Getenv("LC_TEST_S3_URL")
		if base == "" {
			return 1, fmt.Errorf("no data dir: set -data s3://bucket/prefix or LC_TEST_S3_URL")
		}
		c.DataDir = strings.TrimRight(base, "/") + fmt.Sprintf("/faultsoak-%d", time.Now().Unix())
	}
	if c.Bin == "" {
		c.Bin = filepath.Join(tmp, "lance-context")
		fmt.Fprintln(os.Stderr, "faultsoak: building the binary")
		b := exec.CommandContext(ctx, "go", "build", "-o", c.Bin, "./cmd/lance-context")
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return 1, fmt.Errorf("go build (run from the module root): %w", err)
		}
	}
	if workerLog == "" {
		workerLog = filepath.Join(tmp, "worker.log")
	}
	logf, err := os.Create(workerLog)
	if err != nil {
		return 1, err
	}
	defer logf.Close()
	c.WorkerLog = logf
	enc := json.NewEncoder(os.Stdout)
	c.OnSample = func(s faults.Sample) { _ = enc.Encode(s) }
	c.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "faultsoak: "+format+"\n", args...)
	}
	fmt.Fprintf(os.Stderr, "faultsoak: %s on %s through the fault proxy (%s), %d kills; worker log %s\n",
		c.Duration, c.DataDir, describe(c.Faults), c.Kills, workerLog)
	s, err := faults.Run(ctx, c)
	if s != nil {
		fmt.Println(s.JSON())
		report(s)
	}
	if err != nil {
		keep = true
		return 1, err
	}
	if f := s.Failures(); len(f) > 0 {
		keep = true
		fmt.Fprintf(os.Stderr, "faultsoak: FAILED: %s\n  examples: %v\n  worker log: %s\n", strings.Join(f, "; "), s.Examples, workerLog)
		return 1, nil
	}
	return 0, nil
}

func describe(f latencyproxy.Faults) string {
	return fmt.Sprintf("503 %.1f%%, resets %.1f%%, tears %.1f%%, stalls %.1f%% of %s", f.Error503*100, f.Reset*100, f.Tear*100, f.Stall*100, f.StallFor)
}

// report prints the figures of bench/README.md to stderr.
func report(s *faults.Summary) {
	w := os.Stderr
	fmt.Fprintf(w, "\nfault soak summary (load %.0f s, final check %.0f s; faults: %s)\n", s.LoadSeconds, s.CheckSeconds, describe(s.Faults))
	if !s.Checked {
		fmt.Fprintln(w, "  THE FINAL CHECK DID NOT FINISH: readable, lost and duplicated below are not measured")
	}
	fmt.Fprintf(w, "  acknowledged %d ids (%d appends, %d record writes), readable %d, lost %d, duplicated %d, wrong content %d, phantom %d\n",
		s.Acknowledged, s.AppendsOK, s.RecordsOK, s.Readable, s.Lost, s.Duplicated, s.WrongContent, s.Phantom)
	fmt.Fprintf(w, "  after merging everything: %d rows in fragments, %d lost, %d duplicated; %d unacknowledged ids present (allowed)\n",
		s.FragmentsRows, s.FragmentsLost, s.FragmentsDuplicated, s.Unacked)
	fmt.Fprintf(w, "  kills %d %v (restart to healthy at most %.1f s), crashes %d; %d merges, %d compactions, %d cleanups; worker RSS at most %.0f MB\n",
		s.Kills, s.KillsDuring, s.RestartMax, s.Crashes, s.Merges, s.Compactions, s.Cleanups, s.MaxRSSMB)
	fmt.Fprintf(w, "  append p50 %.0f ms, p99 %.0f ms, max %.0f ms; read p99 %.0f ms; appends sent again after a failure %d, resent after an ack %d, abandoned %d\n",
		s.AppendP50, s.AppendP99, s.AppendMax, s.ReadP99, s.DriverRetries, s.Resent, s.Abandoned)
	ops := make([]string, 0, len(s.Latencies))
	for op := range s.Latencies {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	fmt.Fprint(w, "  p50 / p99 / max ms:")
	for _, op := range ops {
		l := s.Latencies[op]
		fmt.Fprintf(w, " %s %.0f / %.0f / %.0f;", op, l[0], l[1], l[2])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  proxy: %d S3 requests, %d answered 503, %d reset, %d torn, %d stalled\n",
		s.Proxy.Requests, s.Proxy.Injected503, s.Proxy.Reset, s.Proxy.Torn, s.Proxy.Stalled)
	fmt.Fprintf(w, "  failed answers the client retried: %s\n", sorted(s.Answered))
	fmt.Fprintf(w, "  client-visible errors: %s; around kills: %s\n", sorted(s.Errors), sorted(s.AroundKills))
	fmt.Fprintf(w, "  read missing %d, page errors %d\n", s.ReadMissing, s.PageErrors)
}

func sorted(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", k, m[k])
	}
	return b.String()
}
