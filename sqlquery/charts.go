//go:build cgo

package sqlquery

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/rollout"
)

// bucketWidths are the time bucket widths, in seconds, the charts choose
// from: the smallest giving at most maxBuckets buckets.
var bucketWidths = []int64{60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400}

const (
	maxBuckets = 120
	histBins   = 20
)

// Charts computes the charts of store with SQL, with the chart scan limit.
//
// The charts read four columns of every row (reward, policy_version,
// created_at, num_output_tokens) and the content of the rows without
// num_output_tokens, whose length stands in for the token count. They are
// gathered into two tables, base (reward, policy_version, us, len) and clen
// (us, len: the content lengths), which aggregate reduces to the charts.
//
// With a base cache (CacheChartBases), fragments and all read the base
// table's part of those tables from a database kept per store and base
// table version (chartBase), so a change of the WAL alone costs a scan of
// the pending rows only; see chartsCached. Otherwise, and when the cache
// cannot serve, one sandboxed session scans the store (scanInputs).
func (e *Engine) Charts(ctx context.Context, store string, src rollout.Source) (*Charts, error) {
	start := time.Now()
	ch := &Charts{Charts: api.Charts{
		RewardByPolicyVersion: []api.PolicyPoint{}, RewardOverTime: []api.TimePoint{}, LengthHist: []api.LengthBin{},
		LengthOverTime: []api.LengthPoint{}, IngestRate: []api.RatePoint{},
	}}
	if src == "" {
		src = rollout.SourceFragments
	}
	done, err := e.chartsCached(ctx, store, src, ch)
	if err != nil {
		return nil, err
	}
	if !done {
		q, err := e.session(ctx, store, src, e.limits, func(ctx context.Context, c *duckdb.Conn, q *query) error {
			if err := scanInputs(ctx, c, q); err != nil {
				return err
			}
			return aggregate(ctx, c, ch)
		})
		if err != nil {
			return nil, err
		}
		ch.RowsScanned = q.scanned.Load()
		ch.Base = BaseScanned
	}
	ch.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
	return ch, nil
}

// rewardExpr is reward as the charts take it: NaN and infinities (which
// JSON cannot carry) count as no reward.
const rewardExpr = "CASE WHEN isnan(reward) OR isinf(reward) THEN NULL ELSE reward::DOUBLE END"

// The response length charts count responses only: rows of role assistant
// (the default role). System and user prompts, tool results and grades
// are not a policy's output, and their lengths (prompts are long) made
// "response length" a mix of inputs and outputs.
const (
	respCond = "role = 'assistant'"
	// lenExpr is a response's length in tokens; NULL for other rows.
	lenExpr = "CASE WHEN " + respCond + " THEN num_output_tokens::BIGINT END"
	// clenWhere selects the responses whose length is their content's.
	clenWhere = "num_output_tokens IS NULL AND " + respCond
)

// clenHints are clenWhere as scan filters: a fragments scan reads content
// for those rows alone.
var clenHints = []hint{{Column: "num_output_tokens", Op: opIsNull}, {Column: rollout.ColRole, Op: "=", Str: "assistant", IsStr: true}}

// arrivalExpr is when a row arrived, in µs since the epoch: the time in its
// id when that is a UUIDv7 (the id the Go and Python clients, and the
// server, give a record without one, at the time it is sent), else its
// created_at. The ingest rate counts rows by it: created_at is the client's
// claim of when the episode happened, which a backfill or a replay sets in
// the past.
const arrivalExpr = "CASE WHEN uuid_extract_version(TRY_CAST(id AS UUID)) = 7 " +
	"THEN epoch_us(uuid_extract_timestamp(TRY_CAST(id AS UUID))) ELSE epoch_us(created_at) END"

