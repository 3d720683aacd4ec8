//go:build cgo

package sqlquery

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/lance-context/lance-context/rollout"
)

func TestNaturalCompare(t *testing.T) {
	in := []string{"step-10", "step-2", "step-1", "v10", "step-0", "v9", "step-10a", "step-007", "step-7", "1.10", "1.9", "a", ""}
	want := []string{"", "1.9", "1.10", "a", "step-0", "step-1", "step-2", "step-007", "step-7", "step-10", "step-10a", "v9", "v10"}
	slices.SortFunc(in, NaturalCompare)
	if !slices.Equal(in, want) {
		t.Fatalf("natural order %q, want %q", in, want)
	}
	for _, p := range [][2]string{{"x99999999999999999999999", "x100000000000000000000000"}, {"s2", "s10"}} {
		if NaturalCompare(p[0], p[1]) >= 0 || NaturalCompare(p[1], p[0]) <= 0 {
			t.Fatalf("%q and %q out of order", p[0], p[1])
		}
	}
}

// chartsOf computes the charts of store, with and without the chart base
// cache, and checks both agree.
func chartsOf(t *testing.T, f *fixture, store string, src rollout.Source) *Charts {
	t.Helper()
	ch, err := f.eng.Charts(context.Background(), store, src)
	if err != nil {
		t.Fatal(err)
	}
	cached := New(FromCatalog(f.cat), Limits{})
	cached.CacheChartBases(64 << 20)
	for i := 0; i < 2; i++ { // built, then cached
		cc, err := cached.Charts(context.Background(), store, src)
		if err != nil {
			t.Fatal(err)
		}
		if d := chartsDiff(cc, ch); d != "" {
			t.Fatalf("charts from the chart base (%s) differ from a scan:%s", cc.Base, d)
		}
	}
	return ch
}

// Regression: the reward chart ordered policy versions as strings
// (step-0, step-1, step-10, step-11, step-2, ...); it orders them
// naturally, and each carries its first arrival for the other order.
func TestRegression_PolicyVersionsInNaturalOrder(t *testing.T) {
	f := newFixture(t, Limits{})
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "steps")
	if err != nil {
		t.Fatal(err)
	}
	var recs []rollout.Record
	for step := 12; step >= 0; step-- { // newest first: first appearance is not natural order
		recs = append(recs, rollout.Record{ID: fmt.Sprintf("s%02d", step), RolloutID: "r", Role: "assistant",
			PolicyVersion: ptr(fmt.Sprintf("step-%d", step)), Reward: ptr(float32(step)),
			CreatedAt: ptr(time.Date(2026, 1, 1, 0, 12-step, 0, 0, time.UTC))})
	}
	if _, err := s.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, src := range []rollout.Source{rollout.SourceWAL, rollout.SourceAll} {
		ch := chartsOf(t, f, "steps", src)
		var got []string
		for _, p := range ch.RewardByPolicyVersion {
			got = append(got, p.PolicyVersion)
			if want := fmt.Sprintf("step-%d", int(p.Mean)); want != p.PolicyVersion {
				t.Fatalf("%s: %s has the mean of %s", src, p.PolicyVersion, want)
			}
		}
		want := make([]string, 13)
		for i := range want {
			want[i] = fmt.Sprintf("step-%d", i)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: versions %v, want %v", src, got, want)
		}
		// step-12 was written first (created_at, as the ids are not UUIDv7).
		first, _ := time.Parse(time.RFC3339Nano, ch.RewardByPolicyVersion[12].FirstSeen)
		if !first.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("%s: step-12 first seen %q", src, ch.RewardByPolicyVersion[12].FirstSeen)
		}
	}
}

