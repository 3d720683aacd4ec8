//go:build cgo

package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// chartsEqual reports how got differs from want, ignoring what says how
// they were computed (rows scanned, time, base source) and the rounding of
// sums taken in another order.
func chartsDiff(got, want *Charts) string {
	g, w := *got, *want
	g.RowsScanned, w.RowsScanned, g.ElapsedMS, w.ElapsedMS, g.Base, w.Base = 0, 0, 0, 0, "", ""
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	if len(g.RewardByPolicyVersion) == len(w.RewardByPolicyVersion) {
		for i, p := range g.RewardByPolicyVersion {
			if q := w.RewardByPolicyVersion[i]; near(p.Mean, q.Mean) && near(p.P10, q.P10) && near(p.P90, q.P90) {
				g.RewardByPolicyVersion[i] = q
			}
		}
	}
	if len(g.RewardOverTime) == len(w.RewardOverTime) {
		for i, p := range g.RewardOverTime {
			if q := w.RewardOverTime[i]; near(p.Mean, q.Mean) && near(p.P10, q.P10) && near(p.P90, q.P90) {
				g.RewardOverTime[i] = q
			}
		}
	}
	if len(g.LengthOverTime) == len(w.LengthOverTime) {
		for i, p := range g.LengthOverTime {
			if q := w.LengthOverTime[i]; near(p.Mean, q.Mean) && near(p.P50, q.P50) && near(p.P90, q.P90) {
				g.LengthOverTime[i] = q
			}
		}
	}
	if reflect.DeepEqual(g, w) {
		return ""
	}
	return fmt.Sprintf("\n got %+v\nwant %+v", g, w)
}

// chartBaseFixture is a store read by two engines: one with the chart base
// cache (capBytes) and one without, whose charts are a scan of the store.
type chartBaseFixture struct {
	*fixture
	cached *Engine
}

func newChartBaseFixture(t *testing.T, capBytes int64) *chartBaseFixture {
	f := newFixture(t, Limits{})
	c := New(f.eng.open, Limits{})
	c.CacheChartBases(capBytes)
	t.Cleanup(c.Close)
	return &chartBaseFixture{fixture: f, cached: c}
}

// check computes the charts of src with both engines and fails unless they
// agree and the cached engine read its base as wantBase. It also checks the
// reward by policy_version against a direct query over records.
func (f *chartBaseFixture) check(t *testing.T, store string, src rollout.Source, wantBase BaseSource, step string) *Charts {
	t.Helper()
	ctx := context.Background()
	got, err := f.cached.Charts(ctx, store, src)
	if err != nil {
		t.Fatalf("%s: cached charts %s: %v", step, src, err)
	}
	want, err := f.eng.Charts(ctx, store, src)
	if err != nil {
		t.Fatalf("%s: charts %s: %v", step, src, err)
	}
	if got.Base != wantBase || want.Base != BaseScanned {
		t.Fatalf("%s: %s: base %q (want %q), uncached %q", step, src, got.Base, wantBase, want.Base)
	}
	if d := chartsDiff(got, want); d != "" {
		t.Fatalf("%s: %s: cached charts differ from a scan:%s", step, src, d)
	}
	res := f.query(t, store, `SELECT policy_version, avg(reward::DOUBLE), count(*) FROM records
		WHERE reward IS NOT NULL AND NOT isnan(reward) AND policy_version IS NOT NULL GROUP BY 1 ORDER BY 1`, src)
	direct := map[string][2]float64{}
	for _, r := range res.Rows {
		direct[r[0].(string)] = [2]float64{r[1].(float64), float64(asInt(r[2]))}
	}
	if len(direct) != len(got.RewardByPolicyVersion) {
		t.Fatalf("%s: %s: %d versions, direct query %d", step, src, len(got.RewardByPolicyVersion), len(direct))
	}
	for _, p := range got.RewardByPolicyVersion {
		d := direct[p.PolicyVersion]
		if math.Abs(p.Mean-d[0]) > 1e-9 || float64(p.Count) != d[1] {
			t.Fatalf("%s: %s: version %s mean %v count %d, direct query %v", step, src, p.PolicyVersion, p.Mean, p.Count, d)
		}
	}
	return got
}

