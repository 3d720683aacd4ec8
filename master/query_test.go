//go:build cgo

package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

type errResp struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func scoredRecs(prefix string, n int) []rollout.Record {
	out := recs(prefix, n, "r")
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range out {
		r, v, ts, tok := float32(i), fmt.Sprint(i%2), t0.Add(time.Duration(i)*time.Second), int32(10+i)
		out[i].Reward, out[i].PolicyVersion, out[i].CreatedAt, out[i].NumOutputTokens = &r, &v, &ts, &tok
	}
	return out
}

func queryBody(sql, source string) string {
	b, _ := json.Marshal(map[string]any{"sql": sql, "source": source})
	return string(b)
}

func TestQueryHTTP(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	st := f.create(f.cat, "exp-1")
	appendFlush(t, st, scoredRecs("a", 10))
	path := "/api/v1/experiments/exp-1/query"

	// fragments (default) is empty until a merge; wal and all see the rows.
	res := call[api.QueryResponse](f, "POST", path, queryBody("SELECT count(*) AS n FROM records", ""), 200)
	if res.Rows[0][0] != float64(0) {
		t.Fatalf("fragments before merge: %v", res.Rows)
	}
	res = call[api.QueryResponse](f, "POST", path, queryBody("SELECT policy_version, avg(reward) AS mean, count(*) AS n FROM records GROUP BY 1 ORDER BY 1", "all"), 200)
	if res.RowCount != 2 || len(res.Rows) != 2 || res.Columns[1].Name != "mean" || res.Columns[1].Type != "DOUBLE" ||
		res.Rows[0][0] != "0" || res.Rows[0][1] != float64(4) || res.Rows[0][2] != float64(5) || res.RowsScanned != 10 || res.Truncated {
		t.Fatalf("aggregate: %+v", res)
	}
	if len(res.Scans) != 1 || strings.Join(slices.Sorted(slices.Values(res.Scans[0].Columns)), ",") != "policy_version,reward" {
		t.Fatalf("scans: %+v", res.Scans)
	}

	// max_rows truncates instead of failing.
	b, _ := json.Marshal(map[string]any{"sql": "SELECT id FROM records ORDER BY id", "source": "wal", "max_rows": 3})
	res = call[api.QueryResponse](f, "POST", path, string(b), 200)
	if res.RowCount != 3 || !res.Truncated || res.Rows[2][0] != "a-002" {
		t.Fatalf("max_rows: %+v", res)
	}

	// Arrow IPC.
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(queryBody("SELECT id, reward FROM records ORDER BY id", "all")))
	req.Header.Set("Accept", "application/vnd.apache.arrow.stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.apache.arrow.stream" {
		t.Fatalf("arrow: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	rd, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var rewards []float32
	for rd.Next() {
		rec := rd.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			ids = append(ids, rec.Column(0).(*array.String).Value(i))
			rewards = append(rewards, rec.Column(1).(*array.Float32).Value(i))
		}
	}
	rd.Release()
	if len(ids) != 10 || ids[9] != "a-009" || rewards[9] != 9 {
		t.Fatalf("arrow rows: %v %v", ids, rewards)
	}

	// Errors: each a clear 4xx.
	for _, c := range []struct {
		body, code string
		status     int
		path       string
	}{
		{queryBody("SELECT * FROM read_csv('/etc/passwd')", ""), "INVALID_REQUEST", 400, path},
		{queryBody("COPY (SELECT 1) TO '/tmp/x.csv'", ""), "INVALID_REQUEST", 400, path},
		{queryBody("ATTACH ':memory:' AS m", ""), "INVALID_REQUEST", 400, path},
		{queryBody("INSTALL httpfs", ""), "INVALID_REQUEST", 400, path},
		{queryBody("SET threads = 64", ""), "INVALID_REQUEST", 400, path},
		{queryBody("PRAGMA version", ""), "INVALID_REQUEST", 400, path},
		{queryBody("DELETE FROM records", ""), "INVALID_REQUEST", 400, path},
		{queryBody("SELEKT 1", ""), "INVALID_REQUEST", 400, path},
		{queryBody("SELECT 1", "tail"), "INVALID_REQUEST", 400, path},
		{`{"sql": 1}`, "INVALID_REQUEST", 400, path},
		{queryBody("SELECT * FROM range(20000)", ""), "QUERY_LIMIT", 422, path},
		{queryBody("SELECT 1", ""), "NOT_FOUND", 404, "/api/v1/experiments/nope/query"},
		{queryBody("SELECT * FROM \"other-store\"", ""), "NOT_FOUND", 404, path},
	} {
		resp, b := f.request("POST", c.path, c.body)
		var e errResp
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != c.status || e.Error.Code != c.code || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", c.body, resp.StatusCode, b, c.status, c.code)
		}
		if c.code == "QUERY_LIMIT" && !strings.Contains(e.Error.Message, "max_rows_returned=10000") {
			t.Errorf("limit message %q does not name the limit", e.Error.Message)
		}
	}
}

