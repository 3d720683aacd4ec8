// Package gctune sets the garbage collector of a serving process and reads
// the /proc figures the benchmarks report.
package gctune

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
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
func Tune() error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
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
