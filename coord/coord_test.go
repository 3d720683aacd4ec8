package coord_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/devmode"
)

// Every test runs against each backend: the embedded etcd of dev mode, and
// the real etcd binary when LC_TEST_ETCD_BIN names it (bin/etcd, built by
// scripts/tools.sh). A backend is started once and shared; every test works
// under its own key prefix.
type backend struct {
	name  string
	start func(dir string) (endpoint string, stop func(), err error)

	once     sync.Once
	endpoint string
	stop     func()
	dir      string
	err      error
}

var backends = []*backend{
	{name: "embedded", start: startEmbedded},
	{name: "binary", start: startBinary},
}

func startEmbedded(dir string) (string, func(), error) {
	e, url, err := devmode.StartEtcd(dir)
	if err != nil {
		return "", nil, err
	}
	return url, e.Close, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startBinary runs the etcd binary of LC_TEST_ETCD_BIN on free loopback ports.
func startBinary(dir string) (string, func(), error) {
	bin := os.Getenv("LC_TEST_ETCD_BIN")
	cp, err := freePort()
	if err != nil {
		return "", nil, err
	}
	pp, err := freePort()
	if err != nil {
		return "", nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cp)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
	log, err := os.Create(dir + "/etcd.log")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--name", "coordtest", "--data-dir", dir+"/data",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "coordtest="+peer, "--log-level", "error")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = log.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			b, _ := os.ReadFile(dir + "/etcd.log")
			return "", nil, fmt.Errorf("etcd binary exited: %s", b)
		default:
		}
		resp, err := http.Get(client + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return client, stop, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("etcd binary did not become healthy at %s", client)
}

func (b *backend) get(t *testing.T) string {
	t.Helper()
	if b.name == "binary" && os.Getenv("LC_TEST_ETCD_BIN") == "" {
		t.Skip("set LC_TEST_ETCD_BIN to an etcd binary (scripts/tools.sh builds bin/etcd) to run against real etcd")
	}
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "coordtest-"+b.name+"-")
		if b.err == nil {
			b.endpoint, b.stop, b.err = b.start(b.dir)
		}
	})
	if b.err != nil {
		t.Fatalf("backend %s: %v", b.name, b.err)
	}
	return b.endpoint
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range backends {
		if b.stop != nil {
			b.stop()
		}
		if b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
	}
	os.Exit(code)
}

// env is one test's view of a backend: a key prefix of its own, and a way
// to open more connections (more processes) under it.
type env struct {
	endpoint string
	prefix   string
}

func (e env) connect(t *testing.T) *coord.Coord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := coord.Connect(ctx, coord.Config{Endpoints: []string{e.endpoint}, Prefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var prefixSeq atomic.Int64

// each runs fn once per backend.
func each(t *testing.T, fn func(t *testing.T, e env)) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ep := b.get(t)
			name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
			fn(t, env{endpoint: ep, prefix: fmt.Sprintf("/coordtest/%s-%d-%d", name, time.Now().UnixNano(), prefixSeq.Add(1))})
		})
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStoreRegistry(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		if got, err := c.ListStores(ctx); err != nil || len(got) != 0 {
			t.Fatalf("empty registry: %v %v", got, err)
		}
		for _, n := range []string{"zeta", "alpha", "mid"} {
			if err := c.RegisterStore(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		got, err := c.ListStores(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range got {
			names = append(names, s.Name)
		}
		if strings.Join(names, ",") != "alpha,mid,zeta" {
			t.Fatalf("list = %v, want alpha,mid,zeta (by name)", names)
		}
		first := got[0].CreatedAt
		if first.IsZero() {
			t.Fatalf("created_at not set: %+v", got[0])
		}
		// Registering again is idempotent and keeps the original created_at.
		time.Sleep(20 * time.Millisecond)
		if err := c.RegisterStore(ctx, "alpha"); err != nil {
			t.Fatal(err)
		}
		again, err := c.ListStores(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != 3 || !again[0].CreatedAt.Equal(first) {
			t.Fatalf("re-register changed the entry: before %v, after %+v", first, again)
		}
		if err := c.UnregisterStore(ctx, "mid"); err != nil {
			t.Fatal(err)
		}
		if err := c.UnregisterStore(ctx, "never-registered"); err != nil {
			t.Fatalf("unregister of an unknown store: %v", err)
		}
		got, _ = c.ListStores(ctx)
		if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "zeta" {
			t.Fatalf("after unregister: %+v", got)
		}
		// Another connection (another master) sees the same registry.
		other, err := e.connect(t).ListStores(ctx)
		if err != nil || len(other) != 2 {
			t.Fatalf("second connection: %+v %v", other, err)
		}
	})
}

func workerIDs(t *testing.T, c *coord.Coord) []string {
	t.Helper()
	ws, err := c.ListWorkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.InstanceID)
	}
	return ids
}

