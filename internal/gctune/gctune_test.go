package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prevPct := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPct)
		debug.SetMemoryLimit(prevLimit)
	})

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(EnvBudget, "")
	if err := Tune(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Errorf("GC percent %d, want %d", got, serverGCPercent)
	}
	if total := memoryBudget(); total <= 0 {
		t.Skip("no memory size readable here")
	} else if got := debug.SetMemoryLimit(-1); got != total/4*3 {
		t.Errorf("memory limit %d, want 3/4 of %d", got, total)
	}

	// The user's settings win.
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	if err := Tune(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: GC percent changed to %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT set: limit changed to %d", got)
	}
}

// TestBudgetSharesAndEnv: LC_MEMORY_BUDGET_BYTES sets the memory limit,
// the shares follow it, and a bad value is refused with what to fix.
func TestBudgetSharesAndEnv(t *testing.T) {
	prevPct := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPct)
		debug.SetMemoryLimit(prevLimit)
	})
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(EnvBudget, "1193046471") // 1 GiB is nine tenths of it
	if err := Tune(); err != nil {
		t.Fatal(err)
	}
	if Budget() != 1<<30 || Share(16, 256<<20) != 64<<20 || Share(4, 1<<40) != 256<<20 || Share(8, 1<<20) != 1<<20 {
		t.Fatalf("budget %d, shares %d %d %d", Budget(), Share(16, 256<<20), Share(4, 1<<40), Share(8, 1<<20))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if Budget() != 0 || Share(16, 256<<20) != 256<<20 {
		t.Fatalf("without a limit: budget %d share %d", Budget(), Share(16, 256<<20))
	}
	for _, bad := range []string{"lots", "1000"} {
		t.Setenv(EnvBudget, bad)
		if err := Tune(); err == nil || !strings.Contains(err.Error(), EnvBudget) {
			t.Fatalf("%s=%s: %v", EnvBudget, bad, err)
		}
	}
}

// TestCachesDoNotMultiplyTheGoal: the GC percent leaves the registered
// caches out of the heap goal: with caches 3/4 of the live heap, GOGC 300
// becomes 75 (the goal is the live heap plus 300% of the quarter that is
// not cache), and never below minGCPercent.
func TestCachesDoNotMultiplyTheGoal(t *testing.T) {
	for _, c := range []struct {
		live, held int64
		want       int
	}{
		{0, 0, serverGCPercent},
		{1 << 30, 0, serverGCPercent},
		{1 << 30, 3 << 28, 75},
		{1 << 30, 1 << 30, minGCPercent},
		{1 << 30, 2 << 30, minGCPercent}, // charged above the heap: an estimate
	} {
		if got := gcPercentFor(c.live, c.held); got != c.want {
			t.Errorf("live %d, held %d: GC percent %d, want %d", c.live, c.held, got, c.want)
		}
	}

	// In the process: a cache of 256 MiB, registered, sets the percent.
	prev := debug.SetGCPercent(serverGCPercent)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	cache := make([]byte, 256<<20)
	for i := range cache {
		cache[i] = byte(i)
	}
	RegisterHeld(func() int64 { return int64(len(cache)) })
	t.Cleanup(func() { heldMu.Lock(); heldFns = nil; heldMu.Unlock() })
	runtime.GC()
	p := tuneForCaches(serverGCPercent)
	if p >= serverGCPercent/2 || p < minGCPercent {
		t.Fatalf("with a 256 MiB cache registered, GC percent %d, want well below %d", p, serverGCPercent)
	}
	if got := debug.SetGCPercent(p); got != p {
		t.Fatalf("GC percent in force %d, tuner returned %d", got, p)
	}
	runtime.KeepAlive(cache)
}
