package rollout

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSample: a draw of 16 groups of the last 3 policy versions over
// 4,000 merged rows (40 problems, 10 versions, 10 rows each) and 20
// pending generations of 20 rows, half of which rewrite base ids (the
// base rows they hide are taken out of the base's groups). warm: every
// summary cached, as a trainer's repeated draws find them; cold: the
// sampler's cache emptied before each draw (the generation cache stays
// warm), so each draw summarizes the fragments and looks up the base rows
// every pending generation hides.
func BenchmarkSample(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b, Options{PendingWarn: 1 << 30})
	for v := range 10 {
		var rs []Record
		for p := range 40 {
			rs = append(rs, groupRecs(fmt.Sprintf("p%02d", p), fmt.Sprintf("v%d", v), v*100+p, 10, varied)...)
		}
		if _, err := s.Append(ctx, rs); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	mergeAll(b, s)
	for g := range 20 {
		rs := groupRecs(fmt.Sprintf("new%02d", g), "v9", 2000+g, 10, varied)
		old := groupRecs(fmt.Sprintf("p%02d", (g*7)%40), fmt.Sprintf("v%d", 7+g%3), 3000+g, 10, flat) // same ids as base rows
		rs = append(rs, old...)
		if _, err := s.Append(ctx, rs); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	o := SampleOptions{N: 16, PolicyVersions: &PolicyWindowOpt{Last: ptr(3)}, Seed: ptr(uint64(7))}
	draw := func(b *testing.B) {
		res, err := s.Sample(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Groups) != 16 {
			b.Fatalf("%d groups, want 16", len(res.Groups))
		}
		res.Release()
	}
	b.Run("warm", func(b *testing.B) {
		draw(b)
		for b.Loop() {
			draw(b)
		}
	})
	b.Run("cold", func(b *testing.B) {
		saved := sampleLRU
		defer func() { sampleLRU = saved }()
		for b.Loop() {
			sampleLRU = newSampleCache(saved.max)
			draw(b)
		}
	})
}
