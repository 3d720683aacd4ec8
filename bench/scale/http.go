package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// httpConfig is the --http-* flags: reads measured from outside, over
// HTTP, against a worker process started for each read kind.
type httpConfig struct {
	workerBin string // the lance-context binary; its `worker` verb serves c.dir
	first     int    // reads timed from the fresh worker's first request
	untimed   int    // untimed reads after them
	after     int    // reads timed after the untimed ones
	keepAlive bool   // reuse connections (default: one connection per call)
	// profile, when set (with LC_DEBUG_LISTEN, which the worker inherits),
	// is the path prefix of CPU profiles of the worker taken over the first
	// profileSecs of each window: {profile}-{get|trajectory}-{first|after}.pb.gz.
	profile     string
	profileSecs int
}

// httpReads measures get and trajectory over HTTP (JSON), each against a
// fresh worker process: the first hc.first reads as a worker that has
// just started serves them, then hc.untimed untimed reads, then hc.after
// timed ones. By default each call is a new TCP connection, as a learner
// that calls now and then makes it. Besides wall-clock percentiles each
// window reports the worker's CPU, page faults (minor and major, from
// /proc/PID/stat) and GC cycles per call.
func httpReads(ctx context.Context, c config, size int, rng *rand.Rand) (map[string]any, error) {
	hc := c.http
	if hc.workerBin == "" {
		return nil, errors.New("--measure http needs --worker-bin (go build -o bin/lance-context ./cmd/lance-context)")
	}
	out := map[string]any{"connection_per_call": !hc.keepAlive}
	n := hc.first + hc.untimed + hc.after
	for _, kind := range []string{"get", "trajectory"} {
		probes := make([]int, n)
		for i := range probes {
			probes[i] = rng.IntN(size)
		}
		res, err := httpKind(ctx, c, kind, probes)
		if err != nil {
			return nil, fmt.Errorf("http %s: %w", kind, err)
		}
		out[kind] = res
	}
	return out, nil
}

// httpKind starts a worker on c.dir, runs the reads of one kind and stops it.
func httpKind(ctx context.Context, c config, kind string, probes []int) (map[string]any, error) {
	hc := c.http
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, hc.workerBin, "worker")
	// Reads only: no sweeper, merge, version cleanup or idle close runs
	// during the measurement, and a shard of its own.
	cmd.Env = append(os.Environ(), "DATA_DIR="+c.dir, "LISTEN="+addr, "INSTANCE_ID=bench-scale-http",
		"ROLLOUT_FLUSH_INTERVAL_SECS=0", "LC_MERGE_AFTER_AGE_SECS=0", "LC_VERSION_CLEANUP_INTERVAL_SECS=0",
		"LC_STORE_IDLE_CLOSE_SECS=0")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	tr := &http.Transport{DisableKeepAlives: !hc.keepAlive, MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	base := "http://" + addr + "/api/v1"
	if err := waitHealthy(ctx, cl, base+"/health"); err != nil {
		return nil, fmt.Errorf("%w; worker log:\n%s", err, logs.String())
	}
	res := map[string]any{"worker_start_ms": ms(time.Since(t0))}
	pid := cmd.Process.Pid
	// The first window times the worker as a load balancer first sends it
	// learners: once /readyz says its start-up warm is done.
	r0 := time.Now()
	warm, err := waitReady(ctx, cl, "http://"+addr+"/readyz")
	if err != nil {
		return nil, fmt.Errorf("%w; worker log:\n%s", err, logs.String())
	}
	if warm != "" {
		p := procStat(pid)
		res["ready_ms"], res["ready_warm"] = ms(time.Since(r0)), warm
		res["ready_rss_mib"] = float64(p.rssPages) * float64(os.Getpagesize()) / (1 << 20)
		res["ready_worker_cpu_ms"] = float64(p.cpuTicks) * 10
	}
	call := func(i int) error {
		var u, want string
		if kind == "get" {
			id := rowID(probes[i])
			u, want = base+"/rollouts/scale/records/"+url.PathEscape(id), `"id":"`+id+`"`
		} else {
			ro := rolloutID(probes[i])
			u, want = base+"/rollouts/scale/trajectories/"+url.PathEscape(ro), `"count":8`
		}
		resp, err := cl.Get(u)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(want)) {
			return fmt.Errorf("GET %s: %d, want %s in %.300q", u, resp.StatusCode, want, b)
		}
		return nil
	}
	window := func(name string, from, to int) (map[string]any, error) {
		if to <= from {
			return nil, nil
		}
		if stop := profileWorker(cl, hc, kind+"-"+name); stop != nil {
			defer stop()
		}
		p0 := procStat(pid)
		lat := make([]time.Duration, 0, to-from)
		for i := from; i < to; i++ {
			t := time.Now()
			if err := call(i); err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t))
		}
		p1 := procStat(pid)
		calls := float64(to - from)
		w := map[string]any{"calls": to - from, "first_ms": ms(lat[0]), "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90), "p99_ms": pct(lat, 99), "max_ms": pct(lat, 100),
			"worker_cpu_ms_per_call": float64(p1.cpuTicks-p0.cpuTicks) * 10 / calls, // 100 ticks a second
			"worker_minflt_per_call": float64(p1.minflt-p0.minflt) / calls,
			"worker_majflt_per_call": float64(p1.majflt-p0.majflt) / calls,
			"worker_rss_mib":         float64(p1.rssPages) * float64(os.Getpagesize()) / (1 << 20),
		}
		return w, nil
	}
	first, err := window("first", 0, hc.first)
	if err != nil {
		return nil, err
	}
	res["first"] = first
	for i := hc.first; i < hc.first+hc.untimed; i++ {
		if err := call(i); err != nil {
			return nil, err
		}
	}
	after, err := window("after", hc.first+hc.untimed, len(probes))
	if err != nil {
		return nil, err
	}
	res["after"] = after
	if b, err := getBytes(cl, "http://"+addr+"/metrics"); err == nil {
		res["worker_gc_cycles"] = metricValue(b, "go_gc_duration_seconds_count")
	}
	return res, nil
}

