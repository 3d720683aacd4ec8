package wal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lance-context/lance-context/objstore"
)

// gathered returns the value of the metric name (with the label pairs in
// labels, "k=v") from reg: a counter's or gauge's value, a histogram's
// sample count. It fails when there is no such metric.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName()+"="+lp.GetValue() == l {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

// observed returns the sample count and sum of h, read from the instrument
// itself: cheap enough for a test to read after every append.
func observed(t testing.TB, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// counted returns the value of counter c.
func counted(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMetricsCountAKnownWorkload runs a workload whose storage events are
// known and reads the counts back through the registry: 25 one-row
// entries with a memtable of 10 rows (two memtable-full seals), a flush
// (the last 5), a second claim that fences the first writer, a write that
// fails, and a corrupt log.
func TestMetricsCountAKnownWorkload(t *testing.T) {
	ctx := context.Background()
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("segments=%v", local), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			var o Options
			var dir string
			if local {
				o, dir = localOpts(t)
			} else {
				o = opts(objstore.NewMemory())
			}
			o.Metrics = NewMetrics(reg)
			o.MaxMemtableRows = 10
			w := claim(t, o)
			for i := range 25 {
				if err := appendIDs(t, w, fmt.Sprintf("m%02d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Seal(ctx); err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{
				"lance_context_wal_entry_rows":    25,
				"lance_context_wal_entry_bytes":   25,
				"rollout_records_appended_total":  25,
				"lance_context_wal_seal_seconds":  3,
				"rollout_wal_pending_generations": 3,
				"lance_context_wal_unsealed_rows": 0,
			}
			if local {
				want["lance_context_wal_sync_seconds"] = 25
			} else {
				want["lance_context_wal_put_seconds"] = 25
			}
			for name, v := range want {
				if got := gathered(t, reg, name); got != v {
					t.Errorf("%s = %v, want %v", name, got, v)
				}
			}
			if got := gathered(t, reg, "lance_context_wal_seals_total", "cause="+SealFull); got != 2 {
				t.Errorf("memtable-full seals %v, want 2", got)
			}
			if got := gathered(t, reg, "lance_context_wal_seals_total", "cause="+SealFlush); got != 1 {
				t.Errorf("flush seals %v, want 1", got)
			}

			w2 := claim(t, o) // fences w
			if err := appendIDs(t, w, "late"); !errors.Is(err, ErrFenced) {
				t.Fatalf("append of a deposed writer: %v", err)
			}
			w.Abandon()
			if got := gathered(t, reg, "lance_context_wal_writers_fenced_total"); got != 1 {
				t.Errorf("fenced writers %v, want 1", got)
			}
			if got := gathered(t, reg, "rollout_wal_pending_generations"); got != 3 {
				t.Errorf("pending generations %v after the deposed writer stopped, want w2's 3", got)
			}
			if local {
				if err := appendIDs(t, w2, "x"); err != nil {
					t.Fatal(err)
				}
				w2.seg.cur.f.Close() // the next write fails
				if err := appendIDs(t, w2, "y"); !errors.Is(err, ErrLogFailed) {
					t.Fatalf("append after a failed write: %v", err)
				}
				if got := gathered(t, reg, "lance_context_wal_writers_failed_total"); got != 1 {
					t.Errorf("failed writers %v, want 1", got)
				}
				w2.Abandon()
				// Damage the first of two frames: corrupt.
				w3 := claim(t, o)
				for _, id := range []string{"z1", "z2"} {
					if err := appendIDs(t, w3, id); err != nil {
						t.Fatal(err)
					}
				}
				w3.Abandon()
				w3.WaitCollect()
				frames := liveFramesFrom(t, dir, w3.Manifest().ReplayAfter+1)
				if len(frames) != 2 {
					t.Fatalf("frames %v", frames)
				}
				flipBit(t, filepath.Join(dir, frames[0].seg), frames[0].off+frameHeaderSize, 0)
				claimCorrupt(t, o)
				if got := gathered(t, reg, "lance_context_wal_replay_corruptions_total"); got != 1 {
					t.Errorf("replay corruptions %v, want 1", got)
				}
			} else {
				if err := w2.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if got := gathered(t, reg, "rollout_wal_pending_generations"); got != 0 {
					t.Errorf("pending generations %v after every writer stopped, want 0", got)
				}
			}
		})
	}
}

// TestMetricsRegisterTwice: a second set of instruments on one registry
// (a second catalog in a process) shares the first's.
func TestMetricsRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.FencedWriters.Inc()
	b.FencedWriters.Inc()
	if got := gathered(t, reg, "lance_context_wal_writers_fenced_total"); got != 2 {
		t.Fatalf("fenced writers %v, want 2", got)
	}
	NewMetrics(nil).FencedWriters.Inc() // unregistered: counts, no panic
}
