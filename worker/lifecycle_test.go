package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

func lifecycleWorker(t *testing.T) (*client.Client, string) {
	t.Helper()
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.IndexColumns = []string{}
	srv := NewServer(cfg, rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), cfg.StoreOptions()), NewRegistry())
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return client.New(ts.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1})), ts.URL
}

// TestCleanupTagsAndLeasesOverHTTP: the worker's lifecycle routes, through
// the Go client: tags and leases keep their versions through a cleanup
// that keeps nothing for age; bad input is a 400 naming what to fix.
func TestCleanupTagsAndLeasesOverHTTP(t *testing.T) {
	ctx := context.Background()
	c, base := lifecycleWorker(t)
	if _, err := c.CreateStore(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	var versions []uint64
	for i := range 5 {
		recs := []api.Record{{ID: fmt.Sprintf("id-%d", i), RolloutID: "r"}}
		if _, err := c.Append(ctx, "life", recs, client.AppendOptions{Flush: true}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Merge(ctx, "life")
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, res.BaseVersion)
	}
	tag, err := c.CreateTag(ctx, "life", "first", versions[0])
	if err != nil || tag.Version != versions[0] || tag.ManifestSize == 0 {
		t.Fatalf("create tag: %+v %v", tag, err)
	}
	lease, err := c.TakeLease(ctx, "life", versions[1], 600, "test")
	if err != nil || lease.Version != versions[1] {
		t.Fatalf("take lease: %+v %v", lease, err)
	}
	zero := int64(0)
	res, err := c.Cleanup(ctx, "life", &api.CleanupRequest{OlderThanSeconds: &zero, ReadGraceSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if res.VersionsKept != 3 || res.VersionsRemoved == 0 || res.BytesRemoved == 0 ||
		fmt.Sprint(res.TaggedVersions) != fmt.Sprint([]uint64{versions[0]}) || fmt.Sprint(res.HeldVersions) != fmt.Sprint([]uint64{versions[1]}) {
		t.Fatalf("cleanup: %+v", res)
	}
	tags, err := c.Tags(ctx, "life")
	if err != nil || len(tags) != 1 || tags[0].Name != "first" {
		t.Fatalf("tags: %v %v", tags, err)
	}
	for _, tc := range []struct {
		tag    string
		status int
		want   string
	}{{"first", 200, fmt.Sprintf(`"version":%d`, versions[0])}, {"none", 404, "NOT_FOUND"}, {"a..b", 400, "two dots"}} {
		resp, err := http.Get(base + "/api/v1/rollouts/life/tags/" + tc.tag)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(resp); resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Fatalf("GET tag %s: %d %s", tc.tag, resp.StatusCode, body)
		}
	}
	if err := c.ReleaseLease(ctx, "life", lease.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTag(ctx, "life", "first"); err != nil {
		t.Fatal(err)
	}
	if res, err = c.Cleanup(ctx, "life", &api.CleanupRequest{OlderThanSeconds: &zero, ReadGraceSeconds: &zero}); err != nil || res.VersionsKept != 1 {
		t.Fatalf("second cleanup: %+v %v", res, err)
	}
	var ae *client.APIError
	if _, err := c.CreateTag(ctx, "life", "a b", 0); !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "letters, digits") {
		t.Fatalf("bad tag name: %v", err)
	}
	if _, err := c.CreateTag(ctx, "life", "old", versions[0]); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("tag of a cleaned version: %v", err)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/cleanup", `{"older_than_seconds":-1}`, "older_than_seconds must be 0 or more"},
		{"/cleanup", `{"older_than":5}`, "older_than"},
		{"/leases", `{"ttl_seconds":999999999}`, "ttl_seconds must be between"},
	} {
		resp, err := http.Post(base+"/api/v1/rollouts/life"+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = fmt.Fprint(&b, readAll(resp))
		if resp.StatusCode != 400 || !strings.Contains(b.String(), tc.want) {
			t.Fatalf("POST %s %s: %d %s", tc.path, tc.body, resp.StatusCode, b.String())
		}
	}
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestRowRetentionOverHTTP: a retention of the newest policy version set
// through the route is applied by the next cleanup, which reports the
// rows it expired; bad bounds are a 400.
func TestRowRetentionOverHTTP(t *testing.T) {
	ctx := context.Background()
	c, _ := lifecycleWorker(t)
	if _, err := c.CreateStore(ctx, "ret"); err != nil {
		t.Fatal(err)
	}
	for i, pv := range []string{"step-9", "step-10", "step-10"} {
		recs := []api.Record{{ID: fmt.Sprintf("id-%d", i), RolloutID: "r", PolicyVersion: &pv}}
		if _, err := c.Append(ctx, "ret", recs, client.AppendOptions{Flush: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Merge(ctx, "ret"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.SetRetention(ctx, "ret", api.RetentionConfig{KeepPolicyVersions: 1}); err != nil || got.KeepPolicyVersions != 1 {
		t.Fatalf("set retention: %+v %v", got, err)
	}
	if got, err := c.Retention(ctx, "ret"); err != nil || got.KeepPolicyVersions != 1 || got.MaxAgeSeconds != 0 {
		t.Fatalf("retention: %+v %v", got, err)
	}
	res, err := c.Cleanup(ctx, "ret", nil)
	if err != nil || res.RowsExpired != 1 {
		t.Fatalf("cleanup: %+v %v", res, err)
	}
	var ae *client.APIError
	if rec, err := c.Get(ctx, "ret", "id-0"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("the step-9 row after retention: %+v %v", rec, err)
	}
	if rec, err := c.Get(ctx, "ret", "id-1"); err != nil || rec == nil {
		t.Fatalf("a step-10 row after retention: %+v %v", rec, err)
	}
	if _, err := c.SetRetention(ctx, "ret", api.RetentionConfig{MaxAgeSeconds: -5}); !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("negative max age: %v", err)
	}
}