func has(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestWorkerMembershipEndsWithContext(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		master := e.connect(t)
		workerConn := e.connect(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		info := coord.WorkerInfo{InstanceID: "w-1", ShardID: "shard-1", Endpoint: "http://127.0.0.1:1", Version: "test"}
		done := make(chan struct{})
		go func() { _ = workerConn.RegisterWorker(ctx, info, 5); close(done) }()
		eventually(t, 10*time.Second, "the worker to be listed", func() bool { return has(workerIDs(t, master), "w-1") })
		ws, _ := master.ListWorkers(context.Background())
		if w := ws[0]; w.ShardID != "shard-1" || w.Endpoint != info.Endpoint || w.Version != "test" || w.RegisteredAt.IsZero() {
			t.Fatalf("listed worker %+v", w)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("RegisterWorker did not return after its context ended")
		}
		// The lease is revoked on the way out: gone now, not after the TTL.
		if ids := workerIDs(t, master); has(ids, "w-1") {
			t.Fatalf("worker still listed right after leaving: %v", ids)
		}
	})
}

// proxy forwards TCP to etcd until cut: then every connection drops and
// new ones are refused, as in a network partition.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func startProxy(t *testing.T, endpoint string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: strings.TrimPrefix(endpoint, "http://")}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			p.mu.Lock()
			if err != nil || p.cut {
				p.mu.Unlock()
				_ = c.Close()
				if up != nil {
					_ = up.Close()
				}
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(p.partition)
	return p
}

func (p *proxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func TestWorkerMembershipExpiresWithoutRevoke(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		master := e.connect(t)
		// The worker reaches etcd through a proxy, cut below as if the
		// worker froze or lost the network: nothing can revoke its lease.
		px := startProxy(t, e.endpoint)
		wc, err := coord.Connect(context.Background(), coord.Config{Endpoints: []string{px.endpoint()}, Prefix: e.prefix})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = wc.RegisterWorker(ctx, coord.WorkerInfo{InstanceID: "w-2", ShardID: "s"}, 2); close(done) }()
		defer func() { cancel(); <-done; _ = wc.Close() }()
		eventually(t, 10*time.Second, "the worker to be listed", func() bool { return has(workerIDs(t, master), "w-2") })
		resp, err := master.Client().Get(context.Background(), e.prefix+"/workers/w-2")
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
			t.Fatalf("worker key is not bound to a lease: %+v %v", resp, err)
		}
		lease := clientv3.LeaseID(resp.Kvs[0].Lease)
		px.partition()
		start := time.Now()
		if ttl, err := master.Client().TimeToLive(context.Background(), lease); err != nil || ttl.TTL == -1 { // -1: no such lease
			t.Fatalf("the lease is gone right after the partition (ttl %+v, %v); this test wants expiry", ttl, err)
		}
		if !has(workerIDs(t, master), "w-2") {
			t.Fatal("the worker vanished at once; this test wants expiry")
		}
		eventually(t, 15*time.Second, "the worker to expire", func() bool { return !has(workerIDs(t, master), "w-2") })
		t.Logf("worker gone %v after the partition (ttl 2s)", time.Since(start).Round(10*time.Millisecond))
	})
}