// profileWorker starts a CPU profile of the worker through its debug
// listener (LC_DEBUG_LISTEN) when hc.profile is set, and returns a func
// that waits for it and writes it to {hc.profile}-{name}.pb.gz.
func profileWorker(cl *http.Client, hc httpConfig, name string) func() {
	addr := os.Getenv("LC_DEBUG_LISTEN")
	if hc.profile == "" || addr == "" {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b, err := getBytes(cl, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(1, hc.profileSecs)))
		if err == nil {
			err = os.WriteFile(hc.profile+"-"+name+".pb.gz", b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker profile:", err)
		}
	}()
	return func() { <-done }
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// freeAddr returns a loopback address with a port free now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitHealthy(ctx context.Context, cl *http.Client, u string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := cl.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("worker not healthy at %s after 2 minutes", u)
}

// waitReady polls the worker's /readyz until it answers 200 and returns
// the state of its start-up warm then ("done", or "timed_out" when the
// worker stopped waiting for it), or "" for a worker without /readyz (404:
// a build before it), which is then timed at once.
func waitReady(ctx context.Context, cl *http.Client, u string) (string, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := cl.Get(u)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var r struct {
				Warm string `json:"warm"`
			}
			if err := json.Unmarshal(b, &r); err != nil || r.Warm == "" {
				return "", fmt.Errorf("%s: 200 %.300q, want the readiness JSON", u, b)
			}
			return r.Warm, nil
		case http.StatusNotFound:
			return "", nil
		case http.StatusServiceUnavailable:
		default:
			return "", fmt.Errorf("%s: %d %.300q", u, resp.StatusCode, b)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("worker not ready at %s after 10 minutes", u)
}

func getBytes(cl *http.Client, u string) ([]byte, error) {
	resp, err := cl.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// metricValue returns the value of the first unlabelled sample of name in
// a Prometheus text exposition, or -1.
func metricValue(b []byte, name string) float64 {
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return -1
}

// pstat is what /proc/PID/stat says of a process's CPU, faults and RSS.
type pstat struct{ minflt, majflt, cpuTicks, rssPages int64 }

func procStat(pid int) pstat {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pstat{}
	}
	// The command name may hold spaces: fields start after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	num := func(i int) int64 { // i: the field's number in proc(5), from 1
		n, _ := strconv.ParseInt(f[i-3], 10, 64)
		return n
	}
	return pstat{minflt: num(10), majflt: num(12), cpuTicks: num(14) + num(15), rssPages: num(24)}
}
