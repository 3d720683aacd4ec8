package sqlquery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

func ptr[T any](v T) *T { return &v }

type fixture struct {
	cat *rollout.Catalog
	eng *Engine
}

func newFixture(t *testing.T, limits Limits) *fixture {
	t.Helper()
	cat := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("w1"), rollout.Options{})
	t.Cleanup(func() { _ = cat.Close(context.Background()) })
	return &fixture{cat: cat, eng: New(FromCatalog(cat), limits)}
}

// store creates name with n records: reward i/n, policy_version "v<i%3>",
// and merges them into fragments unless pendingOnly.
func (f *fixture) store(t *testing.T, name string, n int, merge bool) *rollout.Store {
	t.Helper()
	ctx := context.Background()
	s, err := f.cat.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]rollout.Record, n)
	for i := range recs {
		recs[i] = rollout.Record{
			ID: fmt.Sprintf("%s-%04d", name, i), RolloutID: fmt.Sprintf("r%d", i/4), ProblemID: fmt.Sprintf("p%d", i%5),
			SequenceOrder: int32(i % 4), Role: "assistant", CreatedAt: ptr(base.Add(time.Duration(i) * time.Minute)),
			Content: ptr(strings.Repeat("x", i%7)), Reward: ptr(float32(i) / float32(n)),
			PolicyVersion: ptr(fmt.Sprintf("v%d", i%3)), NumOutputTokens: ptr(int32(i % 11)),
		}
	}
	if n > 0 {
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if merge {
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (f *fixture) query(t *testing.T, store, sql string, src rollout.Source) *Result {
	t.Helper()
	res, err := f.eng.Query(context.Background(), Request{Store: store, SQL: sql, Source: src})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res
}

func TestAggregateByPolicyVersion(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp", 300, true)
	res := f.query(t, "exp", "SELECT policy_version, avg(reward) AS mean, count(*) AS n FROM records GROUP BY 1 ORDER BY 1", "")
	if len(res.Rows) != 3 {
		t.Fatalf("rows = %v", res.Rows)
	}
	for k, row := range res.Rows {
		// Expected from the fixture's formula, computed independently.
		var sum float64
		var cnt int64
		for i := 0; i < 300; i++ {
			if i%3 == k {
				sum += float64(float32(i) / float32(300))
				cnt++
			}
		}
		if row[0] != fmt.Sprintf("v%d", k) || row[2] != cnt || math.Abs(row[1].(float64)-sum/float64(cnt)) > 1e-6 {
			t.Fatalf("row %d = %v, want v%d %v %d", k, row, k, sum/float64(cnt), cnt)
		}
	}
	if res.RowsScanned != 300 {
		t.Fatalf("rows scanned = %d", res.RowsScanned)
	}
	if res.Columns[0].Type != "VARCHAR" || res.Columns[2].Type != "BIGINT" {
		t.Fatalf("columns = %+v", res.Columns)
	}
}

// The scan reads only the columns a query names: content and the token
// lists are never read for an aggregate over reward.
func TestProjectionPushdown(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp", 50, true)
	res := f.query(t, "exp", "SELECT policy_version, avg(reward) FROM records WHERE reward > 0.5 GROUP BY 1", "")
	if len(res.Scans) != 1 {
		t.Fatalf("scans = %+v", res.Scans)
	}
	got := slices.Sorted(slices.Values(res.Scans[0].Columns))
	if !slices.Equal(got, []string{"policy_version", "reward"}) {
		t.Fatalf("columns read = %v, want policy_version, reward", got)
	}
	res = f.query(t, "exp", "SELECT count(*) FROM records", "")
	// DuckDB asks for the first column when a query needs none.
	if len(res.Scans[0].Columns) > 1 || res.Rows[0][0] != int64(50) {
		t.Fatalf("count(*) read %v and returned %v", res.Scans[0].Columns, res.Rows)
	}
	// The plan shows it too.
	res = f.query(t, "exp", "EXPLAIN SELECT reward FROM records WHERE reward > 0.5", "")
	var plan strings.Builder
	for _, r := range res.Rows {
		fmt.Fprintln(&plan, r...)
	}
	if !strings.Contains(plan.String(), strings.ToUpper(scanFunc)) || !strings.Contains(plan.String(), "Projections: reward") || strings.Contains(plan.String(), "content") {
		t.Fatalf("plan does not show the projected scan:\n%s", plan.String())
	}
}

func TestJoinTwoStores(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp-a", 40, true)
	f.store(t, "exp.b", 40, true)
	res := f.query(t, "exp-a", `SELECT count(*), sum(a.reward + b.reward) FROM records a JOIN "exp.b" b ON a.problem_id = b.problem_id AND a.sequence_order = b.sequence_order`, "")
	// 40 rows each: (problem_id, sequence_order) = (i%5, i%4) repeats every 20
	// rows, so each row of a matches 2 rows of b.
	if res.Rows[0][0] != int64(80) {
		t.Fatalf("join = %v", res.Rows)
	}
	if len(res.Scans) != 2 {
		t.Fatalf("scans = %+v", res.Scans)
	}
	_, err := f.eng.Query(context.Background(), Request{Store: "exp-a", SQL: `SELECT * FROM "no-such"`})
	if !errors.Is(err, rollout.ErrNotFound) {
		t.Fatalf("unknown store: %v", err)
	}
}

// Results match the records listing, for every source.
func TestMatchesRecordsAPI(t *testing.T) {
	f := newFixture(t, Limits{})
	s := f.store(t, "exp", 30, true)
	ctx := context.Background()
	// Pending writes: 5 new ids and 3 rewrites of merged ids.
	var more []rollout.Record
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("new-%d", i)
		if i >= 5 {
			id = fmt.Sprintf("exp-%04d", i)
		}
		more = append(more, rollout.Record{ID: id, RolloutID: "r", ProblemID: "p", Role: "user", Reward: ptr(float32(10 + i)), Content: ptr("pending")})
	}
	if _, err := s.Append(ctx, more); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, src := range []rollout.Source{rollout.SourceFragments, rollout.SourceWAL, rollout.SourceAll} {
		list, err := s.List(ctx, rollout.ListOptions{Source: src, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range list.Records {
			rw := "null"
			if r.Reward != nil {
				rw = fmt.Sprint(*r.Reward)
			}
			c := "null"
			if r.Content != nil {
				c = *r.Content
			}
			want = append(want, r.ID+"|"+rw+"|"+c)
		}
		res := f.query(t, "exp", "SELECT id, reward, content FROM records", src)
		var got []string
		for _, row := range res.Rows {
			rw := "null"
			if row[1] != nil {
				rw = fmt.Sprint(row[1])
			}
			c := "null"
			if row[2] != nil {
				c = row[2].(string)
			}
			got = append(got, row[0].(string)+"|"+rw+"|"+c)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("source %s:\n got %v\nwant %v", src, got, want)
		}
	}
}

func TestEscapesRefused(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp", 5, true)
	for _, sql := range []string{
		"SELECT * FROM read_csv('/etc/passwd')",
		"SELECT * FROM read_text('/etc/passwd')",
		"SELECT * FROM read_parquet('/tmp/x.parquet')",
		"SELECT * FROM glob('/*')",
		"SELECT * FROM '/etc/passwd'",
		"COPY (SELECT 1) TO '/tmp/out.csv'",
		"COPY records TO '/tmp/out.csv'",
		"ATTACH '/tmp/x.db' AS x",
		"ATTACH ':memory:' AS x",
		"INSTALL httpfs",
		"LOAD httpfs",
		"SET enable_external_access = true",
		"SET memory_limit = '100GB'",
		"RESET lock_configuration",
		"PRAGMA database_list",
		"CREATE TABLE t AS SELECT 1",
		"INSERT INTO records SELECT * FROM records",
		"DELETE FROM records",
		"UPDATE records SET reward = 1",
		"DROP TABLE records",
		"SELECT 1; CREATE TABLE t (x INT)",
		"EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/out.csv'",
		"EXPLAIN COPY (SELECT 1) TO '/tmp/out.csv'",
		"CALL pragma_version()",
		"EXPORT DATABASE '/tmp/x'",
		"SELECT * FROM read_csv('https://example.com/x.csv')",
	} {
		_, err := f.eng.Query(context.Background(), Request{Store: "exp", SQL: sql})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", sql, err)
			continue
		}
		t.Logf("%s -> %v", sql, err)
	}
}

func TestLimits(t *testing.T) {
	f := newFixture(t, Limits{MaxRowsScanned: 100, MaxRowsReturned: 10, MaxTime: 2 * time.Second, MaxMemoryMB: 64})
	f.store(t, "exp", 150, true)
	f.store(t, "small", 8, true)
	check := func(sql, store, limit string) {
		t.Helper()
		_, err := f.eng.Query(context.Background(), Request{Store: store, SQL: sql})
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != limit {
			t.Fatalf("%s: got %v, want %s", sql, err, limit)
		}
		if !strings.Contains(err.Error(), limit+"=") {
			t.Fatalf("message %q does not name the limit", err)
		}
	}
	check("SELECT count(*) FROM records", "exp", "max_rows_scanned")
	check("SELECT * FROM range(11)", "small", "max_rows_returned")
	check("SELECT count(*) FROM range(1000000000000) a", "small", "max_query_time")
	check("SELECT list(repeat('x', 1000) || i::VARCHAR) FROM range(10000000) t(i)", "small", "max_memory")

	// Under the limits, and with max_rows a truncation, not an error.
	res, err := f.eng.Query(context.Background(), Request{Store: "small", SQL: "SELECT * FROM range(11)", MaxRows: 5})
	if err != nil || len(res.Rows) != 5 || !res.Truncated {
		t.Fatalf("max_rows: %v %v", res, err)
	}
	res = f.query(t, "small", "SELECT * FROM range(10)", "")
	if len(res.Rows) != 10 || res.Truncated {
		t.Fatalf("at the limit: %d rows, truncated %v", len(res.Rows), res.Truncated)
	}
}

func TestEmptyStoreAndSources(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "empty", 0, false)
	for _, src := range []rollout.Source{"", rollout.SourceWAL, rollout.SourceAll} {
		res := f.query(t, "empty", "SELECT count(*), avg(reward) FROM records", src)
		if res.Rows[0][0] != int64(0) || res.Rows[0][1] != nil {
			t.Fatalf("%s: %v", src, res.Rows)
		}
	}
	if _, err := f.eng.Query(context.Background(), Request{Store: "empty", SQL: "SELECT 1", Source: "tail"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad source: %v", err)
	}
	if _, err := f.eng.Query(context.Background(), Request{Store: "empty", SQL: "SELEC 1"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad sql: %v", err)
	}
}

func TestArrowAndJSONValues(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp", 10, true)
	res := f.query(t, "exp", "SELECT id, reward, created_at, 'nan'::DOUBLE AS x, [1,2] AS l, sum(num_output_tokens) OVER () AS s FROM records ORDER BY id", "")
	j := res.JSONRows()
	if j[0][3] != nil || j[0][2] != "2026-01-01T00:00:00Z" {
		t.Fatalf("json row = %v", j[0])
	}
	var buf bytes.Buffer
	if err := res.WriteArrow(&buf); err != nil {
		t.Fatal(err)
	}
	rd, err := ipc.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var n int64
	var ids []string
	for rd.Next() {
		rec := rd.RecordBatch()
		n += rec.NumRows()
		col := rec.Column(0).(*array.String)
		for i := 0; i < col.Len(); i++ {
			ids = append(ids, col.Value(i))
		}
	}
	if n != 10 || !sort.StringsAreSorted(ids) || ids[0] != "exp-0000" {
		t.Fatalf("arrow: %d rows, ids %v", n, ids)
	}
}

func TestCharts(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "empty", 0, false)
	ch, err := f.eng.Charts(context.Background(), "empty", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.RewardByPolicyVersion)+len(ch.RewardOverTime)+len(ch.LengthHist)+len(ch.LengthOverTime)+len(ch.IngestRate) != 0 || ch.RewardOverTime == nil {
		t.Fatalf("empty store charts = %+v", ch)
	}

	one := f.store(t, "one", 1, true)
	_ = one
	ch, err = f.eng.Charts(context.Background(), "one", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.RewardByPolicyVersion) != 1 || ch.RewardByPolicyVersion[0].Count != 1 || ch.RewardByPolicyVersion[0].P10 != 0 ||
		len(ch.LengthHist) != 1 || ch.LengthHist[0] != (Bin{Lo: 0, Hi: 1, Count: 1}) ||
		len(ch.RewardOverTime) != 1 || ch.RewardOverTime[0].T != "2026-01-01T00:00:00Z" || len(ch.IngestRate) != 1 {
		t.Fatalf("single point charts = %+v", ch)
	}

	f.store(t, "exp", 300, true)
	ch, err = f.eng.Charts(context.Background(), "exp", "")
	if err != nil {
		t.Fatal(err)
	}
	// 300 minutes of data: 5-minute buckets of 5 rows.
	if ch.BucketSeconds != 300 || len(ch.IngestRate) != 60 || ch.IngestRate[0].Rows != 5 {
		t.Fatalf("ingest = %d buckets of %d s: %+v", len(ch.IngestRate), ch.BucketSeconds, ch.IngestRate[:2])
	}
	var n int64
	for _, b := range ch.LengthHist {
		n += b.Count
		if b.Lo < 0 || b.Hi > 11 {
			t.Fatalf("bin %+v outside num_output_tokens 0..10", b)
		}
	}
	if n != 300 || len(ch.RewardByPolicyVersion) != 3 || ch.RewardByPolicyVersion[0].PolicyVersion != "v0" {
		t.Fatalf("hist total %d, by version %+v", n, ch.RewardByPolicyVersion)
	}
	p := ch.RewardByPolicyVersion[1]
	if !(p.P10 < p.Mean && p.Mean < p.P90) || p.Count != 100 {
		t.Fatalf("band %+v", p)
	}
}

// Rows without num_output_tokens count their content length.
func TestChartsLengthFallsBackToContent(t *testing.T) {
	f := newFixture(t, Limits{})
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, []rollout.Record{
		{ID: "a", RolloutID: "r", ProblemID: "p", Role: "assistant", Content: ptr("hello"), NumOutputTokens: ptr(int32(2))},
		{ID: "b", RolloutID: "r", ProblemID: "p", Role: "assistant", Content: ptr("hello")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ch, err := f.eng.Charts(ctx, "c", rollout.SourceAll)
	if err != nil {
		t.Fatal(err)
	}
	var lens []int64
	for _, b := range ch.LengthHist {
		for i := int64(0); i < b.Count; i++ {
			lens = append(lens, b.Lo)
		}
	}
	if !slices.Equal(lens, []int64{2, 5}) {
		t.Fatalf("lengths %v (hist %+v), want 2 and 5", lens, ch.LengthHist)
	}
}
