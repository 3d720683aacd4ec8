package gctune

import (
	"runtime/debug"
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
	Tune()
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
	Tune()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: GC percent changed to %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT set: limit changed to %d", got)
	}
}
