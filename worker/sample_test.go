package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

func sampleWorker(t *testing.T) (*client.Client, string, objstore.Store) {
	t.Helper()
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	root := objstore.NewMemory()
	srv := NewServer(cfg, rollout.NewCatalog(root, rollout.ShardID("t"), cfg.StoreOptions()), NewRegistry())
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return client.New(ts.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1})), ts.URL, root
}

func ptrTo[T any](v T) *T { return &v }

// loadGroups appends problems p0..p{n-1} of versions, 4 rows each with
// rewards 0, 1, 2, 0 (p0 of each version: all 1, zero variance), and
// merges half of them.
func loadGroups(t *testing.T, c *client.Client, store string, versions []string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateStore(ctx, store); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for vi, v := range versions {
		var recs []api.Record
		for p := 0; p < n; p++ {
			for i := 0; i < 4; i++ {
				at := t0.Add(time.Duration(vi)*time.Hour + time.Duration(p*4+i)*time.Second)
				r := float32(i % 3)
				if p == 0 {
					r = 1
				}
				recs = append(recs, api.Record{ID: fmt.Sprintf("%s-p%d-%d", v, p, i), RolloutID: fmt.Sprintf("%s-p%d-%d", v, p, i),
					ProblemID: fmt.Sprintf("p%d", p), PolicyVersion: ptrTo(v), CreatedAt: &at, Reward: &r, SequenceOrder: int32(i)})
			}
		}
		if _, err := c.Append(ctx, store, recs, client.AppendOptions{Flush: true}); err != nil {
			t.Fatal(err)
		}
		if vi%2 == 0 {
			if _, err := c.Merge(ctx, store); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSampleOverHTTP: the JSON and Arrow answers hold the same groups;
// the consumer group is served without replacement through the route.
func TestSampleOverHTTP(t *testing.T) {
	ctx := context.Background()
	c, _, _ := sampleWorker(t)
	loadGroups(t, c, "s", []string{"v1", "v2", "v3"}, 5)
	req := api.SampleRequest{N: 3, PolicyVersions: &api.PolicyWindow{Last: ptrTo(2)}, DropZeroVariance: true, Seed: ptrTo(uint64(9))}
	res, err := c.Sample(ctx, "s", req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != 3 || len(res.Groups) != 3 || res.Eligible != 4 || !slices.Equal(res.Window, []string{"v3", "v2"}) || res.Seed != 9 {
		t.Fatalf("answer: count %d eligible %d window %v seed %d", res.Count, res.Eligible, res.Window, res.Seed)
	}
	rows := 0
	for _, g := range res.Groups {
		// Problems p1..p4 of v2 and v3: 8 records each, none of p0.
		if len(g.Records) != 8 || g.Key == "p0" || g.RewardStd == nil || *g.RewardStd == 0 {
			t.Fatalf("group %q: %d records, std %v", g.Key, len(g.Records), g.RewardStd)
		}
		for _, r := range g.Records {
			if r.ProblemID != g.Key || (*r.PolicyVersion != "v2" && *r.PolicyVersion != "v3") {
				t.Fatalf("group %q holds %+v", g.Key, r)
			}
		}
		rows += len(g.Records)
	}
	// The Arrow answer: the same rows in the same order, groups split by
	// the metadata's row counts.
	body, h, err := c.OpenSampleArrow(ctx, "s", req)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	rd, err := ipc.NewReader(body)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if h.Get(api.HeaderSampleGroups) != "3" || h.Get(api.HeaderSampleSeed) != "9" {
		t.Fatalf("headers %v", h)
	}
	md := rd.Schema().Metadata()
	counts := strings.Split(md.Values()[md.FindKey(api.SampleMetaGroupRows)], ",")
	if len(counts) != 3 || md.Values()[md.FindKey(api.SampleMetaGroupBy)] != "problem_id" {
		t.Fatalf("metadata %v", md)
	}
	var arrowIDs, arrowKeys []string
	for rd.Next() {
		b := rd.RecordBatch()
		idc := b.Column(b.Schema().FieldIndices("id")[0]).(*array.String)
		pc := b.Column(b.Schema().FieldIndices("problem_id")[0]).(*array.String)
		for i := 0; i < idc.Len(); i++ {
			arrowIDs = append(arrowIDs, idc.Value(i))
			arrowKeys = append(arrowKeys, pc.Value(i))
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	var jsonIDs []string
	at := 0
	for gi, g := range res.Groups {
		n, _ := strconv.Atoi(counts[gi])
		for i := at; i < at+n; i++ {
			if arrowKeys[i] != g.Key {
				t.Fatalf("arrow row %d of group %d has key %q, want %q", i, gi, arrowKeys[i], g.Key)
			}
		}
		at += n
		for _, r := range g.Records {
			jsonIDs = append(jsonIDs, r.ID)
		}
	}
	if !slices.Equal(arrowIDs, jsonIDs) || len(jsonIDs) != rows {
		t.Fatalf("arrow rows %v, json rows %v", arrowIDs, jsonIDs)
	}
	// A consumer group: 4 eligible, served 3 then 1 then none.
	req.Group = "learner"
	for _, want := range []int{3, 1, 0} {
		res, err := c.Sample(ctx, "s", req)
		if err != nil || res.Count != want {
			t.Fatalf("consumer group: %v groups (%v), want %d", res, err, want)
		}
	}
}

// TestSampleBadRequestsAre400NamingTheField: each bad body answers 400
// INVALID_REQUEST naming the field, and nothing is stored.
func TestSampleBadRequestsAre400NamingTheField(t *testing.T) {
	ctx := context.Background()
	c, base, root := sampleWorker(t)
	loadGroups(t, c, "s", []string{"v1"}, 2)
	for _, tc := range []struct{ body, field string }{
		{`{}`, "n must be"},
		{`{"n": -1}`, "n must be"},
		{`{"n": 1, "group_by": "content"}`, "group_by"},
		{`{"n": 1, "policy_versions": {"last": 0}}`, "policy_versions.last"},
		{`{"n": 1, "policy_versions": {"last": 1, "in": ["v1"]}}`, "policy_versions"},
		{`{"n": 1, "policy_versions": {"latest": 1}}`, "latest"},
		{`{"n": 1, "max_times_sampled": 2}`, "max_times_sampled"},
		{`{"n": 1, "group": "a b"}`, "group"},
		{`{"n": 1, "seed": -3}`, "seed"},
		{`{"n": 1, "weighting": "heavy"}`, "weighting"},
		{`{"n": 1, "colour": "red"}`, "colour"},
		{`{"n": "many"}`, "n"},
		{`not json`, "JSON"},
	} {
		resp, err := http.Post(base+"/api/v1/rollouts/s/sample", "application/json", bytes.NewReader([]byte(tc.body)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), api.CodeInvalidRequest) || !strings.Contains(string(b), tc.field) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.body, resp.StatusCode, b, tc.field)
		}
	}
	objs, err := root.List(ctx, "s.rollout.lance/_lc_sample/")
	if err != nil || len(objs) != 0 {
		t.Fatalf("bad requests stored %d objects (%v)", len(objs), err)
	}
	// An unknown store is a 404.
	if _, err := c.Sample(ctx, "nope", api.SampleRequest{N: 1}); !client.IsNotFound(err) {
		t.Fatalf("unknown store: %v", err)
	}
}