// chartRecs are n records whose ids start at from (prefix-from...), some
// without num_output_tokens (their content length counts) and some with a
// NaN reward.
func chartRecs(prefix string, from, n int, reward float32, pv string, minute int) []rollout.Record {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]rollout.Record, n)
	for k := range out {
		i := from + k
		r := rollout.Record{
			ID: fmt.Sprintf("%s-%04d", prefix, i), RolloutID: fmt.Sprintf("r%d", i/4), ProblemID: "p", Role: "assistant",
			CreatedAt: ptr(base.Add(time.Duration(minute+i) * time.Minute)), Content: ptr(strings.Repeat("y", 1+i%13)),
			Reward: ptr(reward + float32(i%10)/100), PolicyVersion: ptr(pv),
		}
		if i%3 != 0 {
			r.NumOutputTokens = ptr(int32(i % 17))
		}
		if i%29 == 0 {
			r.Reward = ptr(float32(math.NaN()))
		}
		out[k] = r
	}
	return out
}

func appendFlush(t *testing.T, s *rollout.Store, recs []rollout.Record) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// The charts from a cached base are those of a scan of the store: after
// appends to the WAL that replace base rows (same ids, other rewards,
// lengths and versions), after the merge that folds them in (deletions in
// the base), after a compaction, and after a checkout.
func TestChartBaseMatchesScan(t *testing.T) {
	f := newChartBaseFixture(t, 64<<20)
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 3; g++ { // three fragments
		appendFlush(t, s, chartRecs("a", g*100, 100, 0.1*float32(g), fmt.Sprint(g), 0))
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.check(t, "exp", rollout.SourceFragments, BaseBuilt, "merged")
	f.check(t, "exp", rollout.SourceFragments, BaseCached, "merged, again")
	f.check(t, "exp", rollout.SourceAll, BaseCached, "merged, all")

	// Pending rows: new ids, and ids of base rows written again (other
	// reward, version, length; some now without a token count).
	appendFlush(t, s, chartRecs("b", 0, 40, 0.7, "9", 30))
	appendFlush(t, s, chartRecs("a", 50, 120, 0.9, "7", 500))
	ch := f.check(t, "exp", rollout.SourceAll, BaseCached, "pending rows replace base rows")
	if ch.RowsScanned != 300+160 {
		t.Fatalf("rows scanned %d, want the cached 300 and the pending 160", ch.RowsScanned)
	}
	f.check(t, "exp", rollout.SourceFragments, BaseCached, "pending rows, fragments")
	// The same id written twice in the WAL: the newest write wins.
	appendFlush(t, s, chartRecs("a", 60, 5, 0.05, "8", 900))
	f.check(t, "exp", rollout.SourceAll, BaseCached, "an id written twice")

	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "after the merge")
	f.check(t, "exp", rollout.SourceFragments, BaseCached, "after the merge, fragments")

	if _, err := s.Compact(ctx, rollout.CompactOptions{TargetRows: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "after the compaction")
	appendFlush(t, s, chartRecs("a", 0, 10, 0.3, "3", 40))
	f.check(t, "exp", rollout.SourceAll, BaseCached, "pending after the compaction")

	if n, bytes := f.cached.chartBaseStats(); n != 1 || bytes <= 0 {
		t.Fatalf("cache holds %d bases of %d bytes, want the one store's", n, bytes)
	}
}

// A store deleted and created again at the same version is not read from
// the old store's chart base.
func TestChartBaseStoreCreatedAgain(t *testing.T) {
	f := newChartBaseFixture(t, 64<<20)
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, chartRecs("a", 0, 50, 0.1, "1", 0))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "first store")
	if err := f.cat.Delete(ctx, "exp"); err != nil {
		t.Fatal(err)
	}
	s, err = f.cat.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	appendFlush(t, s, chartRecs("c", 0, 50, 0.6, "2", 0))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "second store")
}

// A cap smaller than a store's chart base keeps nothing, and the charts are
// the same: a base table whose rows alone pass the cap is scanned without
// building one; one that passes it only once built is used by that request
// and dropped.
func TestChartBaseOverCapFallsBack(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		capBytes int64
		want     BaseSource
	}{
		{1000, BaseScanned},    // 200 rows: over the cap by the estimate from the row count
		{100 << 10, BaseBuilt}, // under it by that estimate, over it by DuckDB's account (whole blocks)
	} {
		f := newChartBaseFixture(t, tc.capBytes)
		s, err := f.cat.Create(ctx, "exp")
		if err != nil {
			t.Fatal(err)
		}
		appendFlush(t, s, chartRecs("a", 0, 200, 0.2, "1", 0))
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		appendFlush(t, s, chartRecs("a", 20, 30, 0.8, "2", 100))
		for i := 0; i < 2; i++ {
			f.check(t, "exp", rollout.SourceAll, tc.want, fmt.Sprintf("over a cap of %d", tc.capBytes))
			if n, bytes := f.cached.chartBaseStats(); n != 0 || bytes != 0 {
				t.Fatalf("cache holds %d bases of %d bytes over a cap of %d", n, bytes, tc.capBytes)
			}
		}
		f.check(t, "exp", rollout.SourceFragments, tc.want, "over the cap, fragments")
	}
}