func TestElection(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		var leading, violations atomic.Int32
		leaders := make(chan string, 16)
		type cand struct {
			id     string
			cancel context.CancelFunc
			done   chan struct{}
		}
		start := func(id string) *cand {
			c := e.connect(t)
			ctx, cancel := context.WithCancel(context.Background())
			cd := &cand{id: id, cancel: cancel, done: make(chan struct{})}
			go func() {
				defer close(cd.done)
				c.Lead(ctx, id, func(lctx context.Context) {
					if leading.Add(1) != 1 {
						violations.Add(1)
					}
					leaders <- id
					<-lctx.Done()
					leading.Add(-1)
				})
			}()
			t.Cleanup(func() { cancel(); <-cd.done })
			return cd
		}
		cands := map[string]*cand{"a": start("a"), "b": start("b")}
		var first string
		select {
		case first = <-leaders:
		case <-time.After(15 * time.Second):
			t.Fatal("nobody leads")
		}
		select {
		case second := <-leaders:
			t.Fatalf("%s leads while %s leads", second, first)
		case <-time.After(time.Second):
		}
		cands[first].cancel()
		select {
		case <-cands[first].done:
		case <-time.After(10 * time.Second):
			t.Fatal("Lead did not return after its context ended")
		}
		select {
		case next := <-leaders:
			if next == first {
				t.Fatalf("%s leads again after it left", next)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("the other candidate did not take over from %s", first)
		}
		if v := violations.Load(); v != 0 {
			t.Fatalf("%d times two candidates led at once", v)
		}
	})
}

func grant(t *testing.T, c *coord.Coord, ttl int64) clientv3.LeaseID {
	t.Helper()
	l, err := c.Client().Grant(context.Background(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return l.ID
}

func getTask(t *testing.T, c *coord.Coord, id string) *coord.Task {
	t.Helper()
	tk, err := c.GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// rewind moves a task's not_before into the past, as if its backoff had
// elapsed (the backoff is seconds long; the test does not wait it out).
func rewind(t *testing.T, c *coord.Coord, prefix, id string) {
	t.Helper()
	ctx := context.Background()
	k := prefix + "/tasks/" + id
	resp, err := c.Client().Get(ctx, k)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("task key %s: %v %v", k, resp, err)
	}
	var m map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		t.Fatal(err)
	}
	m["not_before"] = time.Now().Add(-time.Second).UTC()
	b, _ := json.Marshal(m)
	if _, err := c.Client().Put(ctx, k, string(b)); err != nil {
		t.Fatal(err)
	}
}

func TestTaskEnqueueDedup(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		t1, created, err := c.Enqueue(ctx, coord.KindMerge, "s1", "api")
		if err != nil || !created {
			t.Fatalf("first enqueue: %+v %v %v", t1, created, err)
		}
		if t1.State != coord.StateQueued || t1.Kind != coord.KindMerge || t1.Store != "s1" || t1.Source != "api" || t1.Attempts != 0 {
			t.Fatalf("new task %+v", t1)
		}
		t2, created, err := c.Enqueue(ctx, coord.KindMerge, "s1", "scheduler")
		if err != nil || created || t2.ID != t1.ID {
			t.Fatalf("second enqueue of (merge, s1): %+v created=%v %v; want task %s, created=false", t2, created, err, t1.ID)
		}
		// Another master sees the same live task.
		t3, created, err := e.connect(t).Enqueue(ctx, coord.KindMerge, "s1", "api")
		if err != nil || created || t3.ID != t1.ID {
			t.Fatalf("enqueue from another connection: %+v %v %v", t3, created, err)
		}
		other, created, err := c.Enqueue(ctx, coord.KindMerge, "s2", "api")
		if err != nil || !created || other.ID == t1.ID {
			t.Fatalf("different store: %+v %v %v", other, created, err)
		}
		compact, created, err := c.Enqueue(ctx, coord.KindCompact, "s1", "api")
		if err != nil || !created || compact.ID == t1.ID {
			t.Fatalf("different kind: %+v %v %v", compact, created, err)
		}
		if got := getTask(t, c, t1.ID); got.ID != t1.ID || got.State != coord.StateQueued {
			t.Fatalf("GetTask %+v", got)
		}
		if _, err := c.GetTask(ctx, "no-such-task"); !errors.Is(err, coord.ErrNoTask) {
			t.Fatalf("GetTask(unknown) = %v, want ErrNoTask", err)
		}
		list, err := c.ListTasks(ctx, 10)
		if err != nil || len(list) != 3 || list[0].ID != compact.ID || list[2].ID != t1.ID {
			t.Fatalf("ListTasks (newest first): %v %v", list, err)
		}
		if list, _ := c.ListTasks(ctx, 2); len(list) != 2 {
			t.Fatalf("ListTasks limit 2 returned %d", len(list))
		}
	})
}

