package httpe2e

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lance-context/lance-context/internal/gctune"
)

// procKiB reads one "Key:   N kB" line of /proc/PID/status.
func procKiB(t *testing.T, pid int, key string) int64 {
	t.Helper()
	n := gctune.ProcKiB(fmt.Sprintf("/proc/%d/status", pid), key)
	if n == 0 {
		t.Skipf("no %s in /proc/%d/status here", key, pid)
	}
	return n
}

// TestWorkerStaysInItsMemoryBudget: a worker given a 256 MiB budget, with
// 200 stores written (more memtable bytes than its memtable share) and
// read, keeps its anonymous memory below the budget throughout: the budget
// sets the Go memory limit, the memtables of all stores are sealed past
// their share, and the caches are shares of it.
func TestWorkerStaysInItsMemoryBudget(t *testing.T) {
	const budget = 256 << 20
	w := startWorker(t, t.TempDir(), map[string]string{"LC_MEMORY_BUDGET_BYTES": strconv.Itoa(budget)})
	c := newClient(t, w)
	// Anonymous memory is what the budget bounds; the binary's mapped
	// text (RssFile, ~85 MiB, clean pages the kernel can drop) is not.
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), gctune.ProcKiB(fmt.Sprintf("/proc/%d/status", w.cmd.Process.Pid), "RssAnon")<<10))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	content := strings.Repeat("m", 2000)
	for s := range 200 {
		name := fmt.Sprintf("s%03d", s)
		c.createStore(name)
		recs := make([]map[string]any, 200)
		for i := range recs {
			recs[i] = map[string]any{"id": fmt.Sprintf("%s-%03d", name, i), "rollout_id": "r", "content": content}
		}
		c.must(201, c.appendJSON(name, "", recs...), "append")
	}
	for s := 0; s < 200; s += 10 {
		name := fmt.Sprintf("s%03d", s)
		c.flush(name)
		if n := c.count(name, "all", ""); n != 200 {
			t.Fatalf("store %s lists %d rows, want 200", name, n)
		}
	}
	close(stop)
	<-sampled
	t.Logf("peak anonymous RSS %d MiB with a budget of %d MiB (80 MB of records in 200 stores; peak RSS with the binary's pages %d MiB)",
		peak.Load()>>20, budget>>20, procKiB(t, w.cmd.Process.Pid, "VmHWM")>>10)
	if peak.Load() > budget {
		t.Fatalf("peak anonymous RSS %d MiB is over the budget of %d MiB", peak.Load()>>20, budget>>20)
	}
}