// With the cache off, and for the WAL source, the charts scan the store.
func TestChartBaseOffAndWAL(t *testing.T) {
	f := newChartBaseFixture(t, 64<<20)
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, chartRecs("a", 0, 20, 0.2, "1", 0))
	f.check(t, "exp", rollout.SourceWAL, BaseScanned, "wal")
	f.cached.CacheChartBases(0)
	f.check(t, "exp", rollout.SourceAll, BaseScanned, "off")
}

// mergingStore merges its store's WAL into the base when a WAL scan starts:
// a merge that lands between a chart base's reads.
type mergingStore struct {
	*rollout.Store
	merged bool
}

func (m *mergingStore) Scan(ctx context.Context, o rollout.ScanOptions, fn func(arrow.RecordBatch) error) error {
	if o.Source == rollout.SourceWAL && !m.merged {
		m.merged = true
		if _, err := m.Store.Merge(ctx); err != nil {
			return err
		}
	}
	return m.Store.Scan(ctx, o, fn)
}

// A base table that changes while the charts read a chart base and the WAL
// (here a merge: the pending rows it folds in would count twice) makes the
// charts scan the store instead.
func TestChartBaseMovedDuringCharts(t *testing.T) {
	f := newChartBaseFixture(t, 64<<20)
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, chartRecs("a", 0, 100, 0.2, "1", 0))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "merged")
	appendFlush(t, s, chartRecs("a", 50, 100, 0.8, "2", 100))
	ms := &mergingStore{Store: s}
	f.cached.open = func(ctx context.Context, name string) (Table, error) { return ms, nil }
	got, err := f.cached.Charts(ctx, "exp", rollout.SourceAll)
	if err != nil {
		t.Fatal(err)
	}
	if !ms.merged || got.Base != BaseScanned {
		t.Fatalf("merged %v, base %q: want a scan after the base moved", ms.merged, got.Base)
	}
	want, err := f.eng.Charts(ctx, "exp", rollout.SourceAll)
	if err != nil {
		t.Fatal(err)
	}
	if d := chartsDiff(got, want); d != "" {
		t.Fatalf("charts after the base moved:%s", d)
	}
}