func TestTaskClaim(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		lease := grant(t, c, 60)
		if got, err := c.Claim(ctx, lease); err != nil || got != nil {
			t.Fatalf("claim of an empty queue: %+v %v", got, err)
		}
		// Enqueued in this order; names sort the other way, so the claim
		// order can only come from age.
		older, _, _ := c.Enqueue(ctx, coord.KindMerge, "zzz", "api")
		time.Sleep(5 * time.Millisecond)
		newer, _, _ := c.Enqueue(ctx, coord.KindMerge, "aaa", "api")
		got, err := c.Claim(ctx, lease)
		if err != nil || got == nil || got.ID != older.ID {
			t.Fatalf("claim = %+v %v, want the oldest task %s", got, err, older.ID)
		}
		if got.State != coord.StateRunning || got.Attempts != 1 {
			t.Fatalf("claimed %+v, want running with attempts=1", got)
		}
		if st := getTask(t, c, older.ID); st.State != coord.StateRunning || st.Attempts != 1 {
			t.Fatalf("stored after claim %+v", st)
		}
		// A second claim (from another master as well) does not return it.
		second, err := e.connect(t).Claim(ctx, lease)
		if err != nil || second == nil || second.ID != newer.ID {
			t.Fatalf("second claim = %+v %v, want %s", second, err, newer.ID)
		}
		if third, err := c.Claim(ctx, lease); err != nil || third != nil {
			t.Fatalf("third claim = %+v %v, want nothing", third, err)
		}
		// While running, the (kind, store) is still live.
		if again, created, _ := c.Enqueue(ctx, coord.KindMerge, "zzz", "api"); created || again.ID != older.ID {
			t.Fatalf("enqueue while running: %+v created=%v", again, created)
		}
	})
}

func TestTaskFinishDone(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		lease := grant(t, c, 60)
		tk, _, _ := c.Enqueue(ctx, coord.KindCompact, "s", "api")
		run, err := c.Claim(ctx, lease)
		if err != nil || run == nil {
			t.Fatal(err)
		}
		if err := c.Finish(ctx, run, map[string]int{"fragments_removed": 3}, nil); err != nil {
			t.Fatal(err)
		}
		got := getTask(t, c, tk.ID)
		if got.State != coord.StateDone || got.Error != "" || string(got.Result) != `{"fragments_removed":3}` {
			t.Fatalf("finished task %+v (result %s)", got, got.Result)
		}
		if again, err := c.Claim(ctx, lease); err != nil || again != nil {
			t.Fatalf("a done task was claimed again: %+v %v", again, err)
		}
		next, created, err := c.Enqueue(ctx, coord.KindCompact, "s", "api")
		if err != nil || !created || next.ID == tk.ID {
			t.Fatalf("enqueue after done: %+v created=%v %v; want a new task", next, created, err)
		}
		if c.InCooldown(ctx, coord.KindCompact, "s") {
			t.Fatal("cooldown after a success")
		}
	})
}

