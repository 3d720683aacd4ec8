// Command feed measures the learner's feed against a worker (the real
// binary, as its own process, data on local disk):
//
//   - latency: appenders ingest at a set rate of rows per second while a
//     consumer group waits on the feed (Arrow, long poll, committing each
//     answer); for every row, the time from its append's acknowledgement
//     to its delivery. p50, p99 and max per rate.
//   - catch-up: a store of -catchup rows, merged into the base, read from
//     its beginning by a new consumer (Arrow, -catchup-limit rows an
//     answer): rows per second, beside LanceDB 0.31 streaming the same
//     table (test/interop/scan.mjs) in the same run.
//
// See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
)

func main() {
	var (
		bin, dir, rates, interop string
		dur                      time.Duration
		batch, content           int
		catchup, catchupLimit    int
		catchupCols              string
		appenders                int
	)
	flag.StringVar(&bin, "bin", "", "the lance-context binary (default: built from this module into a temporary directory)")
	flag.StringVar(&dir, "data", "", "the worker's DATA_DIR (default: a temporary directory, removed at the end)")
	flag.StringVar(&rates, "rates", "1000,10000,20000,50000", "ingest rates to measure latency at, rows per second")
	flag.DurationVar(&dur, "duration", 20*time.Second, "ingest time per rate")
	flag.IntVar(&batch, "batch", 100, "rows per append")
	flag.IntVar(&appenders, "appenders", 4, "concurrent appenders")
	flag.IntVar(&content, "content", 200, "bytes of content per row")
	flag.IntVar(&catchup, "catchup", 0, "rows of the catch-up store (0: no catch-up run)")
	flag.IntVar(&catchupLimit, "catchup-limit", 100_000, "rows per feed answer when catching up")
	flag.StringVar(&catchupCols, "catchup-columns", "", "columns the catch-up reads (feed columns=, and LanceDB's select): empty is every column")
	flag.StringVar(&interop, "interop", "test/interop", "the directory of scan.mjs and its node_modules (for LanceDB's scan)")
	flag.Parse()
	if err := run(bin, dir, rates, interop, catchupCols, dur, batch, appenders, content, catchup, catchupLimit); err != nil {
		fmt.Fprintln(os.Stderr, "feed:", err)
		os.Exit(1)
	}
}

func run(bin, dir, rates, interop, cols string, dur time.Duration, batch, appenders, content, catchup, catchupLimit int) error {
	tmp, err := os.MkdirTemp("", "feedbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "lance-context")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/lance-context").CombinedOutput(); err != nil {
			return fmt.Errorf("build: %v\n%s", err, out)
		}
	}
	if dir == "" {
		dir = filepath.Join(tmp, "data")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "worker")
	cmd.Env = append(os.Environ(), "DATA_DIR="+dir, "LISTEN="+addr, "INSTANCE_ID=feedbench")
	logf, _ := os.Create(filepath.Join(tmp, "worker.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	cl := client.New(base)
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := cl.Health(ctx); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("worker not up: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("# worker %s, data %s; %d appenders of %d rows, %d B content\n", bin, dir, appenders, batch, content)
	for _, s := range strings.Split(rates, ",") {
		rate, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || rate <= 0 {
			continue
		}
		if err := latency(ctx, cl, base, rate, dur, batch, appenders, content); err != nil {
			return err
		}
	}
	if catchup > 0 {
		return catchUp(ctx, cl, base, dir, interop, cols, catchup, catchupLimit, content)
	}
	return nil
}

// rows makes n rows of ids prefix-i as one Arrow batch.
func rows(prefix string, from, n, content int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "rollout_id", Type: arrow.BinaryTypes.String},
		{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "policy_version", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	text := strings.Repeat("x", content)
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%09d", prefix, i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%s-r%06d", prefix, i/8))
		b.Field(2).(*array.StringBuilder).Append(text)
		b.Field(3).(*array.Float32Builder).Append(rand.Float32())
		b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("step-%d", i/100000))
	}
	return b.NewRecordBatch()
}

// feedArrow reads one answer of the feed as Arrow: the ids and the
// position after them.
func feedArrow(ctx context.Context, base, store string, q url.Values, each func(id string)) (string, int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/rollouts/"+store+"/feed?"+q.Encode(), nil)
	req.Header.Set("Accept", api.ArrowStream)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", 0, fmt.Errorf("feed: status %d", resp.StatusCode)
	}
	rd, err := ipc.NewReader(resp.Body)
	if err != nil {
		return "", 0, err
	}
	defer rd.Release()
	n := 0
	for rd.Next() {
		b := rd.RecordBatch()
		n += int(b.NumRows())
		if each != nil {
			ids := b.Column(0).(*array.String)
			for i := 0; i < ids.Len(); i++ {
				each(ids.Value(i))
			}
		}
	}
	return resp.Header.Get(api.FeedPositionHeader), n, rd.Err()
}