// Charts of several stores at once, with a cap that holds one chart base:
// chart bases are built, replaced and evicted while others use them, and
// every answer is that of a scan.
func TestChartBaseConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newChartBaseFixture(t, 1<<40)
	var want []*Charts
	names := []string{"s0", "s1", "s2"}
	for i, name := range names {
		s, err := f.cat.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		appendFlush(t, s, chartRecs("a", 0, 60+40*i, 0.1*float32(i), fmt.Sprint(i), 0))
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		appendFlush(t, s, chartRecs("a", 10, 20, 0.9, "x", 100))
		ch, err := f.eng.Charts(ctx, name, rollout.SourceAll)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ch)
	}
	// Room for the largest chart base alone: built once each to learn
	// their sizes, then dropped.
	var largest int64
	for _, name := range names {
		if _, err := f.cached.Charts(ctx, name, rollout.SourceAll); err != nil {
			t.Fatal(err)
		}
		f.cached.bases.mu.Lock()
		largest = max(largest, f.cached.bases.m[name].bytes)
		f.cached.bases.mu.Unlock()
	}
	f.cached.Close()
	f.cached.CacheChartBases(largest)
	errs := make(chan error, 64)
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for k := 0; k < 6; k++ {
				i := (g + k) % len(names)
				got, err := f.cached.Charts(ctx, names[i], rollout.SourceAll)
				if err != nil {
					errs <- err
					return
				}
				if d := chartsDiff(got, want[i]); d != "" {
					errs <- fmt.Errorf("%s:%s", names[i], d)
					return
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n, bytes := f.cached.chartBaseStats(); n < 1 || bytes > largest {
		t.Fatalf("cache holds %d bases of %d bytes (cap %d)", n, bytes, f.cached.bases.capBytes)
	}
}

// However small, at most maxChartBases chart bases are kept.
func TestChartBaseCountBound(t *testing.T) {
	f := newChartBaseFixture(t, 1<<40)
	ctx := context.Background()
	for i := 0; i < maxChartBases+2; i++ {
		name := fmt.Sprintf("s%d", i)
		s, err := f.cat.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		appendFlush(t, s, chartRecs("a", 0, 2, 0.1, "1", 0))
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := f.cached.Charts(ctx, name, rollout.SourceFragments); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := f.cached.chartBaseStats(); n != maxChartBases {
		t.Fatalf("%d chart bases kept, want %d", n, maxChartBases)
	}
	// The most recent is among them.
	f.check(t, fmt.Sprintf("s%d", maxChartBases+1), rollout.SourceFragments, BaseCached, "latest")
}

// failingStore fails its first WAL scan.
type failingStore struct {
	*rollout.Store
	failed bool
}

func (m *failingStore) Scan(ctx context.Context, o rollout.ScanOptions, fn func(arrow.RecordBatch) error) error {
	if o.Source == rollout.SourceWAL && !m.failed {
		m.failed = true
		return errors.New("injected scan failure")
	}
	return m.Store.Scan(ctx, o, fn)
}

// A use of a chart base that fails drops it (DuckDB may have invalidated
// the database): those charts scan the store, the next build a new one.
func TestChartBaseDroppedAfterFailure(t *testing.T) {
	f := newChartBaseFixture(t, 64<<20)
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, chartRecs("a", 0, 50, 0.2, "1", 0))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "merged")
	appendFlush(t, s, chartRecs("a", 10, 20, 0.8, "2", 100))
	fs := &failingStore{Store: s}
	open := f.cached.open
	f.cached.open = func(ctx context.Context, name string) (Table, error) { return fs, nil }
	got, err := f.cached.Charts(ctx, "exp", rollout.SourceAll)
	if err != nil {
		t.Fatal(err)
	}
	if !fs.failed || got.Base != BaseScanned {
		t.Fatalf("failed %v, base %q: want a scan after the failure", fs.failed, got.Base)
	}
	if n, _ := f.cached.chartBaseStats(); n != 0 {
		t.Fatalf("%d chart bases kept after a failed use", n)
	}
	f.cached.open = open
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "after the failure")
}

// followFixture is a store of four merged fragments of 200 rows whose
// chart base is built, for the tests of updates across base table changes.
func followFixture(t *testing.T) (*chartBaseFixture, *rollout.Store) {
	t.Helper()
	f := newChartBaseFixture(t, 64<<20)
	s, err := f.cat.Create(context.Background(), "exp")
	if err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 4; g++ {
		mergeRecs(t, s, chartRecs("a", g*200, 200, 0.1*float32(g), fmt.Sprint(g), 0))
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "four fragments")
	return f, s
}