func TestTaskRetryBackoffAndFailure(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		lease := grant(t, c, 60)
		tk, _, _ := c.Enqueue(ctx, coord.KindMerge, "s", "scheduler")
		var backoffs []time.Duration
		for attempt := 1; attempt <= coord.MaxAttempts; attempt++ {
			if attempt > 1 {
				rewind(t, c, e.prefix, tk.ID)
			}
			run, err := c.Claim(ctx, lease)
			if err != nil || run == nil || run.ID != tk.ID || run.Attempts != attempt {
				t.Fatalf("attempt %d: claim %+v %v", attempt, run, err)
			}
			if err := c.Finish(ctx, run, nil, fmt.Errorf("boom %d", attempt)); err != nil {
				t.Fatal(err)
			}
			got := getTask(t, c, tk.ID)
			if got.Error != fmt.Sprintf("boom %d", attempt) {
				t.Fatalf("attempt %d: error %q", attempt, got.Error)
			}
			if attempt == coord.MaxAttempts {
				if got.State != coord.StateFailed {
					t.Fatalf("after %d attempts: state %s, want failed", attempt, got.State)
				}
				break
			}
			if got.State != coord.StateQueued || !got.NotBefore.After(time.Now()) {
				t.Fatalf("attempt %d: %+v, want queued with not_before in the future", attempt, got)
			}
			backoffs = append(backoffs, got.NotBefore.Sub(got.UpdatedAt))
			// Not claimable until the backoff elapses; still the live task.
			if again, err := c.Claim(ctx, lease); err != nil || again != nil {
				t.Fatalf("attempt %d: claimed during backoff: %+v %v", attempt, again, err)
			}
			if same, created, _ := c.Enqueue(ctx, coord.KindMerge, "s", "api"); created || same.ID != tk.ID {
				t.Fatalf("attempt %d: enqueue during backoff made a new task", attempt)
			}
			if c.InCooldown(ctx, coord.KindMerge, "s") {
				t.Fatalf("attempt %d: cooldown before the last attempt", attempt)
			}
		}
		if len(backoffs) != 2 || backoffs[0] <= 0 || backoffs[1] <= backoffs[0] {
			t.Fatalf("backoffs %v, want growing", backoffs)
		}
		if !c.InCooldown(ctx, coord.KindMerge, "s") {
			t.Fatal("no cooldown after the task failed for good")
		}
		if c.InCooldown(ctx, coord.KindMerge, "other") || c.InCooldown(ctx, coord.KindCompact, "s") {
			t.Fatal("cooldown leaks to another (kind, store)")
		}
		rewind(t, c, e.prefix, tk.ID)
		if again, err := c.Claim(ctx, lease); err != nil || again != nil {
			t.Fatalf("a failed task was claimed: %+v %v", again, err)
		}
		// Failed is final: the (kind, store) is free for an explicit request.
		next, created, err := c.Enqueue(ctx, coord.KindMerge, "s", "api")
		if err != nil || !created || next.ID == tk.ID {
			t.Fatalf("enqueue after failure: %+v %v %v", next, created, err)
		}
	})
}

func TestTaskRequeueOrphans(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		tk, _, _ := c.Enqueue(ctx, coord.KindMerge, "s", "api")
		// The runner's lease is never kept alive: the runner "dies".
		dying := grant(t, c, 2)
		run, err := c.Claim(ctx, dying)
		if err != nil || run == nil || run.ID != tk.ID {
			t.Fatalf("claim %+v %v", run, err)
		}
		if err := c.RequeueOrphans(ctx); err != nil {
			t.Fatal(err)
		}
		if got := getTask(t, c, tk.ID); got.State != coord.StateRunning {
			t.Fatalf("a task with a live claim was requeued: %+v", got)
		}
		eventually(t, 15*time.Second, "the runner's lease to expire", func() bool {
			ttl, err := c.Client().TimeToLive(ctx, dying)
			return err == nil && ttl.TTL == -1
		})
		if err := c.RequeueOrphans(ctx); err != nil {
			t.Fatal(err)
		}
		got := getTask(t, c, tk.ID)
		if got.State != coord.StateQueued || got.Attempts != 1 {
			t.Fatalf("orphan after requeue: %+v, want queued with attempts=1", got)
		}
		again, err := c.Claim(ctx, grant(t, c, 60))
		if err != nil || again == nil || again.ID != tk.ID || again.Attempts != 2 {
			t.Fatalf("reclaim %+v %v", again, err)
		}
	})
}

