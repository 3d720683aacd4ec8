package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

// TestSnapshotVerb: lance-context snapshot create, get, list, renew and
// release against a worker, in text and JSON; the snapshot holds the rows
// appended before it, and a released one is gone.
func TestSnapshotVerb(t *testing.T) {
	cfg := worker.Config{InstanceID: "cli", APIToken: "tok", MaxBodyBytes: 64 << 20, MaxRecords: 10000, MaxPayloadBytes: 32 << 20}
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("cli"), cfg.StoreOptions())
	srv := httptest.NewServer(worker.NewServer(cfg, catalog, worker.NewRegistry()).Handler())
	defer srv.Close()
	defer catalog.Close(context.Background())

	run := func(args ...string) (string, error) {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetIn(strings.NewReader(""))
		root.SetArgs(append(args, "--url", srv.URL, "--token", "tok"))
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	snap := func(out string) api.Snapshot {
		t.Helper()
		var sn api.Snapshot
		if err := json.Unmarshal([]byte(out), &sn); err != nil {
			t.Fatalf("not a snapshot: %q: %v", out, err)
		}
		return sn
	}

	must("create", "runs")
	// Appended without a flush: the snapshot flushes and merges them.
	root := newRootCmd()
	root.SetIn(strings.NewReader("{\"rollout_id\":\"r1\"}\n{\"rollout_id\":\"r2\"}\n"))
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"append", "runs", "-", "--url", srv.URL, "--token", "tok"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	sn := snap(must("snapshot", "create", "runs", "--ttl", "2h", "--holder", "trainer-1", "--json"))
	if sn.ID == "" || sn.Version == 0 || sn.Tag != api.SnapshotTagPrefix+sn.ID || sn.Lease.ID != sn.ID || sn.Holder != "trainer-1" || sn.URI == "" {
		t.Fatalf("create: %+v", sn)
	}
	if d := sn.Lease.ExpiresAt.Sub(before); d < 2*time.Hour-time.Minute || d > 2*time.Hour+time.Minute {
		t.Fatalf("create --ttl 2h: expires in %v", d)
	}
	st, err := catalog.Open(context.Background(), "runs")
	if err != nil {
		t.Fatal(err)
	}
	page, err := st.List(context.Background(), rollout.ListOptions{Source: rollout.SourceFragments, Version: sn.Version, Limit: 100})
	if err != nil || len(page.Records) != 2 {
		t.Fatalf("rows at the snapshot's version: %v %v", page, err)
	}

	// Text: everything a reader needs, one field a line.
	out := must("snapshot", "create", "runs")
	for _, want := range []string{"created snapshot of runs", "uri:", "version: " + strconv.FormatUint(sn.Version, 10), "tag:     " + api.SnapshotTagPrefix, "lease:", "(expires "} {
		if !strings.Contains(out, want) {
			t.Fatalf("create text lacks %q:\n%s", want, out)
		}
	}
	out = must("snapshot", "get", "runs", sn.ID)
	for _, want := range []string{"snapshot of runs", "uri:     " + sn.URI, "tag:     " + sn.Tag, "lease:   " + sn.ID, "holder:  trainer-1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("get text lacks %q:\n%s", want, out)
		}
	}
	if g := snap(must("snapshot", "get", "runs", sn.ID, "--json")); g.ID != sn.ID || g.Version != sn.Version || g.Tag != sn.Tag {
		t.Fatalf("get --json: %+v", g)
	}

	var list api.SnapshotsResponse
	if err := json.Unmarshal([]byte(must("snapshot", "list", "runs", "--json")), &list); err != nil || len(list.Snapshots) != 2 {
		t.Fatalf("list --json: %+v %v", list, err)
	}
	if out := must("snapshot", "list", "runs"); !strings.HasPrefix(out, "ID\tVERSION\tTAG\tEXPIRES") || !strings.Contains(out, sn.ID+"\t"+strconv.FormatUint(sn.Version, 10)+"\t"+sn.Tag) {
		t.Fatalf("list text:\n%s", out)
	}

	r := snap(must("snapshot", "renew", "runs", sn.ID, "--ttl", "5h", "--json"))
	if !r.Lease.ExpiresAt.After(sn.Lease.ExpiresAt.Add(2*time.Hour)) || r.Version != sn.Version {
		t.Fatalf("renew --ttl 5h: %v, was %v", r.Lease.ExpiresAt, sn.Lease.ExpiresAt)
	}
	if out := must("snapshot", "renew", "runs", sn.ID); !strings.Contains(out, "renewed snapshot of runs") || !strings.Contains(out, "lease:   "+sn.ID) {
		t.Fatalf("renew text:\n%s", out)
	}
	if _, err := run("snapshot", "create", "runs", "--ttl", "1500ms"); err == nil || !strings.Contains(err.Error(), "whole number of seconds") {
		t.Fatalf("--ttl 1500ms: %v", err)
	}
	if _, err := run("snapshot", "create", "runs", "--ttl", "200h"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("--ttl 200h: %v", err)
	}

	if out := must("snapshot", "release", "runs", sn.ID); out != "released snapshot "+sn.ID+" of runs\n" {
		t.Fatalf("release: %q", out)
	}
	if _, err := run("snapshot", "get", "runs", sn.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("get after release: %v", err)
	}
	if err := json.Unmarshal([]byte(must("snapshot", "list", "runs", "--json")), &list); err != nil || len(list.Snapshots) != 1 || list.Snapshots[0].ID == sn.ID {
		t.Fatalf("list after release: %+v %v", list, err)
	}
	if _, err := run("snapshot", "release", "runs", sn.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("second release: %v", err)
	}
}