// TestGoClientQuery: the Go client's Query and OpenQueryArrow against the
// master, with the token; int64 values stay exact and a limit is a 422
// *client.APIError naming it.
func TestGoClientQuery(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "q-token"})
	st := f.create(f.cat, "exp-c")
	appendFlush(t, st, scoredRecs("c", 4))
	c := client.New(f.srv.URL, client.WithToken("q-token"))
	ctx := context.Background()

	res, err := c.Query(ctx, "exp-c", api.QueryRequest{SQL: "SELECT count(*) AS n, 9007199254740993::BIGINT AS big FROM records", Source: api.SourceAll})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowCount != 1 || res.Columns[0].Name != "n" || res.Rows[0][0] != json.Number("4") || res.Rows[0][1] != json.Number("9007199254740993") {
		t.Fatalf("query: %+v", res)
	}

	rc, hdr, err := c.OpenQueryArrow(ctx, "exp-c", api.QueryRequest{SQL: "SELECT id FROM records ORDER BY id", Source: api.SourceWAL})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := ipc.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rd.Next() {
		col := rd.RecordBatch().Column(0).(*array.String)
		for i := range col.Len() {
			ids = append(ids, col.Value(i))
		}
	}
	rd.Release()
	rc.Close()
	if strings.Join(ids, ",") != "c-000,c-001,c-002,c-003" || hdr.Get(api.HeaderRowCount) != "4" || hdr.Get(api.HeaderTruncated) != "false" {
		t.Fatalf("arrow: %v %v", ids, hdr)
	}

	_, err = c.Query(ctx, "exp-c", api.QueryRequest{SQL: "SELECT * FROM range(20000)"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 422 || ae.Code != api.CodeQueryLimit || !strings.Contains(ae.Message, "max_rows_returned") {
		t.Fatalf("limit: %v", err)
	}
	if _, err := client.New(f.srv.URL).Query(ctx, "exp-c", api.QueryRequest{SQL: "SELECT 1"}); !client.IsCode(err, api.CodeUnauthorized) {
		t.Fatalf("without the token: %v", err)
	}
}

// A storage fault during a query is a 503 with Retry-After, not a 4xx or
// a partial result.
func TestQueryStorageFault(t *testing.T) {
	var failing atomic.Bool
	f := newFixture(t, fixtureOpts{wrap: func(s objstore.Store) objstore.Store {
		return objstore.NewFaulty(s, objstore.FaultConfig{Hook: func(op objstore.Op, key string, _ int) objstore.Fault {
			if failing.Load() && (op == objstore.OpGet || op == objstore.OpGetRange || op == objstore.OpList) {
				return objstore.FaultError
			}
			return objstore.FaultPass
		}})
	}})
	st := f.create(f.cat, "exp")
	appendFlush(t, st, scoredRecs("a", 5))
	f.status("POST", "/api/v1/experiments/exp/query", queryBody("SELECT count(*) FROM records", "all"), 200)
	failing.Store(true)
	resp, b := f.request("POST", "/api/v1/experiments/exp/query", queryBody("SELECT count(*) FROM records", "all"))
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("storage fault: %d %s (Retry-After %q)", resp.StatusCode, b, resp.Header.Get("Retry-After"))
	}
}

type chartsResp struct {
	RewardByPolicyVersion []struct {
		PolicyVersion string  `json:"policy_version"`
		Mean          float64 `json:"mean"`
		P10           float64 `json:"p10"`
		P90           float64 `json:"p90"`
		Count         int64   `json:"count"`
	} `json:"reward_by_policy_version"`
	RewardOverTime []map[string]any `json:"reward_over_time"`
	LengthHist     []struct {
		Lo, Hi, Count int64
	} `json:"length_hist"`
	LengthOverTime []map[string]any `json:"length_over_time"`
	IngestRate     []struct {
		T    string `json:"t"`
		Rows int64  `json:"rows"`
	} `json:"ingest_rate"`
	Pending struct {
		WALRows     int64 `json:"wal_rows"`
		Generations int   `json:"generations"`
	} `json:"pending"`
}

func TestChartsHTTP(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.create(f.cat, "empty")
	raw := call[map[string]any](f, "GET", "/api/v1/experiments/empty/charts", "", 200)
	for _, k := range []string{"reward_by_policy_version", "reward_over_time", "length_hist", "length_over_time", "ingest_rate"} {
		if a, ok := raw[k].([]any); !ok || len(a) != 0 {
			t.Fatalf("empty store %s = %v, want []", k, raw[k])
		}
	}
	st := f.create(f.cat, "exp")
	appendFlush(t, st, scoredRecs("a", 10))
	ch := call[chartsResp](f, "GET", "/api/v1/experiments/exp/charts?source=all", "", 200)
	if len(ch.RewardByPolicyVersion) != 2 || ch.RewardByPolicyVersion[1].PolicyVersion != "1" || ch.RewardByPolicyVersion[1].Mean != 5 ||
		ch.RewardByPolicyVersion[1].Count != 5 || ch.Pending.WALRows != 10 || ch.Pending.Generations != 1 ||
		len(ch.IngestRate) != 1 || ch.IngestRate[0].Rows != 10 || ch.IngestRate[0].T != "2026-03-01T12:00:00Z" {
		t.Fatalf("charts: %+v", ch)
	}
	var n int64
	for _, b := range ch.LengthHist {
		n += b.Count
	}
	if n != 10 || ch.LengthHist[0].Lo != 10 {
		t.Fatalf("length hist: %+v", ch.LengthHist)
	}
	f.status("GET", "/api/v1/experiments/nope/charts", "", 404)
	f.status("GET", "/api/v1/experiments/exp/charts?source=x", "", 400)
}

