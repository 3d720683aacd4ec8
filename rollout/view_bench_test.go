package rollout

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// BenchmarkViewReads: the reads that go through a view (get, a filtered
// page, a trajectory, a scan of all) over 2,000 merged rows and 100
// pending generations of 5 rows, some of which rewrite base ids: warm, in
// process, on local disk.
func BenchmarkViewReads(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b, Options{PendingWarn: 1 << 30})
	for i := 0; i < 2; i++ {
		if _, err := s.Append(ctx, recs(fmt.Sprintf("base%d", i), 1000, fmt.Sprintf("r%d", i))); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Merge(ctx); err != nil {
		b.Fatal(err)
	}
	for g := 0; g < 100; g++ {
		rs := recs(fmt.Sprintf("p%04d", g), 4, "r0")
		rs = append(rs, recs("base0", 1000, "r0")[g*7:g*7+1]...) // rewrites a base id
		if _, err := s.Append(ctx, rs); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("get/base", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "base1-500"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/pending", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "base0-014"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("page/all/filtered", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.List(ctx, ListOptions{Source: SourceAll, Limit: 25, After: "base0-100", Filters: []Filter{{ColRolloutID, "r0"}}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("trajectory", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Trajectory(ctx, "r1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan/all", func(b *testing.B) {
		for b.Loop() {
			if err := s.Scan(ctx, ScanOptions{Source: SourceAll, Columns: []string{ColID, "reward"}}, func(arrow.RecordBatch) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