func mergeRecs(t *testing.T, s *rollout.Store, recs []rollout.Record) {
	t.Helper()
	appendFlush(t, s, recs)
	if _, err := s.Merge(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// fragments are the live rows of each fragment of the store's latest base
// table.
func fragments(t *testing.T, s *rollout.Store) map[uint64]int64 {
	t.Helper()
	d, err := table.Open(context.Background(), s.Root())
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int64{}
	for _, fr := range d.Fragments() {
		out[fr.GetId()] = int64(fr.GetPhysicalRows())
		if df := fr.GetDeletionFile(); df != nil {
			out[fr.GetId()] -= int64(df.GetNumDeletedRows())
		}
	}
	return out
}

// untokenedResponses counts the live assistant rows without
// num_output_tokens in the fragments frags names.
func untokenedResponses(t *testing.T, s *rollout.Store, frags map[uint64]int64) int64 {
	t.Helper()
	d, err := table.Open(context.Background(), s.Root())
	if err != nil {
		t.Fatal(err)
	}
	ids := roaring.New()
	for id := range frags {
		ids.Add(uint32(id))
	}
	var n int64
	err = d.Scan(context.Background(), table.ScanOptions{Columns: []string{"num_output_tokens", rollout.ColRole}, Fragments: ids, PlainDictionaries: true},
		func(b arrow.RecordBatch) error {
			tok, role := b.Column(0), b.Column(1).(*array.String)
			for i := 0; i < int(b.NumRows()); i++ {
				if tok.IsNull(i) && role.Value(i) == "assistant" {
					n++
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkUpdated checks charts of the store read from an updated chart base
// (as check does) and that the update read the fragments new since before
// and nothing else: each twice (every row's chart columns, then
// num_output_tokens of every row to find those whose content counts).
func (f *chartBaseFixture) checkUpdated(t *testing.T, s *rollout.Store, before map[uint64]int64, step string) {
	t.Helper()
	ctx := context.Background()
	ch, err := f.cached.Charts(ctx, "exp", rollout.SourceAll)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if ch.Base != BaseUpdated {
		t.Fatalf("%s: base %q, want %q", step, ch.Base, BaseUpdated)
	}
	want := map[uint64]int64{}
	for id, rows := range fragments(t, s) {
		if _, ok := before[id]; !ok {
			want[id] = 2 * rows
		}
	}
	f.cached.bases.mu.Lock()
	b := f.cached.bases.m["exp"]
	f.cached.bases.mu.Unlock()
	b.mu.Lock()
	got := b.lastRead
	b.mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("%s: the update read fragments %v, want %v (the new ones)", step, got, want)
	}
	for id, n := range want {
		if got[id] != n {
			t.Fatalf("%s: the update read fragments %v, want %v (the new ones)", step, got, want)
		}
	}
	// The rows the charts took: the chart base's and those the update's
	// scans delivered (every new row, and the responses among them
	// without num_output_tokens, whose content is read).
	var live, read int64
	for _, n := range fragments(t, s) {
		live += n
	}
	for _, n := range want {
		read += n / 2
	}
	read += untokenedResponses(t, s, want)
	if ch.RowsScanned != live+read {
		t.Fatalf("%s: rows scanned %d, want %d in the base and %d delivered by the update", step, ch.RowsScanned, live, read)
	}
	scan, err := f.eng.Charts(ctx, "exp", rollout.SourceAll)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if d := chartsDiff(ch, scan); d != "" {
		t.Fatalf("%s: charts from the updated base differ from a scan:%s", step, d)
	}
	f.check(t, "exp", rollout.SourceAll, BaseCached, step)
	f.check(t, "exp", rollout.SourceFragments, BaseCached, step+", fragments")
}

// A merge of new rows, and one whose rows replace base rows (the merge
// deletes those in their fragments), update the chart base: it reads the
// merged fragment alone, and its charts are those of a scan.
func TestChartBaseFollowsMerge(t *testing.T) {
	f, s := followFixture(t)
	before := fragments(t, s)
	mergeRecs(t, s, chartRecs("n", 0, 60, 0.5, "5", 1000))
	f.checkUpdated(t, s, before, "a merge of new rows")

	before = fragments(t, s)
	mergeRecs(t, s, chartRecs("a", 150, 100, 0.9, "6", 2000)) // rows of fragments 0 and 1
	f.checkUpdated(t, s, before, "a merge replacing base rows")

	// Pending rows over the updated chart base.
	appendFlush(t, s, chartRecs("a", 140, 30, 0.2, "7", 3000))
	f.check(t, "exp", rollout.SourceAll, BaseCached, "pending rows over the updated base")

	// Every merge since the build counted as rows to read or delete: a
	// large merge rebuilds.
	mergeRecs(t, s, chartRecs("b", 0, 500, 0.3, "8", 4000))
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "a merge of more rows than half the base")
}

// Rows deleted through the table (as LanceDB's delete does: deletion
// files, and a fragment left with no live row removed) are deleted from
// the chart base; a checkout that brings deleted rows back rebuilds it.
func TestChartBaseFollowsDeletion(t *testing.T) {
	f, s := followFixture(t)
	ctx := context.Background()
	mergeRecs(t, s, chartRecs("s", 0, 20, 0.4, "4", 500)) // a small fragment
	f.check(t, "exp", rollout.SourceAll, BaseUpdated, "a small fragment")
	d, err := table.Open(ctx, s.Root())
	if err != nil {
		t.Fatal(err)
	}
	beforeDelete := d.Version()
	frags := d.Fragments()
	var rows []table.RowAddr
	for off := uint32(0); off < 200; off += 7 {
		rows = append(rows, table.RowAddr{Fragment: frags[1].GetId(), Offset: off}, table.RowAddr{Fragment: frags[2].GetId(), Offset: off + 3})
	}
	before := fragments(t, s)
	if _, err := table.DeleteRows(ctx, s.Root(), rows, "reward > 0.35"); err != nil {
		t.Fatal(err)
	}
	f.checkUpdated(t, s, before, "rows deleted in two fragments")

	// Deleting again in a fragment with deletions, and every row of the
	// small fragment (which goes).
	rows = rows[:0]
	for off := uint32(1); off < 200; off += 5 {
		rows = append(rows, table.RowAddr{Fragment: frags[1].GetId(), Offset: off})
	}
	for off := uint32(0); off < 20; off++ {
		rows = append(rows, table.RowAddr{Fragment: frags[4].GetId(), Offset: off})
	}
	before = fragments(t, s)
	if _, err := table.DeleteRows(ctx, s.Root(), rows, "policy_version = '4'"); err != nil {
		t.Fatal(err)
	}
	if _, ok := fragments(t, s)[frags[4].GetId()]; ok {
		t.Fatal("the fragment whose rows were all deleted is still there")
	}
	f.checkUpdated(t, s, before, "more rows deleted, and a whole fragment")

	// Back to a version before the deletions: rows come back, which an
	// update cannot follow.
	if _, err := s.Checkout(ctx, beforeDelete); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceFragments, BaseBuilt, "a checkout before the deletions")
}

// A compaction of a few small fragments updates the chart base (the rows
// of the fragments it rewrote are deleted, its new fragment read); one
// that rewrites most of the table rebuilds it.
func TestChartBaseFollowsCompaction(t *testing.T) {
	f, s := followFixture(t)
	ctx := context.Background()
	for g := 0; g < 3; g++ {
		mergeRecs(t, s, chartRecs("s", g*20, 20, 0.4, "4", 500))
		f.check(t, "exp", rollout.SourceAll, BaseUpdated, "a small fragment")
	}
	mergeRecs(t, s, chartRecs("a", 100, 10, 0.8, "9", 900)) // deletions in fragment 0
	f.check(t, "exp", rollout.SourceAll, BaseUpdated, "deletions in fragment 0")
	before := fragments(t, s)
	res, err := s.Compact(ctx, rollout.CompactOptions{TargetRows: 100, KeepDeletions: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 4 || res.Added != 1 {
		t.Fatalf("compaction removed %d fragments and added %d, want the four small ones into one", res.Removed, res.Added)
	}
	f.checkUpdated(t, s, before, "a compaction of the small fragments")

	if _, err := s.Compact(ctx, rollout.CompactOptions{TargetRows: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	f.check(t, "exp", rollout.SourceAll, BaseBuilt, "a compaction of every fragment")
}

// A base table holding a chart column in another type than the store's
// scan gives (here created_at without a time zone, as the reference
// system writes it) is read into a chart base through the store's scan,
// which converts; it has no row addresses, so after a merge it is built
// again, and its charts are those of a scan.
func TestChartBaseConvertedTableRebuilds(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	fields := rollout.Schema.Fields()
	for i := range fields {
		if fields[i].Name == rollout.ColCreatedAt {
			fields[i].Type = &arrow.TimestampType{Unit: arrow.Microsecond}
		}
	}
	ls, err := schema.FromArrow(arrow.NewSchema(fields, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Create(ctx, objstore.Sub(root, "ref.rollout.lance"), ls, table.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cat := rollout.NewCatalog(root, rollout.ShardID("w1"), rollout.Options{})
	t.Cleanup(func() { _ = cat.Close(context.Background()) })
	f := &chartBaseFixture{fixture: &fixture{cat: cat, eng: New(FromCatalog(cat), Limits{})}, cached: New(FromCatalog(cat), Limits{})}
	f.cached.CacheChartBases(64 << 20)
	t.Cleanup(f.cached.Close)
	s, err := cat.Open(ctx, "ref")
	if err != nil {
		t.Fatal(err)
	}
	mergeRecs(t, s, chartRecs("a", 0, 200, 0.2, "1", 0))
	mergeRecs(t, s, chartRecs("a", 200, 200, 0.4, "2", 0))
	d, err := table.Open(ctx, s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if _, direct := directSig(d); direct {
		t.Fatal("the table's created_at reads as the store's type: the test needs a converted one")
	}
	f.check(t, "ref", rollout.SourceAll, BaseBuilt, "a converted table")
	appendFlush(t, s, chartRecs("a", 100, 20, 0.9, "3", 500))
	f.check(t, "ref", rollout.SourceAll, BaseCached, "pending rows")
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	f.check(t, "ref", rollout.SourceAll, BaseBuilt, "after a merge")
}
