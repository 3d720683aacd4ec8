//go:build cgo

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

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/api"
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
	// The estimate comes from the manifests (50 rows).
	if !strings.Contains(plan.String(), strings.ToUpper(scanFunc)) || !strings.Contains(plan.String(), "Projections: reward") ||
		strings.Contains(plan.String(), "content") || !strings.Contains(plan.String(), "~50 row") {
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
		res := f.query(t, "exp", "SELECT id, reward, content FROM records ORDER BY id", src) // lists are in id order
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
		"SELECT * FROM read_blob('/etc/passwd')",
		"SELECT * FROM duckdb_secrets()",
		"SELECT getenv('HOME')",
		"SELECT * FROM query('SET memory_limit=''10GB''')",
		"SELECT * FROM query('ATTACH '':memory:'' AS x')",
		"  /* c */ -- c\n pragma version",
		"SELECT * FROM lance_context_base('exp')", // a chart base's scan of chosen fragments
	} {
		_, err := f.eng.Query(context.Background(), Request{Store: "exp", SQL: sql})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", sql, err)
			continue
		}
		t.Logf("%s -> %v", sql, err)
	}
}

// TestRegression_PrepareErrorNamesTheProblem: a statement DuckDB cannot
// prepare gets DuckDB's message, even when it mentions "context"; every
// such error was answered "send exactly one statement".
func TestRegression_PrepareErrorNamesTheProblem(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp", 5, true)
	_, err := f.eng.Query(context.Background(), Request{Store: "exp", SQL: "SELECT no_such_context FROM records"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no_such_context") || strings.Contains(err.Error(), "exactly one statement") {
		t.Fatalf("got %v, want DuckDB's binder error naming no_such_context", err)
	}
	_, err = f.eng.Query(context.Background(), Request{Store: "exp", SQL: "SELECT 1; SELECT 2"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "exactly one statement") {
		t.Fatalf("two statements: got %v", err)
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
		if !strings.Contains(err.Error(), limit+"=") || !strings.Contains(err.Error(), "LC_SQL_") {
			t.Fatalf("message %q does not name the limit and its setting", err)
		}
	}
	check("SELECT count(*) FROM records", "exp", "max_rows_scanned")
	check("SELECT * FROM range(11)", "small", "max_rows_returned")
	// Six generated sources within the scan bound, whose product runs on.
	check("SELECT count(*) FROM range(90) a, range(90) b, range(90) c, range(90) d, range(90) e, range(90) f", "small", "max_query_time")
	check("SELECT list(repeat('x', 100000) || i::VARCHAR) FROM range(90) t(i), range(90) u(j)", "small", "max_memory")

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

// slowTable delivers one-row batches, sleeping between them.
type slowTable struct{ delay time.Duration }

func (s slowTable) Scan(ctx context.Context, o rollout.ScanOptions, fn func(arrow.RecordBatch) error) error {
	fields := make([]arrow.Field, len(o.Columns))
	arrs := make([]arrow.Array, len(o.Columns))
	for i, c := range o.Columns {
		fields[i] = rollout.Schema.Field(rollout.Schema.FieldIndices(c)[0])
		arrs[i] = array.MakeArrayOfNull(memory.DefaultAllocator, fields[i].Type, 1)
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, 1)
	defer rec.Release()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.delay):
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

// A scan still running at the time limit ends the query with the time
// limit named, not as a storage fault.
func TestTimeLimitDuringScan(t *testing.T) {
	slow := func(context.Context, string) (Table, error) { return slowTable{time.Millisecond}, nil }
	eng := New(slow, Limits{MaxTime: 300 * time.Millisecond, MaxRowsScanned: 1 << 40})
	start := time.Now()
	_, err := eng.Query(context.Background(), Request{Store: "s", SQL: "SELECT count(*) FROM records"})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "max_query_time" {
		t.Fatalf("got %v, want max_query_time", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the query took %v to stop", d)
	}
	// A caller that goes away is not a limit.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	eng = New(slow, Limits{MaxRowsScanned: 1 << 40})
	if _, err := eng.Query(ctx, Request{Store: "s", SQL: "SELECT count(*) FROM records"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller's deadline: %v", err)
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
		len(ch.LengthHist) != 1 || ch.LengthHist[0] != (api.LengthBin{Lo: 0, Hi: 1, Count: 1}) ||
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

// Scan-side filters drop only rows the WHERE drops: every query gives the
// result of the same query whose filter the scan cannot see (a subquery),
// at boundaries, with NULL and NaN, flipped and qualified comparisons.
func TestFilterHintsKeepResults(t *testing.T) {
	f := newFixture(t, Limits{})
	s := f.store(t, "exp", 200, true)
	ctx := context.Background()
	extra := []rollout.Record{
		{ID: "b-half", RolloutID: "r", ProblemID: "p", Role: "user", Reward: ptr(float32(0.5)), PolicyVersion: ptr("v1"), NumOutputTokens: ptr(int32(7))},
		{ID: "b-099", RolloutID: "r", ProblemID: "p", Role: "user", Reward: ptr(float32(0.99)), PolicyVersion: ptr("v1")},
		{ID: "b-null", RolloutID: "r", ProblemID: "p", Role: "user", PolicyVersion: ptr("v1")},
		{ID: "b-nan", RolloutID: "r", ProblemID: "p", Role: "user", Reward: ptr(float32(math.NaN())), PolicyVersion: ptr("V1")},
	}
	if _, err := s.Append(ctx, extra); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{
		"reward > 0.5", "reward >= 0.5", "0.5 < reward", "REWARD <= 0.5", "reward < 0.5", "reward > 0.99", "reward >= 0.99",
		"reward > 1", "reward >= 1e-1 AND policy_version = 'v1'", "policy_version = 'v1'", "r.reward > 0.25 AND r.num_output_tokens >= 7",
		"num_output_tokens > 6.5", "num_output_tokens <= 7", "reward > -1", "reward > 0.5 OR policy_version = 'v2'",
		"reward > 0.5 AND (SELECT min(reward) FROM records) < 0.1",
		"reward > 0.5 AND (SELECT count(*) FROM records) = 204",
		"reward > 0.5 AND id IN (SELECT id FROM records WHERE reward < 0.75)",
	} {
		hinted := f.query(t, "exp", "SELECT id, reward FROM records r WHERE "+where+" ORDER BY id", rollout.SourceAll)
		plain := f.query(t, "exp", "SELECT id, reward FROM (SELECT * FROM records) r WHERE "+where+" ORDER BY id", rollout.SourceAll)
		if fmt.Sprint(hinted.Rows) != fmt.Sprint(plain.Rows) {
			t.Fatalf("%s:\nwith scan filters %v\nwithout         %v", where, hinted.Rows, plain.Rows)
		}
		if len(plain.Scans[0].Filters) != 0 {
			t.Fatalf("%s: a subquery got scan filters %v", where, plain.Scans[0].Filters)
		}
		st := hinted.Scans[0]
		if strings.Contains(where, " OR ") || strings.Contains(where, "SELECT") {
			if len(st.Filters) != 0 {
				t.Fatalf("%s: an OR, or a store read twice, got scan filters: %v", where, st.Filters)
			}
			continue
		}
		if len(st.Filters) == 0 || st.RowsKept >= st.Rows && len(hinted.Rows) < int(st.Rows) {
			t.Fatalf("%s: scan filters %v kept %d of %d rows", where, st.Filters, st.RowsKept, st.Rows)
		}
	}
}

func TestHintsOnlyFromSimpleSelects(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp", 20, true)
	f.store(t, "other", 20, true)
	for _, sql := range []string{
		"SELECT * FROM records TABLESAMPLE 50% WHERE reward > 0.5",
		"SELECT * FROM records a JOIN other b USING (id) WHERE a.reward > 0.5",
		"WITH x AS (SELECT * FROM records) SELECT * FROM x WHERE reward > 0.5",
		"SELECT id FROM records WHERE reward > 0.5 UNION ALL SELECT id FROM records",
		"SELECT id FROM records WHERE reward::VARCHAR > '0.5'",
		"SELECT id FROM records WHERE reward + 1 > 1.5",
	} {
		res := f.query(t, "exp", sql, "")
		for _, st := range res.Scans {
			if len(st.Filters) != 0 {
				t.Errorf("%s: scan filters %v", sql, st.Filters)
			}
		}
	}
}

// A fragments scan with filters reads the filter columns first and the
// other columns only for the rows they keep (lateBase): results equal the
// same query whose filter the scan cannot see, over a base table with
// deleted rows (ids rewritten and merged again) and several fragments.
func TestLateScanKeepsResults(t *testing.T) {
	f := newFixture(t, Limits{})
	s := f.store(t, "exp", 300, true)
	ctx := context.Background()
	var rewrite []rollout.Record
	for i := 0; i < 300; i += 9 {
		rewrite = append(rewrite, rollout.Record{ID: fmt.Sprintf("exp-%04d", i), RolloutID: "r", ProblemID: "p", Role: "user",
			Reward: ptr(float32(1 - float32(i)/300)), PolicyVersion: ptr("v9"), Content: ptr("rewritten")})
	}
	rewrite = append(rewrite, rollout.Record{ID: "n-null", RolloutID: "r", ProblemID: "p", Role: "user", PolicyVersion: ptr("v1")})
	if _, err := s.Append(ctx, rewrite); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{
		"reward > 0.9", "reward >= 0.5 AND policy_version = 'v9'", "num_output_tokens IS NULL", "reward IS NULL",
		"num_output_tokens > 6.5", "r.reward < 0.1", "reward > 2",
	} {
		sql := "SELECT id, reward, policy_version, content, num_output_tokens FROM records r WHERE " + where + " ORDER BY id"
		hinted := f.query(t, "exp", sql, rollout.SourceFragments)
		plain := f.query(t, "exp", strings.Replace(sql, "FROM records r", "FROM (SELECT * FROM records) r", 1), rollout.SourceFragments)
		if fmt.Sprint(hinted.Rows) != fmt.Sprint(plain.Rows) {
			t.Fatalf("%s:\nlate  %v\nplain %v", where, hinted.Rows, plain.Rows)
		}
		st := hinted.Scans[0]
		if !st.late || plain.Scans[0].late || st.Rows != plain.Scans[0].Rows {
			t.Fatalf("%s: late %v (plain %v), rows %d (plain %d)", where, st.late, plain.Scans[0].late, st.Rows, plain.Scans[0].Rows)
		}
		if where != "reward > 2" && len(hinted.Rows) == 0 {
			t.Fatalf("%s: no rows", where)
		}
	}
	// Every projected column filtered, or the WAL: the plain scan.
	for _, tc := range []struct {
		sql string
		src rollout.Source
	}{
		{"SELECT reward FROM records WHERE reward > 0.5", rollout.SourceFragments},
		{"SELECT id FROM records WHERE reward > 0.5", rollout.SourceWAL},
	} {
		if res := f.query(t, "exp", tc.sql, tc.src); res.Scans[0].late {
			t.Fatalf("%s (%s): read late", tc.sql, tc.src)
		}
	}
	// all is the base table alone while nothing is pending; a pending
	// generation (here rewriting an id) makes it the store's own scan.
	const q = "SELECT id, reward, content FROM records WHERE reward > 0.95 ORDER BY id"
	if res := f.query(t, "exp", q, rollout.SourceAll); !res.Scans[0].late {
		t.Fatal("all with nothing pending: not read late")
	}
	if _, err := s.Append(ctx, []rollout.Record{{ID: "exp-0299", RolloutID: "r", ProblemID: "p", Role: "user", Reward: ptr(float32(0.999)), Content: ptr("pending")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res := f.query(t, "exp", q, rollout.SourceAll)
	plain := f.query(t, "exp", strings.Replace(q, "FROM records", "FROM (SELECT * FROM records)", 1), rollout.SourceAll)
	if res.Scans[0].late || fmt.Sprint(res.Rows) != fmt.Sprint(plain.Rows) || !strings.Contains(fmt.Sprint(res.Rows), "pending") {
		t.Fatalf("all with a pending generation: late %v\n got %v\nwant %v", res.Scans[0].late, res.Rows, plain.Rows)
	}
}

// The content fallback of the charts also holds on a fragments scan, where
// the content of rows with a token count is not read.
func TestChartsLengthFromContentOnFragments(t *testing.T) {
	f := newFixture(t, Limits{})
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, []rollout.Record{
		{ID: "a", RolloutID: "r", ProblemID: "p", Role: "assistant", Content: ptr("hello"), NumOutputTokens: ptr(int32(2))},
		{ID: "b", RolloutID: "r", ProblemID: "p", Role: "assistant", Content: ptr("hello world")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	ch, err := f.eng.Charts(ctx, "c", rollout.SourceFragments)
	if err != nil {
		t.Fatal(err)
	}
	var lens []int64
	for _, b := range ch.LengthHist {
		for i := int64(0); i < b.Count; i++ {
			lens = append(lens, b.Lo)
		}
	}
	if !slices.Equal(lens, []int64{2, 11}) {
		t.Fatalf("lengths %v (hist %+v), want 2 and 11", lens, ch.LengthHist)
	}
}

// A late scan under ORDER BY column LIMIT n takes only rows that can be in
// the first n; every query gives the result of the same query whose shape
// the scan cannot see, with ties, NULL and NaN sort values, OFFSET,
// ascending and descending orders, and aliases that must disable it.
func TestTopNBoundKeepsResults(t *testing.T) {
	f := newFixture(t, Limits{})
	s := f.store(t, "exp", 400, true)
	ctx := context.Background()
	var extra []rollout.Record
	for i := 0; i < 30; i++ {
		r := rollout.Record{ID: fmt.Sprintf("t-%02d", i), RolloutID: "r", ProblemID: "p", Role: "user", PolicyVersion: ptr("v7"),
			NumOutputTokens: ptr(int32(i % 3))}
		switch i % 3 {
		case 0:
			r.Reward = ptr(float32(0.995)) // ties
		case 1:
			r.Reward = ptr(float32(math.NaN()))
		}
		extra = append(extra, r)
	}
	if _, err := s.Append(ctx, extra); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql     string
		bounded bool
	}{
		{"SELECT id, policy_version, reward FROM records WHERE reward > 0.5 ORDER BY reward DESC, id LIMIT 5", true},
		{"SELECT id, policy_version, reward FROM records WHERE reward > 0.5 ORDER BY reward DESC, id LIMIT 12", true},
		{"SELECT id, reward FROM records ORDER BY reward DESC, id LIMIT 3", true},
		{"SELECT id, reward FROM records ORDER BY reward, id LIMIT 7 OFFSET 4", true},
		{"SELECT id, reward FROM records ORDER BY reward ASC, id LIMIT 450", false}, // more than the rows: nothing to drop
		{"SELECT id, reward FROM records r ORDER BY r.reward DESC, id LIMIT 1", true},
		{"SELECT id, num_output_tokens FROM records WHERE policy_version = 'v7' ORDER BY num_output_tokens DESC, id LIMIT 4", true},
		{"SELECT id, reward FROM records WHERE reward IS NULL ORDER BY num_output_tokens, id LIMIT 2", false}, // all tie
		{"SELECT id, reward FROM records WHERE policy_version = 'v7' ORDER BY num_output_tokens, id LIMIT 2", true},
		{"SELECT id, reward FROM records WHERE reward < 0.3 AND policy_version = 'v1' ORDER BY reward DESC, id LIMIT 3", true},
		{"SELECT id, reward FROM records ORDER BY reward DESC NULLS FIRST, id LIMIT 3", false},
		{"SELECT id, reward FROM records WHERE reward > 0.5 AND content LIKE '%x%' ORDER BY reward DESC, id LIMIT 3", false},
		{"SELECT id, -reward AS reward FROM records ORDER BY reward DESC, id LIMIT 3", false},
		{"SELECT id, num_output_tokens AS reward, reward AS r2 FROM records ORDER BY reward DESC, id LIMIT 3", false},
		{"SELECT DISTINCT policy_version, reward FROM records ORDER BY reward DESC, policy_version LIMIT 3", false}, // ties broken: 0.995 is in v2 and v7
		{"SELECT policy_version, max(reward) FROM records GROUP BY 1 ORDER BY 2 DESC LIMIT 3", false},
	} {
		got := f.query(t, "exp", tc.sql, rollout.SourceFragments)
		plain := f.query(t, "exp", strings.Replace(tc.sql, "FROM records", "FROM (SELECT * FROM records)", 1), rollout.SourceFragments)
		if fmt.Sprint(got.Rows) != fmt.Sprint(plain.Rows) {
			t.Fatalf("%s:\nbounded %v\nplain   %v", tc.sql, got.Rows, plain.Rows)
		}
		// Bounded: fewer rows kept than the same query without its LIMIT.
		unlimited := f.query(t, "exp", tc.sql[:strings.Index(tc.sql, " LIMIT")], rollout.SourceFragments)
		st := got.Scans[0]
		if bounded := st.late && st.RowsKept < unlimited.Scans[0].RowsKept; bounded != tc.bounded {
			t.Fatalf("%s: bounded %v (late %v, kept %d of %d, without LIMIT %d)", tc.sql, bounded, st.late, st.RowsKept, st.Rows, unlimited.Scans[0].RowsKept)
		}
	}
}

// Regression: rows a query generates (range, generate_series) were never
// counted, so SELECT count(*) FROM range(100000000000) ran on every engine
// thread until the time limit. It is refused at planning, naming the
// limit and its setting.
func TestRegression_GeneratedRowsRefusedBeforeRunning(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "small", 8, true)
	for _, sql := range []string{
		"SELECT count(*) FROM range(100000000000)",
		"SELECT sum(generate_series) FROM generate_series(1, 100000000000)",
		"EXPLAIN ANALYZE SELECT count(*) FROM range(100000000000)",
		"WITH r AS (SELECT * FROM range(100000000000)) SELECT count(*) FROM r JOIN records ON true",
	} {
		start := time.Now()
		_, err := f.eng.Query(context.Background(), Request{Store: "small", SQL: sql})
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != "max_rows_scanned" || !strings.Contains(err.Error(), "LC_SQL_MAX_ROWS_SCANNED") {
			t.Fatalf("%s: got %v, want max_rows_scanned naming LC_SQL_MAX_ROWS_SCANNED", sql, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s: refused after %v", sql, d)
		}
	}
	// Generated rows under the bound run, and store scans still count as
	// they run.
	res := f.query(t, "small", "SELECT count(*) FROM range(1000000) JOIN records ON true", "")
	if res.Rows[0][0] != int64(8_000_000) || res.RowsScanned != 8 {
		t.Fatalf("count %v, scanned %d", res.Rows, res.RowsScanned)
	}
}

// Regression: on a 250k-row store a filter on an indexed column was refused
// with max_rows_scanned=200000: every row of the store counted as scanned,
// though only the rows of one rollout reach the engine. Rows scanned are
// now the rows the scans deliver after the index lookup and scan filters,
// and the filter reads through the BTree index.
func TestRegression_IndexedFilterUnderScanLimit(t *testing.T) {
	const n = 250_000
	f := newFixture(t, Limits{MaxRowsScanned: 200_000})
	ctx := context.Background()
	s, err := f.cat.Create(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]rollout.Record, 0, 50_000)
	for i := 0; i < n; i++ {
		recs = append(recs, rollout.Record{ID: fmt.Sprintf("id-%06d", i), RolloutID: fmt.Sprintf("r%d", i%1000), Role: "assistant", Reward: ptr(float32(i % 7))})
		if len(recs) == cap(recs) {
			if _, err := s.Append(ctx, recs); err != nil {
				t.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Index(ctx); err != nil {
		t.Fatal(err)
	}
	res := f.query(t, "big", "SELECT count(*), sum(reward) FROM records WHERE rollout_id = 'r5'", "")
	var want float64
	for i := 5; i < n; i += 1000 {
		want += float64(i % 7)
	}
	if res.Rows[0][0] != int64(n/1000) || res.Rows[0][1] != want {
		t.Fatalf("rollout r5: %v, want %d rows summing %v", res.Rows, n/1000, want)
	}
	if res.RowsScanned != n/1000 || len(res.Scans) != 1 || res.Scans[0].Rows != n/1000 {
		t.Fatalf("rows scanned %d, scans %+v: want the %d rows of the index's answer", res.RowsScanned, res.Scans, n/1000)
	}
	// The same answer with all (nothing pending: the base alone).
	if all := f.query(t, "big", "SELECT count(*) FROM records WHERE rollout_id = 'r5'", rollout.SourceAll); all.Rows[0][0] != int64(n/1000) || all.RowsScanned != n/1000 {
		t.Fatalf("all: %v, scanned %d", all.Rows, all.RowsScanned)
	}
	// A filter on a column without an index reads every row but counts
	// only the rows it keeps.
	res = f.query(t, "big", "SELECT count(*) FROM records WHERE reward > 2.5 AND reward < 3.5", "")
	if res.Rows[0][0] != int64(n/7) || res.RowsScanned != int64(n/7) || res.Scans[0].Rows != n {
		t.Fatalf("reward 3: %v, scanned %d, read %d", res.Rows, res.RowsScanned, res.Scans[0].Rows)
	}
	// A whole-store aggregate past the limit is still refused, naming it.
	_, err = f.eng.Query(ctx, Request{Store: "big", SQL: "SELECT count(*) FROM records"})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "max_rows_scanned" || !strings.Contains(err.Error(), "LC_SQL_MAX_ROWS_SCANNED") {
		t.Fatalf("count(*): %v", err)
	}
	// Under the default limits it runs.
	eng := New(FromCatalog(f.cat), Limits{})
	res, err = eng.Query(ctx, Request{Store: "big", SQL: "SELECT count(*) FROM records"})
	if err != nil || res.Rows[0][0] != int64(n) {
		t.Fatalf("default limits: %v %v", res, err)
	}
}