// scanInputs fills the temporary tables base and clen from one scan of the
// store's chosen tier, and, when some rows lack num_output_tokens, a second
// statement whose scan filter (num_output_tokens IS NULL) makes a
// fragments scan read content and created_at of those rows alone (see
// lateBase).
func scanInputs(ctx context.Context, c *duckdb.Conn, q *query) error {
	if err := exec(ctx, c, `CREATE TEMP TABLE base AS SELECT `+rewardExpr+` AS reward,
		policy_version, epoch_us(created_at) AS us, `+arrivalExpr+` AS arr, `+lenExpr+` AS len FROM records`); err != nil {
		return err
	}
	nulls, err := all(ctx, c, `SELECT count(*) FILTER (WHERE len IS NULL) FROM base`)
	if err != nil {
		return err
	}
	if asInt(nulls[0][0]) == 0 {
		return exec(ctx, c, `CREATE TEMP TABLE clen (us BIGINT, len BIGINT)`)
	}
	return hinted(q, clenHints, func() error {
		return exec(ctx, c, `CREATE TEMP TABLE clen AS SELECT epoch_us(created_at) AS us, length(content)::BIGINT AS len
			FROM records WHERE `+clenWhere)
	})
}

// hinted runs fn, one statement with one scan of the query's store, with
// scan filters hs (as run derives them for a query).
func hinted(q *query, hs []hint, fn func() error) error {
	q.mu.Lock()
	q.hintStore, q.hints, q.binds = q.store, hs, nil
	q.mu.Unlock()
	err := fn()
	q.mu.Lock()
	q.hintStore, q.hints = "", nil
	q.mu.Unlock()
	return err
}

// aggregate computes the charts from the tables (or views) base (reward,
// policy_version, us, arr, len) and clen (us, len): a response's length is
// its len in base or, when that is NULL, its len in clen; other rows have
// none. The time series are by created_at (us), but for the ingest rate,
// which is by arrival (arr).
func aggregate(ctx context.Context, c *duckdb.Conn, ch *Charts) error {
	summary, err := all(ctx, c, `SELECT (SELECT count(*) FROM clen), min(us), max(us), min(len), max(len), min(arr), max(arr) FROM base`)
	if err != nil {
		return err
	}
	lenSrc, clen := "SELECT us, len FROM base", false // clen: some lengths come from content
	if asInt(summary[0][0]) > 0 {
		lenSrc, clen = "SELECT us, len FROM base WHERE len IS NOT NULL UNION ALL SELECT us, len FROM clen", true
	}
	// The created_at series and the arrival series each get the width
	// their span needs: a backfill of old episodes spans years of
	// created_at and minutes of arrival.
	width, ingestWidth := bucketWidth(summary[0][1], summary[0][2]), bucketWidth(summary[0][5], summary[0][6])
	ch.BucketSeconds, ch.IngestBucketSeconds = width, ingestWidth
	bucket := fmt.Sprintf("(us // %d) * %d", width*1_000_000, width)
	bucketTime := func(v any) string { return time.Unix(asInt(v), 0).UTC().Format(time.RFC3339) }

	// One quantile aggregate with a list of fractions sorts each group once.
	rows, err := all(ctx, c, `SELECT policy_version, avg(reward), quantile_cont(reward, [0.1, 0.9]), count(*), min(arr)
		FROM base WHERE reward IS NOT NULL AND policy_version IS NOT NULL GROUP BY 1`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		p := api.PolicyPoint{PolicyVersion: r[0].(string), Mean: asFloat(r[1]), P10: nth(r[2], 0), P90: nth(r[2], 1), Count: asInt(r[3])}
		if r[4] != nil {
			p.FirstSeen = time.UnixMicro(asInt(r[4])).UTC().Format(time.RFC3339Nano)
		}
		ch.RewardByPolicyVersion = append(ch.RewardByPolicyVersion, p)
	}
	// Natural order: step-2 before step-10 (SQL's order put step-10 first).
	slices.SortFunc(ch.RewardByPolicyVersion, func(a, b api.PolicyPoint) int { return NaturalCompare(a.PolicyVersion, b.PolicyVersion) })

	// One pass over the time buckets gives the reward band, the ingest rate
	// and, when every length is in base, the length trend. Aggregates skip
	// NULLs; a bucket without a reward (or a length) has no such point.
	lenCols := ", count(len), avg(len), quantile_cont(len, [0.5, 0.9])"
	if clen {
		lenCols = ", 0, NULL, NULL"
	}
	rows, err = all(ctx, c, `SELECT `+bucket+` AS t, count(*), count(reward), avg(reward), quantile_cont(reward, [0.1, 0.9])`+lenCols+`
		FROM base WHERE us IS NOT NULL GROUP BY 1 ORDER BY 1`)
	if err != nil {
		return err
	}
	arrivals, err := all(ctx, c, `SELECT `+fmt.Sprintf("(arr // %d) * %d", ingestWidth*1_000_000, ingestWidth)+` AS t, count(*) FROM base WHERE arr IS NOT NULL GROUP BY 1 ORDER BY 1`)
	if err != nil {
		return err
	}
	for _, r := range arrivals {
		ch.IngestRate = append(ch.IngestRate, api.RatePoint{T: bucketTime(r[0]), Rows: asInt(r[1])})
	}
	for _, r := range rows {
		t := bucketTime(r[0])
		if n := asInt(r[2]); n > 0 {
			ch.RewardOverTime = append(ch.RewardOverTime, api.TimePoint{T: t, Mean: asFloat(r[3]), P10: nth(r[4], 0), P90: nth(r[4], 1), Count: n})
		}
		if asInt(r[5]) > 0 {
			ch.LengthOverTime = append(ch.LengthOverTime, api.LengthPoint{T: t, Mean: asFloat(r[6]), P50: nth(r[7], 0), P90: nth(r[7], 1)})
		}
	}

	lenRange := summary[0][3:5]
	if clen {
		rows, err = all(ctx, c, `SELECT min(len), max(len) FROM (`+lenSrc+`) WHERE len IS NOT NULL`)
		if err != nil {
			return err
		}
		lenRange = rows[0]
	}
	if lenRange[0] != nil {
		lo, hi := asInt(lenRange[0]), asInt(lenRange[1])
		w := max(1, (hi-lo+histBins)/histBins) // ceil((hi-lo+1)/bins)
		hist, err := all(ctx, c, fmt.Sprintf(`SELECT (len - %d) // %d AS b, count(*) FROM (%s) WHERE len IS NOT NULL GROUP BY 1 ORDER BY 1`, lo, w, lenSrc))
		if err != nil {
			return err
		}
		for _, r := range hist {
			b := asInt(r[0])
			ch.LengthHist = append(ch.LengthHist, api.LengthBin{Lo: lo + b*w, Hi: lo + (b+1)*w, Count: asInt(r[1])})
		}
	}

	if !clen {
		return nil
	}
	rows, err = all(ctx, c, `SELECT `+bucket+` AS t, avg(len), quantile_cont(len, [0.5, 0.9])
		FROM (`+lenSrc+`) WHERE len IS NOT NULL AND us IS NOT NULL GROUP BY 1 ORDER BY 1`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		ch.LengthOverTime = append(ch.LengthOverTime, api.LengthPoint{T: bucketTime(r[0]), Mean: asFloat(r[1]), P50: nth(r[2], 0), P90: nth(r[2], 1)})
	}
	return nil
}

