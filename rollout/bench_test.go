package rollout

// Go benchmarks of the engine on local disk. The figures of record come from
// `lance-context-bench engine` (one command, JSON, local or S3); these are
// for profiling a piece: go test -run '^$' -bench Append -cpuprofile cpu.out ./rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lance-context/lance-context/objstore"
)

func benchStore(b *testing.B, o Options) *Store {
	b.Helper()
	root, err := objstore.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	c := NewCatalog(root, ShardID("bench"), quiet(o))
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	s, err := c.Create(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// histogram returns h's sample count and sum.
func histogram(b *testing.B, h prometheus.Histogram) (uint64, float64) {
	b.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		b.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// BenchmarkAppend: single-record appends of about 1 KB by 1, 16 and 64
// concurrent appenders. Reports latency quantiles, and rows and appends
// per WAL entry (the group commit), read from the WAL's metrics.
func BenchmarkAppend(b *testing.B) {
	content := strings.Repeat("x", 900)
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("appenders=%d", n), func(b *testing.B) {
			s := benchStore(b, Options{})
			ctx := context.Background()
			if _, err := s.Append(ctx, []Record{{ID: "warm", RolloutID: "r"}}); err != nil {
				b.Fatal(err)
			}
			m := s.opts.metrics.wal // the catalog's own: this sub-benchmark's counts
			entries0, rows0 := histogram(b, m.EntryRows)
			_, appends0 := histogram(b, m.EntryAppends)
			var next atomic.Int64
			lat := make([][]time.Duration, n)
			var wg sync.WaitGroup
			b.SetBytes(1024)
			b.ResetTimer()
			for g := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						t0 := time.Now()
						if _, err := s.Append(ctx, []Record{{ID: fmt.Sprintf("r-%09d", i), RolloutID: "r", Content: &content}}); err != nil {
							b.Error(err)
							return
						}
						lat[g] = append(lat[g], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			}
			entries, rows := histogram(b, m.EntryRows)
			_, appends := histogram(b, m.EntryAppends)
			if e := entries - entries0; e > 0 {
				b.ReportMetric((rows-rows0)/float64(e), "rows/entry")
				b.ReportMetric((appends-appends0)/float64(e), "appends/entry")
			}
		})
	}
}

// BenchmarkListPage: one page of 25 per source over 2,000 merged rows and
// 0, 100 or 1000 pending generations of 5 rows.
func BenchmarkListPage(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b, Options{PendingWarn: 1 << 30})
	for i := 0; i < 2; i++ {
		if _, err := s.Append(ctx, recs(fmt.Sprintf("base%d", i), 1000, "r")); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Merge(ctx); err != nil {
		b.Fatal(err)
	}
	have := 0
	for _, pending := range []int{0, 100, 1000} {
		for ; have < pending; have++ {
			if _, err := s.Append(ctx, recs(fmt.Sprintf("p%04d", have), 5, "r")); err != nil {
				b.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		for _, src := range []Source{SourceFragments, SourceWAL, SourceAll} {
			b.Run(fmt.Sprintf("pending=%d/source=%s", pending, src), func(b *testing.B) {
				for b.Loop() {
					if _, err := s.List(ctx, ListOptions{Source: src, Limit: 25}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMerge: one merge pass of 8 generations of 1,000 rows of ~1 KB.
func BenchmarkMerge(b *testing.B) {
	ctx := context.Background()
	content := strings.Repeat("y", 900)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := benchStore(b, Options{})
		for g := 0; g < 8; g++ {
			rs := recs(fmt.Sprintf("i%d-g%d", i, g), 1000, "r")
			for j := range rs {
				rs[j].Content = &content
			}
			if _, err := s.Append(ctx, rs); err != nil {
				b.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		res, err := s.Merge(ctx)
		if err != nil || res.Rows != 8000 {
			b.Fatalf("merge %+v %v", res, err)
		}
	}
	b.ReportMetric(8000*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
