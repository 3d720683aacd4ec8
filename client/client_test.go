package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

func ptr[T any](v T) *T { return &v }

// recordSleeps makes c's backoff waits instant and records them.
func recordSleeps(c *Client) *[]time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return &waits
}

func writeEnvelope(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func TestRetryOn503HonoursRetryAfter(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "2")
			writeEnvelope(w, http.StatusServiceUnavailable, "OVERLOADED", "merge, then retry")
			return
		}
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(map[string]any{"flushed": true})
	}))
	defer srv.Close()
	c := New(srv.URL)
	waits := recordSleeps(c)
	if err := c.Flush(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || len(*waits) != 1 {
		t.Fatalf("calls %d waits %v; want 2 calls and 1 wait", calls.Load(), *waits)
	}
	if w := (*waits)[0]; w < 2*time.Second || w > DefaultRetryPolicy.MaxBackoff {
		t.Fatalf("waited %v; want Retry-After 2s", w)
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "3600")
		writeEnvelope(w, http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE", "disk on fire")
	}))
	defer srv.Close()
	c := New(srv.URL, WithRetry(RetryPolicy{MaxAttempts: 3, BaseBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	waits := recordSleeps(c)
	_, err := c.ListStores(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 503 || ae.Code != "STORAGE_UNAVAILABLE" || ae.RetryAfter != time.Hour {
		t.Fatalf("err = %v; want a 503 storage_unavailable APIError with RetryAfter 1h", err)
	}
	if calls.Load() != 3 || len(*waits) != 2 {
		t.Fatalf("calls %d waits %v; want 3 and 2", calls.Load(), *waits)
	}
	for _, w := range *waits {
		if w > 20*time.Millisecond {
			t.Fatalf("waited %v; want at most MaxBackoff 20ms", w)
		}
	}
}

func TestNoRetryOn4xx(t *testing.T) {
	for _, status := range []int{400, 404, 409, 413} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			writeEnvelope(w, status, "INVALID_REQUEST", "record 0: rollout_id is required")
		}))
		c := New(srv.URL)
		recordSleeps(c)
		_, err := c.Append(context.Background(), "s", []api.Record{{}}, AppendOptions{})
		srv.Close()
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != status || ae.Code != "INVALID_REQUEST" || ae.Message != "record 0: rollout_id is required" {
			t.Fatalf("status %d: err = %#v", status, err)
		}
		if calls.Load() != 1 {
			t.Fatalf("status %d: %d calls; 4xx must not be retried", status, calls.Load())
		}
	}
}

