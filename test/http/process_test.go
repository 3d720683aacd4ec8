package httpe2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSIGKILLUnderLoad: concurrent clients post single records; the worker
// is killed with SIGKILL mid-load and restarted on the same data and
// INSTANCE_ID. After a flush, every acknowledged (201) id is readable exactly
// once; unacknowledged ids may be there too, but no id twice.
func TestSIGKILLUnderLoad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := startWorker(t, b.dataDir(t), nil)
		c := newClient(t, w)
		c.createStore("load")
		// Some rows sealed and merged before the crash, some only sealed, so
		// the restart sees every tier.
		c.must(http.StatusCreated, c.appendJSON("load", "?flush=true", rec("pre-merged", "pre")), "pre append")
		c.must(http.StatusOK, c.do("POST", "/api/v1/rollouts/load/merge", "", nil), "pre merge")
		c.must(http.StatusCreated, c.appendJSON("load", "?flush=true", rec("pre-sealed", "pre")), "pre append")

		const clients = 16
		killAfter := 400 // acknowledged appends before the kill
		if b.name == "s3" {
			killAfter = 150
		}
		tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		var (
			mu    sync.Mutex
			acked = map[string]bool{}
			sent  = map[string]bool{}
		)
		ackedN := make(chan struct{}, 1<<16)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < clients; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("k-%02d-%06d", g, i)
					body := fmt.Sprintf(`{"records":[{"id":%q,"rollout_id":"load-%02d","sequence_order":%d,"content":"payload %s"}]}`, id, g, i, id)
					mu.Lock()
					sent[id] = true
					mu.Unlock()
					resp, err := hc.Post(w.URL+"/api/v1/rollouts/load/records", "application/json", strings.NewReader(body))
					if err != nil {
						return // the worker is gone
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusCreated {
						mu.Lock()
						acked[id] = true
						mu.Unlock()
						ackedN <- struct{}{}
					}
				}
			}()
		}
		deadline := time.After(60 * time.Second)
		for n := 0; n < killAfter; n++ {
			select {
			case <-ackedN:
			case <-deadline:
				t.Fatalf("only %d appends acknowledged in 60s", n)
			}
		}
		w.Kill()
		close(stop)
		wg.Wait()
		tr.CloseIdleConnections()
		mu.Lock()
		nAcked, nSent := len(acked), len(sent)
		mu.Unlock()
		t.Logf("killed with %d acknowledged of %d sent", nAcked, nSent)

		w.Restart()
		c = newClient(t, w)
		c.flush("load")
		got := c.listAll("load", "all", "")
		seen := map[string]int{}
		for _, id := range ids(got) {
			seen[id]++
		}
		var dup, missing, unacked []string
		for id, n := range seen {
			if n > 1 {
				dup = append(dup, fmt.Sprintf("%s x%d", id, n))
			}
			if strings.HasPrefix(id, "k-") && !acked[id] {
				if !sent[id] {
					t.Errorf("id %s was never sent", id)
				}
				unacked = append(unacked, id)
			}
		}
		for id := range acked {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		for _, id := range []string{"pre-merged", "pre-sealed"} {
			if seen[id] != 1 {
				t.Errorf("%s seen %d times after the restart, want 1", id, seen[id])
			}
		}
		sort.Strings(dup)
		sort.Strings(missing)
		if len(dup) > 0 {
			t.Errorf("%d ids listed more than once: %v", len(dup), head(dup))
		}
		if len(missing) > 0 {
			t.Errorf("%d of %d acknowledged ids missing after the restart: %v", len(missing), nAcked, head(missing))
		}
		t.Logf("after restart: %d rows, %d of them never acknowledged (allowed)", len(got), len(unacked))

		// The restarted worker still takes writes, and a merge folds everything.
		c.must(http.StatusCreated, c.appendJSON("load", "?flush=true", rec("post-restart", "post")), "append after restart")
		for {
			m := c.must(http.StatusOK, c.do("POST", "/api/v1/rollouts/load/merge", "", nil), "merge after restart")
			if fmt.Sprint(m["remaining"]) == "0" {
				break
			}
		}
		frag := c.listAll("load", "fragments", "")
		if len(frag) != len(got)+1 {
			t.Errorf("after merging everything: %d rows in fragments, want %d", len(frag), len(got)+1)
		}
		if n := c.count("load", "wal", ""); n != 0 {
			t.Errorf("after merging everything: %d rows still in wal", n)
		}
	})
}

