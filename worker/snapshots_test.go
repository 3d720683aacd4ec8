package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

func exportIDs(t *testing.T, c *client.Client, store string, o client.ExportOptions) ([]string, *arrow.Schema) {
	t.Helper()
	var ids []string
	var sch *arrow.Schema
	n, err := c.Export(context.Background(), store, o, func(b arrow.RecordBatch) error {
		sch = b.Schema()
		col := b.Column(b.Schema().FieldIndices("id")[0]).(*array.String)
		for i := range col.Len() {
			ids = append(ids, col.Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("export %+v: %v", o, err)
	}
	if int(n) != len(ids) {
		t.Fatalf("export %+v: %d rows counted, %d read", o, n, len(ids))
	}
	slices.Sort(ids)
	return ids, sch
}

// TestSnapshotsAndExportOverHTTP: the snapshot routes and the export,
// through the Go client: a snapshot holds every acknowledged row (sealed
// or not), carries an absolute URI and no credentials, and is read back
// by tag and by version through the export; renew, list, release; bad
// input is a 400 (404 for a missing snapshot) before any byte of a stream.
func TestSnapshotsAndExportOverHTTP(t *testing.T) {
	const secret = "SECRETSECRETdoNotLeak"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIA"+secret)
	ctx := context.Background()
	c, base := lifecycleWorker(t)
	if _, err := c.CreateStore(ctx, "snap"); err != nil {
		t.Fatal(err)
	}
	appendN := func(prefix string, n int, flush bool) {
		var recs []api.Record
		for i := range n {
			recs = append(recs, api.Record{ID: fmt.Sprintf("%s-%03d", prefix, i), RolloutID: prefix})
		}
		if _, err := c.Append(ctx, "snap", recs, client.AppendOptions{Flush: flush}); err != nil {
			t.Fatal(err)
		}
	}
	appendN("merged", 30, true)
	if _, err := c.Merge(ctx, "snap"); err != nil {
		t.Fatal(err)
	}
	appendN("pending", 10, true)
	appendN("unsealed", 5, false)
	all, _ := exportIDs(t, c, "snap", client.ExportOptions{}) // all by default
	if len(all) != 40 {
		t.Fatalf("export of all before the snapshot: %d rows, want 40 (sealed only)", len(all))
	}

	resp, err := http.Post(base+"/api/v1/rollouts/snap/snapshots", "application/json", strings.NewReader(`{"ttl_seconds":600,"holder":"trainer-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || bytes.Contains(raw, []byte(secret)) {
		t.Fatalf("POST snapshots: %d %s", resp.StatusCode, raw)
	}
	var sn api.Snapshot
	if err := json.Unmarshal(raw, &sn); err != nil {
		t.Fatal(err)
	}
	if sn.Tag != api.SnapshotTagPrefix+sn.ID || sn.Lease.ID != sn.ID || sn.Holder != "trainer-1" || sn.Version == 0 ||
		!filepath.IsAbs(sn.URI) || !strings.HasSuffix(sn.URI, "/snap.rollout.lance") || sn.Lease.ExpiresAt.IsZero() {
		t.Fatalf("snapshot %s", raw)
	}
	appendN("after", 3, true) // after the call: in no snapshot read below
	if _, err := c.Merge(ctx, "snap"); err != nil {
		t.Fatal(err)
	}
	byTag, sch := exportIDs(t, c, "snap", client.ExportOptions{Snapshot: sn.Tag, Columns: []string{"rollout_id", "id"}})
	byVersion, _ := exportIDs(t, c, "snap", client.ExportOptions{Snapshot: fmt.Sprint(sn.Version)})
	if len(byTag) != 45 || !slices.Equal(byTag, byVersion) || sch.NumFields() != 2 || sch.Field(0).Name != "rollout_id" {
		t.Fatalf("snapshot by tag: %d rows (schema %v), by version %d, want 45", len(byTag), sch, len(byVersion))
	}
	filtered, _ := exportIDs(t, c, "snap", client.ExportOptions{Snapshot: sn.Tag, Filters: map[string]string{"rollout_id": "unsealed"}})
	if len(filtered) != 5 || filtered[0] != "unsealed-000" {
		t.Fatalf("filtered export: %v", filtered)
	}

	got, err := c.Snapshot(ctx, "snap", sn.ID)
	if err != nil || got.Version != sn.Version || got.Tag != sn.Tag {
		t.Fatalf("GET snapshot: %+v %v", got, err)
	}
	renewed, err := c.RenewSnapshot(ctx, "snap", sn.ID, 1200)
	if err != nil || !renewed.Lease.ExpiresAt.After(sn.Lease.ExpiresAt) {
		t.Fatalf("renew: %+v %v", renewed, err)
	}
	list, err := c.Snapshots(ctx, "snap")
	if err != nil || len(list) != 1 || list[0].ID != sn.ID {
		t.Fatalf("list: %+v %v", list, err)
	}

	// Refused before a byte: JSON errors, not Arrow streams.
	for _, tc := range []struct {
		query  string
		status int
		want   string
	}{
		{"columns=id,nope", 400, `no column \"nope\"`},
		{"columns=binary_payload", 400, "blob"},
		{"columns=id,,rollout_id", 400, "empty name"},
		{"reward=1", 400, `cannot filter on \"reward\"`},
		{`filters={"role":1}`, 400, "must be a string"},
		{"source=everything", 400, "not one of"},
		{"limit=5", 400, "streams every matching row"},
		{"snapshot=" + sn.Tag + "&source=all", 400, "source fragments"},
		{"snapshot=no-such-tag", 404, "NOT_FOUND"},
		{"snapshot=99999", 404, "NOT_FOUND"},
		{"snapshot=", 400, "snapshot is empty"},
	} {
		resp, err := http.Get(base + "/api/v1/rollouts/snap/export?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(raw), tc.want) || resp.Header.Get("Content-Type") == api.ArrowStream {
			t.Errorf("export?%s: %d %s %s, want %d with %q", tc.query, resp.StatusCode, resp.Header.Get("Content-Type"), raw, tc.status, tc.want)
		}
	}
	if _, err := c.CreateSnapshot(ctx, "snap", -1, ""); !client.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("a negative ttl: %v", err)
	}

	if err := c.ReleaseSnapshot(ctx, "snap", sn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(ctx, "snap", sn.ID); !client.IsNotFound(err) {
		t.Fatalf("a released snapshot: %v", err)
	}
	if _, err := c.Export(ctx, "snap", client.ExportOptions{Snapshot: sn.Tag}, func(arrow.RecordBatch) error { return nil }); !client.IsNotFound(err) {
		t.Fatalf("export of a released snapshot's tag: %v", err)
	}
	// An empty result is a stream of the schema alone.
	none, sch := exportIDs(t, c, "snap", client.ExportOptions{Filters: map[string]string{"rollout_id": "none"}})
	if len(none) != 0 || sch != nil {
		t.Fatalf("empty export: %v %v", none, sch)
	}
}

// TestExportCutMidStreamIsAnError: a storage failure after the first batch
// was sent aborts the response: the Go client reports an error, never a
// short stream that looks whole (the trailer never comes).
func TestExportCutMidStreamIsAnError(t *testing.T) {
	ctx := context.Background()
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.IndexColumns = []string{}
	mem := objstore.NewMemory()
	srv := httptest.NewServer(NewServer(cfg, rollout.NewCatalog(mem, rollout.ShardID("t"), cfg.StoreOptions()), NewRegistry()).Handler())
	defer srv.Close()
	c := client.New(srv.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if _, err := c.CreateStore(ctx, "cut"); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 200)
	for f := range 2 { // two merges: two fragments, the first larger than the response's buffer
		var recs []api.Record
		for i := range 8000 - 7900*f {
			recs = append(recs, api.Record{ID: fmt.Sprintf("f%d-%05d", f, i), RolloutID: "r", Content: &filler})
		}
		if _, err := c.Append(ctx, "cut", recs, client.AppendOptions{Flush: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Merge(ctx, "cut"); err != nil {
			t.Fatal(err)
		}
	}
	root := objstore.Sub(mem, "cut.rollout.lance/")
	d, err := table.Open(ctx, root)
	if err != nil || len(d.Fragments()) != 2 {
		t.Fatalf("fragments: %v %v", d, err)
	}
	if err := root.Delete(ctx, "data/"+d.Fragments()[1].GetFiles()[0].GetPath()); err != nil {
		t.Fatal(err)
	}
	var got int64
	n, err := c.Export(ctx, "cut", client.ExportOptions{Source: api.SourceFragments}, func(b arrow.RecordBatch) error {
		got += b.NumRows()
		return nil
	})
	if err == nil {
		t.Fatalf("an export missing a fragment's file read as whole: %d rows", n)
	}
	// The stream had begun (200, bytes sent): the reader, not the request,
	// found the cut.
	if !strings.Contains(err.Error(), `export of "cut" after`) && !errors.Is(err, client.ErrExportCut) {
		t.Fatalf("the failure came before the stream began (%v): the test needs it after", err)
	}
	t.Logf("cut after %d rows: %v", got, err)
}

// TestSnapshotTagPrefixReserved: the tags routes refuse a name in the
// snapshots' reserved space (api.SnapshotTagPrefix) with a 400 saying why
// and what to do instead, and change nothing: a user's tag there would be
// deleted by the next cleanup as an expired snapshot's, and deleting a
// snapshot's tag by hand would leave its lease keeping a version no tag
// names. Other names are untouched; a snapshot's tag is still read.
func TestSnapshotTagPrefixReserved(t *testing.T) {
	ctx := context.Background()
	c, base := lifecycleWorker(t)
	if _, err := c.CreateStore(ctx, "res"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "res", []api.Record{{ID: "a", RolloutID: "r"}}, client.AppendOptions{Flush: true}); err != nil {
		t.Fatal(err)
	}
	sn, err := c.CreateSnapshot(ctx, "res", 600, "")
	if err != nil {
		t.Fatal(err)
	}

	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(raw)
	}
	for _, tc := range []struct {
		method, path, body string
		want               []string
	}{
		{"POST", "/api/v1/rollouts/res/tags", `{"name":"lc-snapshot-mine"}`, []string{"INVALID_REQUEST", "reserved for snapshots", "/api/v1/rollouts/res/snapshots"}},
		{"POST", "/api/v1/rollouts/res/tags", `{"name":"lc-snapshot-"}`, []string{"reserved for snapshots"}},
		{"POST", "/api/v1/rollouts/res/tags", `{"name":"` + sn.Tag + `","version":1}`, []string{"reserved for snapshots"}},
		{"DELETE", "/api/v1/rollouts/res/tags/" + sn.Tag, "", []string{"INVALID_REQUEST", "is snapshot " + sn.ID + "'s", "DELETE /api/v1/rollouts/res/snapshots/" + sn.ID}},
		{"DELETE", "/api/v1/rollouts/res/tags/lc-snapshot-nosuch", "", []string{"reserved for snapshots"}},
	} {
		status, raw := do(tc.method, tc.path, tc.body)
		if status != http.StatusBadRequest {
			t.Errorf("%s %s %s: %d %s, want 400", tc.method, tc.path, tc.body, status, raw)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(raw, w) {
				t.Errorf("%s %s %s: %s lacks %q", tc.method, tc.path, tc.body, raw, w)
			}
		}
	}
	// Nothing changed: the snapshot's tag is still there, at its version,
	// and no other tag was made.
	tags, err := c.Tags(ctx, "res")
	if err != nil || len(tags) != 1 || tags[0].Name != sn.Tag || tags[0].Version != sn.Version {
		t.Fatalf("tags after the refusals: %+v %v", tags, err)
	}
	if status, raw := do("GET", "/api/v1/rollouts/res/tags/"+sn.Tag, ""); status != http.StatusOK || !strings.Contains(raw, sn.Tag) {
		t.Fatalf("GET a snapshot's tag: %d %s", status, raw)
	}
	// Names that only look alike are anyone's.
	for _, name := range []string{"lc-snapshot", "my-lc-snapshot-1", "LC-SNAPSHOT-x"} {
		if _, err := c.CreateTag(ctx, "res", name, 0); err != nil {
			t.Fatalf("tag %s: %v", name, err)
		}
		if err := c.DeleteTag(ctx, "res", name); err != nil {
			t.Fatalf("delete tag %s: %v", name, err)
		}
	}
	if err := c.ReleaseSnapshot(ctx, "res", sn.ID); err != nil {
		t.Fatal(err)
	}
	if tags, err := c.Tags(ctx, "res"); err != nil || len(tags) != 0 {
		t.Fatalf("tags after release: %+v %v", tags, err)
	}
}
