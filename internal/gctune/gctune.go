// Package gctune sets the garbage collector of a serving process and reads
// the /proc figures the benchmarks report.
package gctune

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// serverGCPercent is the GOGC of a serving process. A worker holds its
// memtables (up to 256 MiB per store) for seconds while it allocates a
// request's worth of garbage per append; at the default 100 the collector
// ran 15-20% of the CPU. The memory limit below bounds what the larger
// headroom may cost.
const serverGCPercent = 300

// EnvBudget names the variable that sets a process's memory budget.
const EnvBudget = "LC_MEMORY_BUDGET_BYTES"

// Tune sets the collector of a serving process (worker, dev, the
// in-process bench) unless GOGC or GOMEMLIMIT say otherwise: GOGC 300, and
// a soft memory limit of the process's memory budget: nine tenths of
// LC_MEMORY_BUDGET_BYTES, else 3/4 of the container's memory limit, else of
// the machine's memory,
// so the collector works harder before the process would run out rather
// than after. The caches, memtables, merges and request bodies take their
// shares of that limit (Budget).
//
// With GOGC unset the headroom then follows what is not cache (see
// tuneForCaches): the caches registered with RegisterHeld do not
// multiply the heap's goal.
func Tune() error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
		tunerOnce.Do(func() { go tuneLoop() })
	}
	if v := os.Getenv(EnvBudget); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 64<<20 {
			return fmt.Errorf("%s=%q: want a number of bytes, at least 67108864 (64 MiB)", EnvBudget, v)
		}
		if os.Getenv("GOMEMLIMIT") == "" {
			// A tenth is left for what the Go runtime does not count:
			// the returned memory the scavenger has not yet given back,
			// cgo allocations, thread stacks.
			debug.SetMemoryLimit(n - n/10)
		}
		return nil
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if total := memoryBudget(); total > 0 {
			debug.SetMemoryLimit(total / 4 * 3)
		}
	}
	return nil
}

// Budget returns the process's memory budget: the Go memory limit (Tune
// sets it), or 0 when there is none. Memory holders size their defaults
// as shares of it: the index page cache a quarter, the metadata cache and
// the generation cache a sixteenth each (at most 256 MiB), memtables and
// request bodies in flight an eighth each, a merge pass's input an eighth
// (at most 1 GiB).
func Budget() int64 {
	if n := debug.SetMemoryLimit(-1); n > 0 && n < 1<<62 {
		return n
	}
	return 0
}

// Share returns budget/div capped at cap, or cap without a budget.
func Share(div, cap int64) int64 {
	if b := Budget(); b > 0 {
		return min(b/div, cap)
	}
	return cap
}

func memoryBudget() int64 {
	total := ProcKiB("/proc/meminfo", "MemTotal") << 10
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) means no limit.
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 && (total == 0 || n < total) {
			return n
		}
	}
	return total
}

// ProcKiB returns the value in kB of the line "key: N kB" of a /proc
// file (Linux), or 0.
func ProcKiB(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

// The collector's goal is the live heap times 1 + GOGC/100. A serving
// process's caches (index pages, offsets, metadata: ~1 GB live at 10M
// rows) are live heap that produces no garbage, so at GOGC 300 they set a
// goal of ~4 GB: the heap then grew through gigabytes of pages it had
// never touched, a page fault per 4 KiB of each read's garbage, for the
// first ~25,000 reads after a start or a large merge, and a process held
// 4x its caches. The tuner keeps the headroom at GOGC 300 of the heap the
// caches do not hold: GC percent = 300 x (live - held) / live.

var (
	tunerOnce sync.Once
	heldMu    sync.Mutex
	heldFns   []func() int64
)

// RegisterHeld adds fn, the bytes a cache of the process holds now, to
// what the collector's goal leaves out (see Tune). Register process-wide
// caches only: the function is kept for the life of the process.
func RegisterHeld(fn func() int64) {
	heldMu.Lock()
	defer heldMu.Unlock()
	heldFns = append(heldFns, fn)
}

// Held returns the bytes the registered caches hold.
func Held() int64 {
	heldMu.Lock()
	fns := heldFns
	heldMu.Unlock()
	var n int64
	for _, fn := range fns {
		n += fn()
	}
	return n
}

// minGCPercent bounds the tuned GC percent from below: with caches most
// of the heap, a cycle marks them all, and cycles must not come too often.
const minGCPercent = 25

// gcPercentFor returns the GC percent that gives a live heap of live
// bytes, held of them in caches, the headroom serverGCPercent gives the
// rest.
func gcPercentFor(live, held int64) int {
	if live <= 0 || held <= 0 {
		return serverGCPercent
	}
	rest := max(live-held, 0)
	return max(minGCPercent, int(int64(serverGCPercent)*rest/live))
}

// tuneInterval is how often the tuner looks at the live heap.
const tuneInterval = 500 * time.Millisecond

func tuneLoop() {
	cur := serverGCPercent
	for range time.Tick(tuneInterval) {
		cur = tuneForCaches(cur)
	}
}

// tuneForCaches sets the GC percent for the live heap and the caches, when
// it differs from cur by more than an eighth, and returns the percent in
// force.
func tuneForCaches(cur int) int {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return cur
	}
	p := gcPercentFor(int64(s[0].Value.Uint64()), Held())
	if d := p - cur; d > cur/8 || -d > cur/8 {
		debug.SetGCPercent(p)
		return p
	}
	return cur
}