// TestFlushAfterSIGKILLReplaysWAL (regression): after a SIGKILL, a POST
// flush on the restarted worker alone makes the acknowledged, unsealed rows
// readable. It used to be a no-op until the store's next append claimed the
// shard and replayed its WAL. The worker also replays at startup
// (Catalog.Recover, in the background), so the flush races that recovery:
// either way the rows are readable once, right after the flush. (The test
// used to check that nothing was readable before the flush, which held
// only while reads beat the recovery.)
func TestFlushAfterSIGKILLReplaysWAL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := startWorker(t, b.dataDir(t), nil)
		c := newClient(t, w)
		c.createStore("replay")
		c.createStore("untouched")
		c.must(http.StatusCreated, c.appendJSON("replay", "", rec("a1", "r"), rec("a2", "r"), rec("a3", "r")), "append")
		w.Kill()
		w.Restart()
		c = newClient(t, w)
		c.flush("replay")
		if got := ids(c.listAll("replay", "wal", "")); strings.Join(got, " ") != "a1 a2 a3" {
			t.Fatalf("after restart + flush: %v in source=wal, want a1 a2 a3", got)
		}
		// Flushing a store this shard never wrote to is still a harmless no-op.
		c.flush("untouched")
		st := c.must(http.StatusOK, c.do("GET", "/api/v1/rollouts/untouched", "", nil), "stats")
		if sh, _ := st["shards"].([]any); len(sh) != 0 {
			t.Errorf("flushing an unwritten store created shards: %v", sh)
		}
	})
}

func head(s []string) []string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}

// TestSIGTERMSealsBufferedRows: rows appended without a flush are sealed at
// a graceful shutdown: the worker exits 0 promptly, and after a restart
// (with an hour-long flush interval and no flush) they are readable in
// source=wal.
func TestSIGTERMSealsBufferedRows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := startWorker(t, b.dataDir(t), nil)
		c := newClient(t, w)
		c.createStore("term")
		c.createStore("other")
		for i := 0; i < 5; i++ {
			c.must(http.StatusCreated, c.appendJSON("term", "", rec(fmt.Sprintf("t%d", i), "r"), rec(fmt.Sprintf("u%d", i), "r")), "append")
		}
		c.must(http.StatusCreated, c.appendJSON("other", "", rec("o1", "r")), "append other")
		if n := c.count("term", "wal", ""); n != 0 {
			t.Fatalf("%d rows visible before any flush (the flush interval is an hour)", n)
		}
		stats := c.must(http.StatusOK, c.do("GET", "/api/v1/rollouts/term", "", nil), "stats")
		if fmt.Sprint(stats["unflushed_rows"]) != "10" {
			t.Errorf("stats before shutdown: unflushed_rows %v, want 10", stats["unflushed_rows"])
		}

		start := time.Now()
		if err := w.Terminate(10 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, w.Stderr())
		}
		t.Logf("exited 0 %v after SIGTERM", time.Since(start).Round(time.Millisecond))
		if !strings.Contains(w.Stderr(), "stopped cleanly") {
			t.Errorf("no \"stopped cleanly\" in the log:\n%s", w.Stderr())
		}

		w.Restart()
		c = newClient(t, w)
		if n := c.count("term", "wal", ""); n != 10 {
			t.Fatalf("after restart, without a flush: %d rows in source=wal, want 10", n)
		}
		if n := c.count("other", "all", ""); n != 1 {
			t.Fatalf("after restart, without a flush: %d rows in the other store, want 1", n)
		}
		stats = c.must(http.StatusOK, c.do("GET", "/api/v1/rollouts/term", "", nil), "stats")
		if fmt.Sprint(stats["pending_rows"]) != "10" || fmt.Sprint(stats["unflushed_rows"]) != "0" {
			t.Errorf("stats after restart: pending_rows %v unflushed_rows %v, want 10 and 0", stats["pending_rows"], stats["unflushed_rows"])
		}
	})
}

// TestSIGTERMDrainsInFlight: requests in flight when SIGTERM arrives
// complete, and what they acknowledged survives.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	w := startWorker(t, localBackend.dataDir(t), nil)
	c := newClient(t, w)
	c.createStore("drain")
	// A slow upload: the request is in flight while the worker is told to stop.
	pr, pw := io.Pipe()
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", w.URL+"/api/v1/rollouts/drain/records", pr)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b)}
	}()
	_, _ = pw.Write([]byte(`{"records":[{"id":"slow-1","rollout_id":"r",`))
	time.Sleep(300 * time.Millisecond) // the server is reading the body
	term := make(chan error, 1)
	go func() { term <- w.Terminate(15 * time.Second) }()
	time.Sleep(300 * time.Millisecond)
	_, _ = pw.Write([]byte(`"content":"finished after SIGTERM"}]}`))
	pw.Close()
	res := <-done
	if res.err != nil || res.status != http.StatusCreated {
		t.Fatalf("in-flight append: %d %s %v", res.status, res.body, res.err)
	}
	if err := <-term; err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	w.Restart()
	c = newClient(t, w)
	if got := ids(c.listAll("drain", "wal", "")); len(got) != 1 || got[0] != "slow-1" {
		t.Fatalf("after restart: %v, want [slow-1]", got)
	}
}