// A runner whose claim lapsed (its lease expired, the task was requeued and
// another runner claimed it) must not overwrite the task when it finally
// finishes: before the fix its Finish marked the task done (or queued)
// while the new runner was still running it, deleted the new runner's claim
// and the live key, so a second copy of the task could be enqueued and run
// at the same time.
func TestRegression_StaleRunnerFinishKeepsNewClaim(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		tk, _, _ := c.Enqueue(ctx, coord.KindMerge, "s", "scheduler")
		oldLease := grant(t, c, 60)
		stale, err := c.Claim(ctx, oldLease)
		if err != nil || stale == nil {
			t.Fatalf("claim %+v %v", stale, err)
		}
		if _, err := c.Client().Revoke(ctx, oldLease); err != nil { // the first runner dies
			t.Fatal(err)
		}
		if err := c.RequeueOrphans(ctx); err != nil {
			t.Fatal(err)
		}
		current, err := c.Claim(ctx, grant(t, c, 60))
		if err != nil || current == nil || current.ID != tk.ID || current.Attempts != 2 {
			t.Fatalf("reclaim %+v %v", current, err)
		}
		// The first runner comes back and reports, for both outcomes.
		for _, runErr := range []error{nil, errors.New("late failure")} {
			s := *stale
			if err := c.Finish(ctx, &s, nil, runErr); !errors.Is(err, coord.ErrClaimLost) {
				t.Fatalf("stale Finish(%v) = %v, want ErrClaimLost", runErr, err)
			}
			got := getTask(t, c, tk.ID)
			if got.State != coord.StateRunning || got.Attempts != 2 || got.Error != "" {
				t.Fatalf("stale Finish(%v) changed the running task: %+v", runErr, got)
			}
			if dup, created, _ := c.Enqueue(ctx, coord.KindMerge, "s", "api"); created {
				t.Fatalf("stale Finish(%v) freed (merge, s) while it runs: new task %s", runErr, dup.ID)
			}
			if err := c.RequeueOrphans(ctx); err != nil {
				t.Fatal(err)
			}
			if got := getTask(t, c, tk.ID); got.State != coord.StateRunning {
				t.Fatalf("stale Finish(%v) dropped the current claim: requeued %+v", runErr, got)
			}
		}
		// The current runner finishes normally.
		if err := c.Finish(ctx, current, nil, nil); err != nil {
			t.Fatalf("the current runner's Finish: %v", err)
		}
		if got := getTask(t, c, tk.ID); got.State != coord.StateDone {
			t.Fatalf("after the current runner finished: %+v", got)
		}
	})
}

func TestPruneTasksKeepsNewestFinishedAndLiveOnes(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		lease := grant(t, c, 60)
		var done []string
		for i := 0; i < 5; i++ {
			store := fmt.Sprintf("p%d", i)
			tk, _, _ := c.Enqueue(ctx, coord.KindMerge, store, "api")
			run, err := c.Claim(ctx, lease)
			if err != nil || run == nil || run.ID != tk.ID {
				t.Fatalf("claim %v %v", run, err)
			}
			if err := c.Finish(ctx, run, nil, nil); err != nil {
				t.Fatal(err)
			}
			done = append(done, tk.ID)
		}
		live, _, _ := c.Enqueue(ctx, coord.KindMerge, "live", "api")
		n, err := c.PruneTasks(ctx, 2)
		if err != nil || n != 3 {
			t.Fatalf("pruned %d %v, want 3", n, err)
		}
		ts, err := c.ListTasks(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tk := range ts {
			ids = append(ids, tk.ID)
		}
		want := []string{live.ID, done[4], done[3]}
		if !slices.Equal(ids, want) {
			t.Fatalf("left %v, want %v", ids, want)
		}
	})
}