// Regression: "response length" counted every row's length, system and
// user prompts included (long content, no output tokens). It counts the
// responses (role assistant) alone: their num_output_tokens, or their
// content length without one.
func TestRegression_ResponseLengthCountsResponsesOnly(t *testing.T) {
	f := newFixture(t, Limits{})
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	long := string(make([]byte, 500))
	for i := range 20 {
		r := fmt.Sprintf("r%d", i)
		recs := []rollout.Record{
			{ID: r + "-sys", RolloutID: r, Role: "system", Content: ptr(long), NumInputTokens: ptr(int32(400))},
			{ID: r + "-user", RolloutID: r, Role: "user", Content: ptr(long), SequenceOrder: 1},
			{ID: r + "-tool", RolloutID: r, Role: "tool", Content: ptr("{}"), NumOutputTokens: ptr(int32(900)), SequenceOrder: 3},
			{ID: r + "-a", RolloutID: r, Role: "assistant", Content: ptr("abc"), NumOutputTokens: ptr(int32(10 + i)), SequenceOrder: 2},
			{ID: r + "-b", RolloutID: r, Role: "assistant", Content: ptr("abcdefg"), SequenceOrder: 4}, // 7 characters
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(src rollout.Source) {
		t.Helper()
		ch := chartsOf(t, f, "conv", src)
		var lens []int64
		for _, b := range ch.LengthHist {
			for range b.Count {
				lens = append(lens, b.Lo)
			}
		}
		if len(lens) != 40 || lens[0] != 7 || lens[39] > 29 {
			t.Fatalf("%s: %d lengths from %v to %v (hist %+v), want the 40 responses' 7..29", src, len(lens), lens[0], lens[len(lens)-1], ch.LengthHist)
		}
	}
	check(rollout.SourceWAL)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	check(rollout.SourceFragments)
	check(rollout.SourceAll)
}

// Regression: the ingest rate counted rows by created_at, the client's
// claim of when an episode happened (a backfill dates it in the past).
// It counts them by arrival: the time in a UUIDv7 id (which the clients
// and the server make when a record is sent), else created_at.
func TestRegression_IngestRateByArrival(t *testing.T) {
	f := newFixture(t, Limits{})
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "backfill")
	if err != nil {
		t.Fatal(err)
	}
	arrived := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	v7 := func(at time.Time, n int) string {
		u := uuid.Must(uuid.NewV7())
		ms := uint64(at.UnixMilli())
		for i := 0; i < 6; i++ {
			u[i] = byte(ms >> (40 - 8*i))
		}
		u[15] = byte(n)
		return u.String()
	}
	var recs []rollout.Record
	for i := range 30 { // episodes of 2020 sent now, within a minute
		recs = append(recs, rollout.Record{ID: v7(arrived.Add(time.Duration(i)*time.Second), i), RolloutID: "old", Role: "assistant",
			CreatedAt: ptr(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour))})
	}
	for i := range 5 { // ids of the client's own making: created_at stands in
		recs = append(recs, rollout.Record{ID: fmt.Sprintf("own-%d", i), RolloutID: "own", Role: "assistant",
			CreatedAt: ptr(arrived.Add(10 * time.Minute))})
	}
	if _, err := s.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	for _, src := range []rollout.Source{rollout.SourceFragments, rollout.SourceAll} {
		ch := chartsOf(t, f, "backfill", src)
		rate := map[string]int64{}
		var total int64
		for _, p := range ch.IngestRate {
			rate[p.T] = p.Rows
			total += p.Rows
		}
		bucket := func(at time.Time) string {
			w := ch.IngestBucketSeconds
			return time.Unix(at.Unix()/w*w, 0).UTC().Format(time.RFC3339)
		}
		if total != 35 || rate[bucket(arrived)] != 30 || rate[bucket(arrived.Add(10*time.Minute))] < 5 {
			t.Fatalf("%s: ingest %+v (buckets of %d s), want 30 at %s and 5 at +10 min", src, ch.IngestRate, ch.IngestBucketSeconds, arrived)
		}
		// The reward and length trends stay by created_at: 2020.
		if len(ch.RewardOverTime) != 0 || (len(ch.LengthOverTime) > 0 && ch.LengthOverTime[0].T[:4] != "2020") {
			t.Fatalf("%s: trends %+v %+v", src, ch.RewardOverTime, ch.LengthOverTime)
		}
	}
}
