package wal

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// fullDiskOpts returns writer options whose segment log lives on a file
// system with free bytes left (the default 64 MiB segments).
func fullDiskOpts(free int64) (Options, *vfs.Quota) {
	q := vfs.NewQuota(vfs.NewMem(), free)
	o := opts(objstore.NewMemory())
	o.Log = Log{FS: q, Dir: "/data"}
	o.Metrics = NewMetrics(nil)
	return o, q
}

// TestSegmentPreallocDegrades (regression): with 12-35 MB free, preparing
// the next 64 MiB segment failed and the writer stopped (ErrLogFailed), so
// appends failed while space remained. Now a segment that does not fit is
// allocated smaller, down to a floor, and appends go on.
func TestSegmentPreallocDegrades(t *testing.T) {
	const free = 8 << 20 // segments 1 and 4 MiB fit, the third (16 MiB) does not
	o, q := fullDiskOpts(free)
	w := claim(t, o)
	defer w.Abandon()
	entry := strings.Repeat("x", 200<<10)
	var ids []string
	for i := 0; w.seg.seq < 4; i++ { // through segments 1, 2 and 3 into 4
		id := fmt.Sprintf("%03d-%s", i, entry)
		if err := appendIDs(t, w, id); err != nil {
			t.Fatalf("append %d with %d bytes free: %v", i, q.Free(), err)
		}
		ids = append(ids, id)
		if i > 200 {
			t.Fatalf("no fourth segment after %d appends", i)
		}
	}
	if got := counterValue(t, o.Metrics.SegmentsDegraded); got < 1 {
		t.Fatalf("segments degraded %v, want at least 1", got)
	}
	if s3 := w.seg.closed[len(w.seg.closed)-1]; s3.cap >= 16<<20 || s3.cap < minSegmentBytes {
		t.Fatalf("segment 3 holds %d bytes: not degraded to between the floor and the 16 MiB wanted", s3.cap)
	}
	if w.Epoch() != 1 {
		t.Fatalf("epoch %d: the writer was replaced", w.Epoch())
	}
	w.Abandon()
	replayed(t, o, ids...)
}

// TestFullLogRecoversWhenSpaceFreed: when not even the smallest segment
// fits, an append fails with ErrNoSpace (not ErrLogFailed: nothing was
// written, and the writer is sound); once space is freed the next append
// of the same writer succeeds.
func TestFullLogRecoversWhenSpaceFreed(t *testing.T) {
	o, q := fullDiskOpts(minSegmentBytes - 1)
	w := claim(t, o)
	defer w.Abandon()
	for range 3 {
		err := appendIDs(t, w, "refused")
		if !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrLogFailed) || errors.Is(err, ErrFenced) {
			t.Fatalf("append on a full disk: %v, want ErrNoSpace alone", err)
		}
	}
	if got := counterValue(t, o.Metrics.NoSpace); got != 3 {
		t.Fatalf("no-space errors %v, want 3", got)
	}
	q.SetFree(64 << 20)
	if err := appendIDs(t, w, "a"); err != nil {
		t.Fatalf("append once space is freed: %v", err)
	}
	// A frame larger than what is left fails alone, before anything is
	// written, and the writer goes on.
	q.SetFree(0)
	big := strings.Repeat("b", 2<<20)
	if err := appendIDs(t, w, big); !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrLogFailed) {
		t.Fatalf("append of an entry larger than the room left: %v", err)
	}
	q.SetFree(64 << 20)
	if err := appendIDs(t, w, "b"); err != nil {
		t.Fatal(err)
	}
	if w.Epoch() != 1 {
		t.Fatalf("epoch %d", w.Epoch())
	}
	w.Abandon()
	replayed(t, o, "a", "b")
}

// counterValue returns a counter's value.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