func TestAppendFillsIDsBeforeFirstAttempt(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]api.Record
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Records []api.Record `json:"records"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decode: %v", err)
		}
		mu.Lock()
		bodies = append(bodies, req.Records)
		queries = append(queries, r.URL.RawQuery)
		n := len(bodies)
		mu.Unlock()
		if n < 3 {
			w.Header().Set("Retry-After", "1")
			writeEnvelope(w, http.StatusServiceUnavailable, "UNAVAILABLE", "try again")
			return
		}
		ids := make([]string, len(req.Records))
		for i, rec := range req.Records {
			ids[i] = rec.ID
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"ids": ids, "count": len(ids), "flushed": true})
	}))
	defer srv.Close()
	c := New(srv.URL)
	recordSleeps(c)
	in := []api.Record{
		{RolloutID: "r", Content: ptr("a"), BinaryPayload: []byte{0, 1, 2}},
		{ID: "given", RolloutID: "r"},
		{RolloutID: "r"},
	}
	res, err := c.Append(context.Background(), "s", in, AppendOptions{Flush: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d attempts; want 3", len(bodies))
	}
	for _, q := range queries {
		if q != "flush=true" {
			t.Fatalf("query %q; want flush=true", q)
		}
	}
	first := bodies[0]
	if first[0].ID == "" || first[2].ID == "" || first[1].ID != "given" || first[0].ID == first[2].ID {
		t.Fatalf("first attempt ids %q %q %q; want filled, distinct, and the given one kept", first[0].ID, first[1].ID, first[2].ID)
	}
	if u, err := uuidVersion(first[0].ID); err != nil || u != 7 {
		t.Fatalf("id %q: version %d, %v; want a UUIDv7", first[0].ID, u, err)
	}
	for a, body := range bodies {
		for i := range body {
			if body[i].ID != first[i].ID {
				t.Fatalf("attempt %d record %d id %q; first attempt had %q", a, i, body[i].ID, first[i].ID)
			}
			// created_at too is fixed before the first attempt: a retry
			// must not write the row again with a later server time.
			if body[i].CreatedAt == nil || !body[i].CreatedAt.Equal(*first[i].CreatedAt) {
				t.Fatalf("attempt %d record %d created_at %v; first attempt had %v", a, i, body[i].CreatedAt, first[i].CreatedAt)
			}
		}
		if !bytes.Equal(body[0].BinaryPayload, []byte{0, 1, 2}) {
			t.Fatalf("payload %v", body[0].BinaryPayload)
		}
	}
	if res.Count != 3 || !res.Flushed || res.IDs[0] != first[0].ID || res.IDs[1] != "given" {
		t.Fatalf("result %+v", res)
	}
	if in[0].ID != "" || in[0].CreatedAt != nil {
		t.Fatal("Append modified the caller's records")
	}
}

func uuidVersion(s string) (int, error) {
	if len(s) != 36 {
		return 0, fmt.Errorf("not a uuid")
	}
	v, err := strconv.ParseInt(s[14:15], 16, 8)
	return int(v), err
}

func TestErrorDecoding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/rollouts/s/records/x":
			writeEnvelope(w, 404, "NOT_FOUND", `rollout: not found: record "x"`)
		case "/api/v1/rollouts/s":
			http.Error(w, "bad gateway from a proxy", http.StatusBadGateway)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := New(srv.URL, WithRetry(RetryPolicy{MaxAttempts: 2}))
	waits := recordSleeps(c)
	ctx := context.Background()

	_, err := c.Get(ctx, "s", "x")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "NOT_FOUND" || !IsNotFound(err) || !IsCode(err, "NOT_FOUND") {
		t.Fatalf("get: %#v", err)
	}
	if want := `lance-context: 404 NOT_FOUND: rollout: not found: record "x"`; err.Error() != want {
		t.Fatalf("message %q; want %q", err.Error(), want)
	}

	// Not the envelope: the body becomes the message, the code stays empty.
	// A 502 is retried, then the error wraps the last one.
	_, err = c.Stats(ctx, "s")
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "" || ae.Message != "bad gateway from a proxy" || !ae.Temporary() {
		t.Fatalf("stats: %#v", err)
	}
	if len(*waits) != 1 {
		t.Fatalf("waits %v; want one retry", *waits)
	}

	if got := parseRetryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 59*time.Minute || got > time.Hour {
		t.Fatalf("Retry-After as a date: %v", got)
	}
	if parseRetryAfter("soon") != 0 || parseRetryAfter("-3") != 0 || parseRetryAfter("7") != 7*time.Second {
		t.Fatal("parseRetryAfter")
	}
}

func TestNoRetryOfCreate(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeEnvelope(w, 503, "STORAGE_UNAVAILABLE", "x")
	}))
	defer srv.Close()
	c := New(srv.URL)
	recordSleeps(c)
	if _, err := c.CreateStore(context.Background(), "s"); err == nil || calls.Load() != 1 {
		t.Fatalf("err %v calls %d; want one attempt", err, calls.Load())
	}
}

func TestRetryOnConnectionError(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // drop the connection without an answer
			}
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "role": "worker"})
	}))
	defer srv.Close()
	c := New(srv.URL)
	waits := recordSleeps(c)
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || calls.Load() != 2 || len(*waits) != 1 {
		t.Fatalf("health %+v calls %d waits %v", h, calls.Load(), *waits)
	}
}

func TestContextEndsBackoff(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		writeEnvelope(w, 503, "OVERLOADED", "x")
	}))
	defer srv.Close()
	c := New(srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.ListStores(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the context's error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned after %v; the backoff must end with the context", d)
	}
}

func TestTokenAndPaths(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization")+" "+r.Method+" "+r.URL.EscapedPath())
		_, _ = io.WriteString(w, `{"records":[],"rollout_id":"a/b","count":0}`)
	}))
	defer srv.Close()
	c := New(srv.URL+"/", WithToken("sekret"))
	if _, err := c.Trajectory(context.Background(), "s", "a/b c"); err != nil {
		t.Fatal(err)
	}
	if want := "Bearer sekret GET /api/v1/rollouts/s/trajectories/a%2Fb%20c"; got[0] != want {
		t.Fatalf("request %q; want %q", got[0], want)
	}
}

func TestListPaging(t *testing.T) {
	const total = 23
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		requests = append(requests, r.URL.RawQuery)
		if q.Get("source") != "all" || q.Get("role") != "user" {
			writeEnvelope(w, 400, "INVALID_REQUEST", "want source=all&role=user, got "+r.URL.RawQuery)
			return
		}
		limit, _ := strconv.Atoi(q.Get("limit"))
		offset, _ := strconv.Atoi(q.Get("offset"))
		if c := q.Get("cursor"); c != "" {
			after, _ := strconv.Atoi(strings.TrimPrefix(c, "c"))
			offset += after
		}
		var recs []map[string]any
		for i := offset; i < total && i < offset+limit; i++ {
			recs = append(recs, map[string]any{"id": fmt.Sprint(i), "rollout_id": "r", "role": "user", "a_field_from_the_future": 1})
		}
		next := ""
		if offset+limit < total {
			next = fmt.Sprintf("c%d", offset+limit)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"records": recs, "has_more": offset+limit < total, "limit": limit, "offset": offset, "source": "all", "next_cursor": next})
	}))
	defer srv.Close()
	c := New(srv.URL)
	ctx := context.Background()
	o := ListOptions{Source: api.SourceAll, Filters: map[string]string{"role": "user"}, Limit: 10}

	page, err := c.List(ctx, "s", o)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 10 || !page.HasMore || page.Limit != 10 || page.Offset != 0 || page.Source != api.SourceAll || page.Records[3].ID != "3" {
		t.Fatalf("page %+v", page)
	}
	all, err := c.ListAll(ctx, "s", o)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total || all[22].ID != "22" {
		t.Fatalf("ListAll: %d records", len(all))
	}
	// Iterate follows next_cursor, not offsets.
	if n := len(requests); n != 4 || requests[3] != "cursor=c20&limit=10&role=user&source=all" {
		t.Fatalf("requests %q", requests)
	}
	// Breaking out of the loop stops fetching.
	requests = nil
	n := 0
	for _, err := range c.Iterate(ctx, "s", o) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 12 {
			break
		}
	}
	if len(requests) != 2 {
		t.Fatalf("%d requests for 12 records in pages of 10", len(requests))
	}
	// An error is yielded once and ends the sequence.
	o.Filters = nil
	var errs int
	for _, err := range c.Iterate(ctx, "s", o) {
		if err != nil {
			errs++
		}
	}
	if errs != 1 {
		t.Fatalf("%d errors", errs)
	}
}

// newWorker serves the real worker handler over an in-memory catalog.
func newWorker(t *testing.T, token string) *httptest.Server {
	t.Helper()
	cfg := worker.Config{
		InstanceID: "t", APIToken: token,
		MaxBodyBytes: 64 << 20, MaxRecords: 10000, MaxPayloadBytes: 32 << 20,
		PendingWarn: 256, PendingMax: 4096, MergeMaxGenerations: 8, MergeMaxBytes: 1 << 30,
	}
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), cfg.StoreOptions())
	srv := httptest.NewServer(worker.NewServer(cfg, catalog, worker.NewRegistry()).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = catalog.Close(context.Background())
	})
	return srv
}

func TestRealWorker(t *testing.T) {
	srv := newWorker(t, "tok")
	ctx := context.Background()
	c := New(srv.URL, WithToken("tok"))

	// Auth: health is open, the rest needs the token.
	if h, err := New(srv.URL).Health(ctx); err != nil || h.Status != "ok" || h.Role != "worker" || h.ShardID != rollout.ShardID("t") {
		t.Fatalf("health %+v %v", h, err)
	}
	if _, err := New(srv.URL).ListStores(ctx); !IsCode(err, "UNAUTHORIZED") {
		t.Fatalf("no token: %v", err)
	}

	if info, err := c.CreateStore(ctx, "runs"); err != nil || info.Name != "runs" {
		t.Fatalf("create: %+v %v", info, err)
	}
	if _, err := c.CreateStore(ctx, "runs"); !IsCode(err, "ALREADY_EXISTS") {
		t.Fatalf("second create: %v", err)
	}
	if names, err := c.ListStores(ctx); err != nil || len(names) != 1 || names[0].Name != "runs" || names[0].URI == "" {
		t.Fatalf("stores %v %v", names, err)
	}

	payload := []byte{0, 0xff, 0x10, 'x', 0}
	recs := []api.Record{
		{RolloutID: "r1", SequenceOrder: 2, Role: "assistant", Content: ptr("answer"), Reward: ptr[float32](1.5), Metadata: ptr(`{"k":1}`)},
		{RolloutID: "r1", SequenceOrder: 0, Role: "system", Content: ptr("be brief")},
		{RolloutID: "r1", SequenceOrder: 1, Role: "user", Content: ptr("question")},
		{RolloutID: "r2", Role: "artifact", ContentType: "image/png", BinaryPayload: payload, ArtifactType: ptr("screenshot")},
	}
	res, err := c.Append(ctx, "runs", recs, AppendOptions{Flush: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != 4 || !res.Flushed || len(res.IDs) != 4 {
		t.Fatalf("append %+v", res)
	}

	counts := func(want map[api.Source]int) {
		t.Helper()
		for src, n := range want {
			page, err := c.List(ctx, "runs", ListOptions{Source: src, Limit: 100})
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			if len(page.Records) != n || page.Source != src {
				t.Fatalf("source %s: %d records; want %d", src, len(page.Records), n)
			}
		}
	}
	counts(map[api.Source]int{api.SourceFragments: 0, api.SourceWAL: 4, api.SourceAll: 4})

	// Filters and paging.
	page, err := c.List(ctx, "runs", ListOptions{Source: api.SourceAll, Filters: map[string]string{"rollout_id": "r1", "role": "user"}})
	if err != nil || len(page.Records) != 1 || *page.Records[0].Content != "question" {
		t.Fatalf("filtered: %+v %v", page, err)
	}
	all, err := c.ListAll(ctx, "runs", ListOptions{Source: api.SourceAll, Limit: 3})
	if err != nil || len(all) != 4 {
		t.Fatalf("ListAll: %d %v", len(all), err)
	}

	got, err := c.Get(ctx, "runs", res.IDs[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != res.IDs[0] || *got.Content != "answer" || *got.Reward != 1.5 || got.Metadata == nil || *got.Metadata != `{"k":1}` || got.CreatedAt == nil {
		t.Fatalf("get %+v", got)
	}
	if _, err := c.Get(ctx, "runs", "nope"); !IsNotFound(err) {
		t.Fatalf("get missing: %v", err)
	}

	data, ctype, err := c.Blob(ctx, "runs", res.IDs[3])
	if err != nil || !bytes.Equal(data, payload) || ctype != "image/png" {
		t.Fatalf("blob %v %q %v", data, ctype, err)
	}
	if _, _, err := c.Blob(ctx, "runs", res.IDs[0]); !IsNotFound(err) {
		t.Fatalf("blob of a record without payload: %v", err)
	}

	traj, err := c.Trajectory(ctx, "runs", "r1")
	if err != nil || len(traj) != 3 {
		t.Fatalf("trajectory %v %v", traj, err)
	}
	for i, r := range traj {
		if r.SequenceOrder != int32(i) {
			t.Fatalf("trajectory order: record %d has sequence_order %d", i, r.SequenceOrder)
		}
	}

	// Ids and rollout ids holding "/" are escaped in the path.
	if _, err := c.Append(ctx, "runs", []api.Record{{ID: "step/1", RolloutID: "run/9", BinaryPayload: []byte("p")}}, AppendOptions{Flush: true}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Get(ctx, "runs", "step/1"); err != nil || r.RolloutID != "run/9" {
		t.Fatalf("get step/1: %+v %v", r, err)
	}
	if data, _, err := c.Blob(ctx, "runs", "step/1"); err != nil || string(data) != "p" {
		t.Fatalf("blob step/1: %q %v", data, err)
	}
	if tr, err := c.Trajectory(ctx, "runs", "run/9"); err != nil || len(tr) != 1 {
		t.Fatalf("trajectory run/9: %v %v", tr, err)
	}

	// Arrow append without an id column; the client fills ids.
	batch := arrowBatch(t, []string{"r3", "r3"}, []string{"a", "b"})
	defer batch.Release()
	ares, err := c.AppendArrow(ctx, "runs", batch, false)
	if err != nil || ares.Count != 2 || ares.Flushed || ares.IDs[0] == "" {
		t.Fatalf("append arrow %+v %v", ares, err)
	}
	if err := c.Flush(ctx, "runs"); err != nil {
		t.Fatal(err)
	}
	counts(map[api.Source]int{api.SourceWAL: 7})

	m, err := c.Merge(ctx, "runs")
	if err != nil || m.Rows != 7 || m.Remaining != 0 {
		t.Fatalf("merge %+v %v", m, err)
	}
	counts(map[api.Source]int{api.SourceFragments: 7, api.SourceWAL: 0, api.SourceAll: 7})
	if data, _, err := c.Blob(ctx, "runs", res.IDs[3]); err != nil || !bytes.Equal(data, payload) {
		t.Fatalf("blob after merge: %v %v", data, err)
	}

	st, err := c.Stats(ctx, "runs")
	if err != nil || st.Name != "runs" || st.Rows != 7 || st.BaseRows != 7 || st.PendingRows != 0 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if _, err := c.Compact(ctx, "runs", nil); err != nil {
		t.Fatal(err)
	}

	// A validation error is a 400 with the worker's message.
	if _, err := c.Append(ctx, "runs", []api.Record{{Content: ptr("no rollout")}}, AppendOptions{}); !IsCode(err, "INVALID_REQUEST") {
		t.Fatalf("invalid append: %v", err)
	}
	if _, err := c.List(ctx, "runs", ListOptions{Filters: map[string]string{"reward": "1"}}); !IsCode(err, "INVALID_REQUEST") {
		t.Fatalf("bad filter: %v", err)
	}

	if err := c.DeleteStore(ctx, "runs"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stats(ctx, "runs"); !IsNotFound(err) {
		t.Fatalf("stats after delete: %v", err)
	}
}

func arrowBatch(t *testing.T, rolloutIDs, contents []string) arrow.RecordBatch {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "rollout_id", Type: arrow.BinaryTypes.String},
		{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(rolloutIDs, nil)
	b.Field(1).(*array.LargeStringBuilder).AppendValues(contents, nil)
	return b.NewRecordBatch()
}
