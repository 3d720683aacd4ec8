package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
)

// TestReadAtVersionOverHTTP: list, get, trajectory and blob with
// version=N (or a tag) answer what a checkout of N answers, while reads
// without it, in between, still see the latest version and the tier.
func TestReadAtVersionOverHTTP(t *testing.T) {
	ctx := context.Background()
	c, base := lifecycleWorker(t)
	if _, err := c.CreateStore(ctx, "tv"); err != nil {
		t.Fatal(err)
	}
	write := func(ids ...string) uint64 {
		recs := make([]api.Record, len(ids))
		for i, id := range ids {
			text := "v-" + id
			recs[i] = api.Record{ID: strings.Split(id, "@")[0], RolloutID: "r1", Content: &text, BinaryPayload: []byte(id)}
		}
		if _, err := c.Append(ctx, "tv", recs, client.AppendOptions{Flush: true}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Merge(ctx, "tv")
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseVersion
	}
	v1 := write("a", "b")
	write("c", "a@2") // a rewritten
	if _, err := c.CreateTag(ctx, "tv", "first", v1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "tv", []api.Record{{ID: "pending", RolloutID: "r1"}}, client.AppendOptions{Flush: true}); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + "/api/v1/rollouts/tv" + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(resp)
	}
	ids := func(body string) []string {
		var out struct {
			Records []api.Record `json:"records"`
			Record  *api.Record  `json:"record"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var got []string
		text := func(r api.Record) string {
			if r.Content == nil {
				return r.ID
			}
			return r.ID + "=" + *r.Content
		}
		for _, r := range out.Records {
			got = append(got, text(r))
		}
		if out.Record != nil {
			got = append(got, text(*out.Record))
		}
		slices.Sort(got)
		return got
	}
	for _, ref := range []string{fmt.Sprint(v1), "first"} {
		latest := func() {
			t.Helper()
			if _, body := get("/records?source=all"); len(ids(body)) != 4 {
				t.Fatalf("latest read changed by a versioned one: %s", body)
			}
		}
		for _, tc := range []struct{ path, want string }{
			{"/records?source=all&version=" + ref, "[a=v-a b=v-b]"},
			{"/records?version=" + ref + "&rollout_id=r1", "[a=v-a b=v-b]"},
			{"/records/a?version=" + ref, "[a=v-a]"},
			{"/trajectories/r1?version=" + ref, "[a=v-a b=v-b]"},
		} {
			code, body := get(tc.path)
			if code != 200 || fmt.Sprint(ids(body)) != tc.want {
				t.Fatalf("%s: %d %v, want %s", tc.path, code, ids(body), tc.want)
			}
			latest()
		}
		if code, body := get("/records/a/blob?version=" + ref); code != 200 || body != "a" {
			t.Fatalf("blob at %s: %d %q", ref, code, body)
		}
		if code, body := get("/records/c?version=" + ref); code != 200 || !strings.Contains(body, `"record":null`) {
			t.Fatalf("c at %s: %d %s", ref, code, body)
		}
	}
	// The same as a checkout answers.
	if _, err := c.Checkout(ctx, "tv", v1); err != nil {
		t.Fatal(err)
	}
	_, pinned := get("/records")
	_, at := get(fmt.Sprintf("/records?version=%d", v1))
	if fmt.Sprint(ids(pinned)) != fmt.Sprint(ids(at)) {
		t.Fatalf("checkout %v, version= %v", ids(pinned), ids(at))
	}
	for _, bad := range []struct {
		path string
		code int
	}{{"/records?version=999", 404}, {"/records?version=no-such-tag", 404}, {"/records?version=0", 400}} {
		if code, body := get(bad.path); code != bad.code {
			t.Fatalf("%s: %d %s", bad.path, code, body)
		}
	}
}
