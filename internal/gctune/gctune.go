// Package gctune sets the garbage collector of a serving process and reads
// the /proc figures the benchmarks report.
package gctune

import (
	"bufio"
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

// Tune sets the collector of a serving process (worker, dev, the
// in-process bench) unless GOGC or GOMEMLIMIT say otherwise: GOGC 300, and
// a soft memory limit of 3/4 of the container's memory limit, else of the
// machine's memory, so the collector works harder before the process
// would run out rather than after.
func Tune() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if total := memoryBudget(); total > 0 {
			debug.SetMemoryLimit(total / 4 * 3)
		}
	}
}

// memoryBudget returns the container's memory limit (cgroup v2, else v1),
// else the machine's memory (MemTotal), else 0.
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