func latency(ctx context.Context, cl *client.Client, base string, rate int, dur time.Duration, batch, appenders, content int) error {
	store := fmt.Sprintf("feedlat-%d", rate)
	if _, err := cl.CreateStore(ctx, store); err != nil {
		return err
	}
	var acked sync.Map // id -> time.Time
	var mu sync.Mutex
	var lat []float64
	var delivered, early atomic.Int64
	cctx, stop := context.WithCancel(ctx)
	consumerDone := make(chan error, 1)
	go func() {
		q := url.Values{"group": {"bench"}, "limit": {"10000"}, "wait_ms": {"1000"}}
		for cctx.Err() == nil {
			pos, _, err := feedArrow(cctx, base, store, q, func(id string) {
				now := time.Now()
				delivered.Add(1)
				v, ok := acked.Load(id)
				if !ok {
					early.Add(1) // delivered before its append's answer reached us
					mu.Lock()
					lat = append(lat, 0)
					mu.Unlock()
					return
				}
				mu.Lock()
				lat = append(lat, float64(now.Sub(v.(time.Time)).Microseconds())/1000)
				mu.Unlock()
			})
			if err != nil {
				if cctx.Err() == nil {
					consumerDone <- err
					return
				}
				break
			}
			q.Set("position", pos)
		}
		consumerDone <- nil
	}()
	// Appenders: each sends a batch every interval, together `rate` rows/s.
	per := time.Duration(float64(time.Second) * float64(batch*appenders) / float64(rate))
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	end := time.Now().Add(dur)
	for a := range appenders {
		wg.Go(func() {
			next := time.Now().Add(time.Duration(a) * per / time.Duration(appenders))
			for i := 0; time.Now().Before(end); i++ {
				time.Sleep(time.Until(next))
				next = next.Add(per)
				rec := rows(fmt.Sprintf("a%d", a), i*batch, batch, content)
				_, err := cl.AppendArrow(ctx, store, rec, false)
				now := time.Now()
				if err != nil {
					failed.Add(1)
					rec.Release()
					continue
				}
				ids := rec.Column(0).(*array.String)
				for j := 0; j < ids.Len(); j++ {
					acked.LoadOrStore(ids.Value(j), now)
				}
				sent.Add(int64(ids.Len()))
				rec.Release()
			}
		})
	}
	wg.Wait()
	// Let the consumer catch the last rows, then stop it.
	for deadline := time.Now().Add(10 * time.Second); delivered.Load() < sent.Load() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-consumerDone; err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	achieved := float64(sent.Load()) / dur.Seconds()
	out := map[string]any{"target_rows_per_s": rate, "achieved_rows_per_s": int(achieved), "acked_rows": sent.Load(), "delivered_rows": delivered.Load(),
		"failed_appends": failed.Load(), "delivered_before_ack": early.Load(),
		"p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": q(1)}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return nil
}

func catchUp(ctx context.Context, cl *client.Client, base, dir, interop, cols string, n, limit, content int) error {
	store := "feedcatchup"
	if _, err := cl.CreateStore(ctx, store); err != nil {
		return err
	}
	start := time.Now()
	const per = 10_000 // the worker's records per request
	for i := 0; i < n; i += per {
		rec := rows("c", i, min(per, n-i), content)
		_, err := cl.AppendArrow(ctx, store, rec, true)
		rec.Release()
		if err != nil {
			return err
		}
		if (i/per)%100 == 99 {
			if _, err := cl.Merge(ctx, store); err != nil {
				return err
			}
		}
	}
	for {
		res, err := cl.Merge(ctx, store)
		if err != nil {
			return err
		}
		if res.Remaining == 0 {
			break
		}
	}
	fmt.Printf("# catch-up store: %d rows written and merged in %.1f s\n", n, time.Since(start).Seconds())
	// Warm both readers' page cache alike: one untimed pass each is not
	// done; the feed goes first, LanceDB second, on a store just written.
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cols != "" {
		q.Set("columns", cols)
	}
	start = time.Now()
	total := 0
	for {
		pos, got, err := feedArrow(ctx, base, store, q, nil)
		if err != nil {
			return err
		}
		if got == 0 {
			break
		}
		total += got
		q.Set("position", pos)
	}
	secs := time.Since(start).Seconds()
	b, _ := json.Marshal(map[string]any{"feed_catchup_rows": total, "secs": secs, "rows_per_s": int(float64(total) / secs), "limit": limit, "columns": cols})
	fmt.Println(string(b))
	abs, _ := filepath.Abs(interop)
	args := []string{filepath.Join(abs, "scan.mjs"), dir, store + ".rollout"}
	if cols != "" {
		args = append(args, strings.Split(cols, ",")...)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = abs
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("lancedb scan: %w", err)
	}
	fmt.Printf("{\"lancedb_scan\": %s}\n", strings.TrimSpace(string(out)))
	return nil
}
