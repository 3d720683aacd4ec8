package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
)

func feedGet(t *testing.T, base, query, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/rollouts/fd/feed?"+query, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestFeedOverHTTP: a consumer group reads every row once through JSON
// answers and commits; a restarted consumer resumes at the commit; the
// Arrow, NDJSON and SSE forms carry the same rows and positions as JSON;
// a filter in the feed equals it in a listing; bad input is a 400.
func TestFeedOverHTTP(t *testing.T) {
	ctx := context.Background()
	c, base := lifecycleWorker(t)
	if _, err := c.CreateStore(ctx, "fd"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 6 {
		recs := make([]api.Record, 5)
		for j := range recs {
			recs[j] = api.Record{ID: fmt.Sprintf("r%d-%d", i, j), RolloutID: fmt.Sprint("roll", i%2)}
			want = append(want, recs[j].ID)
		}
		// Some rows merged, some sealed, the last unsealed.
		if _, err := c.Append(ctx, "fd", recs, client.AppendOptions{Flush: i < 5}); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if _, err := c.Merge(ctx, "fd"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A consumer reads 7 at a time and commits; it "restarts" after 2 reads.
	var got []string
	for reads := 0; ; reads++ {
		res, err := c.Feed(ctx, "fd", client.FeedOptions{Group: "learners", Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count != len(res.Records) || res.Group != "learners" {
			t.Fatalf("count %d, %d records, group %q", res.Count, len(res.Records), res.Group)
		}
		if res.Count == 0 {
			break
		}
		for _, r := range res.Records {
			got = append(got, r.ID)
		}
		if _, err := c.CommitFeed(ctx, "fd", "learners", res.Position); err != nil {
			t.Fatal(err)
		}
		if reads > 20 {
			t.Fatal("the feed does not end")
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("group read %d rows %v, want %d", len(got), got, len(want))
	}
	groups, err := c.FeedGroups(ctx, "fd")
	if err != nil || len(groups) != 1 || groups[0].Group != "learners" {
		t.Fatalf("groups %+v %v", groups, err)
	}

	// The forms agree: all rows from the beginning, filtered by rollout_id,
	// and equal a listing's (which shows unsealed rows only after a flush).
	if err := c.Flush(ctx, "fd"); err != nil {
		t.Fatal(err)
	}
	jr, err := c.Feed(ctx, "fd", client.FeedOptions{Limit: 100, Filters: map[string]string{"rollout_id": "roll1"}})
	if err != nil {
		t.Fatal(err)
	}
	var jsonIDs []string
	for _, r := range jr.Records {
		jsonIDs = append(jsonIDs, r.ID)
	}
	listed, err := c.List(ctx, "fd", client.ListOptions{Source: "all", Limit: 100, Filters: map[string]string{"rollout_id": "roll1"}})
	if err != nil {
		t.Fatal(err)
	}
	var listIDs []string
	for _, r := range listed.Records {
		listIDs = append(listIDs, r.ID)
	}
	if a, b := slices.Sorted(slices.Values(jsonIDs)), slices.Sorted(slices.Values(listIDs)); len(a) != 15 || !slices.Equal(a, b) {
		t.Fatalf("filtered feed %v, listing %v", a, b)
	}

	resp := feedGet(t, base, "limit=100&rollout_id=roll1", api.ArrowStream)
	if resp.StatusCode != 200 {
		t.Fatalf("arrow: %d %s", resp.StatusCode, readAll(resp))
	}
	if p := resp.Header.Get(api.FeedPositionHeader); p != jr.Position {
		t.Fatalf("arrow position %q, json %q", p, jr.Position)
	}
	rd, err := ipc.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var arrowIDs []string
	for rd.Next() {
		b := rd.RecordBatch()
		ids := b.Column(b.Schema().FieldIndices("id")[0]).(*array.String)
		for i := 0; i < ids.Len(); i++ {
			arrowIDs = append(arrowIDs, ids.Value(i))
		}
		if v, ok := b.Schema().Metadata().GetValue(api.FeedPositionKey); !ok || v != jr.Position {
			t.Fatalf("arrow schema position %q", v)
		}
	}
	rd.Release()
	resp.Body.Close()
	if !slices.Equal(arrowIDs, jsonIDs) {
		t.Fatalf("arrow %v, json %v", arrowIDs, jsonIDs)
	}

	// A projection: the columns asked for, then lc_shard and lc_seq; the
	// filter's column is read but not returned.
	resp = feedGet(t, base, "limit=100&rollout_id=roll1&columns=id,reward", api.ArrowStream)
	if resp.StatusCode != 200 {
		t.Fatalf("arrow columns: %d %s", resp.StatusCode, readAll(resp))
	}
	rd, err = ipc.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range rd.Schema().Fields() {
		names = append(names, f.Name)
	}
	rows := 0
	for rd.Next() {
		rows += int(rd.RecordBatch().NumRows())
	}
	rd.Release()
	resp.Body.Close()
	if fmt.Sprint(names) != "[id reward lc_shard lc_seq]" || rows != len(jsonIDs) {
		t.Fatalf("columns=id,reward: %v, %d rows", names, rows)
	}

	for _, accept := range []string{"application/x-ndjson", "text/event-stream"} {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/rollouts/fd/feed?limit=100&rollout_id=roll1&wait_ms=200", nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<24)
		var items []api.FeedResponse
		for sc.Scan() && len(items) < 2 {
			line := sc.Text()
			if accept == "text/event-stream" {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				line = data
			}
			var it api.FeedResponse
			if err := json.Unmarshal([]byte(line), &it); err != nil {
				t.Fatalf("%s: %q: %v", accept, line, err)
			}
			items = append(items, it)
		}
		cancel()
		resp.Body.Close()
		if len(items) != 2 || items[0].Count != len(jsonIDs) || items[0].Position != jr.Position || items[1].Count != 0 || items[1].Position != jr.Position {
			t.Fatalf("%s: %d items %+v", accept, len(items), items)
		}
		for i, r := range items[0].Records {
			if r.ID != jsonIDs[i] {
				t.Fatalf("%s: row %d is %s, json %s", accept, i, r.ID, jsonIDs[i])
			}
		}
	}

	// A long poll answers within its wait when nothing comes.
	start := time.Now()
	res, err := c.Feed(ctx, "fd", client.FeedOptions{Group: "learners", WaitMS: 300})
	if err != nil || res.Count != 0 || time.Since(start) < 300*time.Millisecond || time.Since(start) > 5*time.Second {
		t.Fatalf("long poll: %+v %v after %v", res, err, time.Since(start))
	}

	for _, c := range []struct{ query, msg string }{
		{"position=nope", "not a feed position"},
		{"limit=0", "limit must be"},
		{"wait_ms=-1", "wait_ms must be"},
		{"group=bad%2Fname", "consumer group"},
		{"reward=1", "cannot filter on"},
		{"columns=id,nope", "no column"},
	} {
		resp := feedGet(t, base, c.query, "")
		body := readAll(resp)
		if resp.StatusCode != 400 || !strings.Contains(body, c.msg) {
			t.Fatalf("%s: %d %s", c.query, resp.StatusCode, body)
		}
	}
	if _, err := c.CommitFeed(ctx, "fd", "", "f1."); err == nil || !strings.Contains(err.Error(), "group is required") {
		t.Fatalf("commit without group: %v", err)
	}
}