// TestMetricsBoundedLabels: /metrics carries no store names, record ids or
// raw paths, only bounded labels.
func TestMetricsBoundedLabels(t *testing.T) {
	w := startWorker(t, localBackend.dataDir(t), nil)
	c := newClient(t, w)
	secrets := []string{"storename7x", "recid7x", "rolloutid7x", "nosuchstore7x", "nosuchid7x", "junkpath7x"}
	c.createStore("storename7x")
	c.must(http.StatusCreated, c.appendJSON("storename7x", "?flush=true", rec("recid7x", "rolloutid7x")), "append")
	c.must(http.StatusCreated, c.do("POST", "/api/v1/rollouts/storename7x/records", "application/vnd.apache.arrow.stream", arrowBody(t, 3, "recid7x-arrow")), "arrow append")
	c.must(http.StatusOK, c.do("GET", "/api/v1/rollouts/storename7x/records/recid7x", "", nil), "get")
	c.must(http.StatusOK, c.do("GET", "/api/v1/rollouts/storename7x/trajectories/rolloutid7x", "", nil), "trajectory")
	c.do("GET", "/api/v1/rollouts/storename7x/records/nosuchid7x", "", nil)
	c.do("GET", "/api/v1/rollouts/nosuchstore7x/records", "", nil)
	c.do("GET", "/junkpath7x/a/b", "", nil)
	c.do("GET", "/api/v1/rollouts/storename7x/junkpath7x", "", nil)
	c.do("POST", "/api/v1/rollouts/storename7x/merge", "", nil)
	text := c.metrics()

	allowed := map[string]bool{
		"service": true, "route": true, "method": true, "code": true, "le": true, "quantile": true,
		"format": true, "trigger": true, "result": true, "version": true, // version: go_info
		"cause": true, "store": true, // storage metrics: seals by cause; per open store
	}
	want := map[string]string{
		"http_requests_total":                  "code,method,route,service",
		"http_request_duration_seconds_bucket": "le,method,route,service",
		"rollout_appends_total":                "format",
		"rollout_merges_total":                 "result,trigger",
	}
	sampleRE := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelRE := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	seen := map[string]string{}
	routes := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		for _, s := range secrets {
			// A store that exists may name its own series (the per-store
			// storage gauges, one series per open store); nothing else a
			// request carries may reach a label.
			if strings.Contains(line, s) && !strings.Contains(line, `store="storename7x"`) {
				t.Errorf("metrics line carries request data %q: %s", s, line)
			}
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("unparsable metrics line: %s", line)
			continue
		}
		var names []string
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			names = append(names, l[1])
			if !allowed[l[1]] {
				t.Errorf("unexpected label %q: %s", l[1], line)
			}
			if l[1] == "route" {
				routes[l[2]] = true
			}
		}
		sort.Strings(names)
		seen[m[1]] = strings.Join(names, ",")
	}
	for name, labels := range want {
		if got, ok := seen[name]; !ok {
			t.Errorf("metric %s missing", name)
		} else if got != labels {
			t.Errorf("metric %s has labels %s, want %s", name, got, labels)
		}
	}
	for _, name := range []string{"rollout_records_appended_total", "rollout_appends_flushed_total", "rollout_wal_pending_generations", "lance_context_merge_rows_total"} {
		if got, ok := seen[name]; !ok || got != "" {
			t.Errorf("metric %s: present %v, labels %q, want present and unlabelled", name, ok, got)
		}
	}
	for r := range routes {
		if r != "unmatched" && !strings.HasPrefix(r, "/") {
			t.Errorf("route label %q is neither a pattern nor \"unmatched\"", r)
		}
	}
	if !routes["/api/v1/rollouts/{name}/records/{id}"] {
		t.Errorf("no route label for the get-record pattern; routes: %v", routes)
	}
	var buf bytes.Buffer
	for r := range routes {
		buf.WriteString(r + " ")
	}
	t.Logf("route labels: %s", buf.String())
}
