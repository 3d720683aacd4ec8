package index

import (
	"context"
	"slices"
	"testing"

	"github.com/lance-context/lance-context/lance/table"
)

// TestRegression_SegmentsParsedOncePerVersion: every lookup used to parse
// the version's index section and decode each segment's fragment bitmap
// again (with Warm before it on every read), which cost more than the
// lookup itself on a table of many fragments and segments. They are now
// parsed once per opened version and column; a new version (an appended,
// uncovered fragment) gets its own, and the answers stay those of a scan.
func TestRegression_SegmentsParsedOncePerVersion(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 2000)
	if _, err := Update(ctx, st, "id", BuildOptions{BatchSize: 16}); err != nil {
		t.Fatal(err)
	}
	d1, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFinder(1 << 20)
	probe := rows(5, 6)
	v := probe.Column(0).(interface{ Value(int) string }).Value(0)
	probe.Release()
	cov1, a1, err := f.Addrs(ctx, d1, "id", v)
	if err != nil || cov1 == nil || len(a1) != 1 {
		t.Fatalf("Addrs = %v, %v, %v", cov1, a1, err)
	}
	cov1b, a1b, err := f.Addrs(ctx, d1, "id", v)
	if err != nil || !slices.Equal(a1, a1b) {
		t.Fatalf("second Addrs = %v, %v", a1b, err)
	}
	if cov1b != cov1 {
		t.Fatal("the second lookup on the same version parsed its segments again")
	}
	appendRows(t, st, 2000, 2100) // a fragment no index covers
	d2, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	cov2, a2, err := f.Addrs(ctx, d2, "id", v)
	if err != nil || !slices.Equal(a1, a2) || !cov2.Equals(cov1) {
		t.Fatalf("Addrs on the new version = %v, %v, %v", cov2, a2, err)
	}
	if cov2 == cov1 {
		t.Fatal("a new version reused the segments of the old one")
	}
	checkAgree(t, st, "after append", probes(0, 5, 1999, 2050), "id")
}

// TestRegression_ReplacedSegmentsLeaveThePageCache: pages of an index
// segment stayed cached after a newer version replaced it (every merge's
// index update, every compaction), so a busy store's cache filled with
// dead pages, a quarter of the memory budget the collector marked. When a
// Finder meets a newer version that no longer has a segment, that
// segment's pages are dropped; the older version still reads.
func TestRegression_ReplacedSegmentsLeaveThePageCache(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 2000)
	if _, err := Update(ctx, st, "id", BuildOptions{BatchSize: 16}); err != nil {
		t.Fatal(err)
	}
	d1, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFinder(8 << 20)
	probe := rows(5, 6)
	v := probe.Column(0).(interface{ Value(int) string }).Value(0)
	probe.Release()
	uuidsOf := func() map[string]int {
		f.cache.mu.Lock()
		defer f.cache.mu.Unlock()
		out := map[string]int{}
		for k := range f.cache.m {
			out[k.uuid]++
		}
		return out
	}
	if _, a, err := f.Addrs(ctx, d1, "id", v); err != nil || len(a) != 1 {
		t.Fatalf("Addrs on the first version = %v, %v", a, err)
	}
	old := uuidsOf()
	if len(old) != 1 {
		t.Fatalf("pages of %d segments cached, want 1", len(old))
	}
	appendRows(t, st, 2000, 2100)
	if _, err := Update(ctx, st, "id", BuildOptions{BatchSize: 16}); err != nil {
		t.Fatal(err)
	}
	d2, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, a, err := f.Addrs(ctx, d2, "id", v); err != nil || len(a) != 1 {
		t.Fatalf("Addrs on the new version = %v, %v", a, err)
	}
	now := uuidsOf()
	for u := range old {
		if now[u] > 0 {
			t.Fatalf("%d pages of the replaced segment %s are still cached", now[u], u)
		}
	}
	if len(now) == 0 {
		t.Fatal("the new version's lookup cached nothing")
	}
	// The older version still answers (its pages read again).
	if _, a, err := f.Addrs(ctx, d1, "id", v); err != nil || len(a) != 1 {
		t.Fatalf("Addrs on the first version after the replacement = %v, %v", a, err)
	}
}