// bucketWidth is the smallest of bucketWidths giving at most maxBuckets
// buckets between lo and hi (µs; nil when there are no rows).
func bucketWidth(lo, hi any) int64 {
	if lo == nil || hi == nil {
		return bucketWidths[len(bucketWidths)-1]
	}
	span := (asInt(hi) - asInt(lo)) / 1e6
	for _, w := range bucketWidths {
		if span/w < maxBuckets {
			return w
		}
	}
	return bucketWidths[len(bucketWidths)-1]
}

func exec(ctx context.Context, c *duckdb.Conn, sql string) error {
	_, err := c.ExecContext(ctx, sql, nil)
	return err
}

// all runs an internal statement and returns every row.
func all(ctx context.Context, c *duckdb.Conn, sql string) ([][]driver.Value, error) {
	rows, err := c.QueryContext(ctx, sql, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]driver.Value
	for {
		row := make([]driver.Value, len(rows.Columns()))
		if err := rows.Next(row); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, row)
	}
}

// nth is element i of a LIST value, as a float.
func nth(v any, i int) float64 {
	if l, ok := v.([]any); ok && i < len(l) {
		return asFloat(l[i])
	}
	return 0
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case float64:
		return int64(x)
	case interface{ Int64() int64 }:
		return x.Int64()
	}
	return 0
}

// asFloat returns v as a float; NULL, NaN and infinities (JSON has none)
// as 0, which only an all-NULL group could produce.
func asFloat(v any) float64 {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int64:
		f = float64(x)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