// The charts of an unchanged store come from the cache; a seal, a merge or
// another source computes them again, and the backlog is always current.
func TestChartsCachedUntilStoreChanges(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	st := f.create(f.cat, "exp")
	appendFlush(t, st, scoredRecs("a", 10))
	get := func(src, wantCache string) chartsResp {
		t.Helper()
		resp, b := f.request("GET", "/api/v1/experiments/exp/charts?source="+src, "")
		if resp.StatusCode != 200 || resp.Header.Get("X-Charts-Cache") != wantCache {
			t.Fatalf("charts %s: %d, cache %q (want %q): %s", src, resp.StatusCode, resp.Header.Get("X-Charts-Cache"), wantCache, b)
		}
		var ch chartsResp
		if err := json.Unmarshal(b, &ch); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	rows := func(ch chartsResp) (n int64) {
		for _, p := range ch.IngestRate {
			n += p.Rows
		}
		return n
	}
	if ch := get("all", "miss"); rows(ch) != 10 {
		t.Fatalf("first: %d rows", rows(ch))
	}
	if ch := get("all", "hit"); rows(ch) != 10 || ch.Pending.WALRows != 10 {
		t.Fatalf("cached: %d rows, backlog %d", rows(ch), ch.Pending.WALRows)
	}
	get("fragments", "miss") // another source
	appendFlush(t, st, scoredRecs("b", 5))
	if ch := get("all", "miss"); rows(ch) != 15 || ch.Pending.WALRows != 15 {
		t.Fatalf("after a seal: %d rows, backlog %d", rows(ch), ch.Pending.WALRows)
	}
	if _, err := st.Merge(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ch := get("fragments", "miss"); rows(ch) != 15 || ch.Pending.WALRows != 0 {
		t.Fatalf("after a merge: %d rows, backlog %d", rows(ch), ch.Pending.WALRows)
	}
	get("fragments", "hit")
}

// A seal changes only what all and wal read: the fragments charts stay
// cached. The charts of all after a seal read the base from the chart base
// (X-Charts-Base: cached) and are those of a scan; a merge updates it.
func TestChartsFragmentsIgnoreSealsAndBaseIsCached(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	st := f.create(f.cat, "exp")
	appendFlush(t, st, scoredRecs("a", 10))
	if _, err := st.Merge(context.Background()); err != nil {
		t.Fatal(err)
	}
	get := func(src, wantCache, wantBase string) chartsResp {
		t.Helper()
		resp, b := f.request("GET", "/api/v1/experiments/exp/charts?source="+src, "")
		if resp.StatusCode != 200 || resp.Header.Get("X-Charts-Cache") != wantCache || resp.Header.Get("X-Charts-Base") != wantBase {
			t.Fatalf("charts %s: %d, cache %q base %q (want %q %q): %s", src, resp.StatusCode,
				resp.Header.Get("X-Charts-Cache"), resp.Header.Get("X-Charts-Base"), wantCache, wantBase, b)
		}
		var ch chartsResp
		if err := json.Unmarshal(b, &ch); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	rows := func(ch chartsResp) (n int64) {
		for _, p := range ch.IngestRate {
			n += p.Rows
		}
		return n
	}
	if ch := get("fragments", "miss", "built"); rows(ch) != 10 {
		t.Fatalf("fragments: %d rows", rows(ch))
	}
	get("all", "miss", "cached")
	appendFlush(t, st, scoredRecs("b", 5))
	if ch := get("fragments", "hit", ""); rows(ch) != 10 || ch.Pending.WALRows != 5 {
		t.Fatalf("fragments after a seal: %d rows, backlog %d", rows(ch), ch.Pending.WALRows)
	}
	if ch := get("all", "miss", "cached"); rows(ch) != 15 {
		t.Fatalf("all after a seal: %d rows", rows(ch))
	}
	if _, err := st.Merge(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The merge added a fragment of 5 rows to the 10: the chart base follows
	// it, reading that fragment alone.
	if ch := get("all", "miss", "updated"); rows(ch) != 15 || ch.Pending.WALRows != 0 {
		t.Fatalf("all after a merge: %d rows, backlog %d", rows(ch), ch.Pending.WALRows)
	}
	get("fragments", "miss", "cached")
}
