package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

// storeVerbsServer starts a worker on a memory store and returns a runner of
// the delete, trajectory and checkout verbs against it, and a client.
func storeVerbsServer(t *testing.T) (run func(args ...string) (string, error), c *client.Client) {
	t.Helper()
	cfg := worker.Config{InstanceID: "cli", APIToken: "tok", MaxBodyBytes: 64 << 20, MaxRecords: 10000, MaxPayloadBytes: 32 << 20}
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("cli"), cfg.StoreOptions())
	srv := httptest.NewServer(worker.NewServer(cfg, catalog, worker.NewRegistry()).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = catalog.Close(context.Background())
	})
	run = func(args ...string) (string, error) {
		t.Helper()
		root := &cobra.Command{Use: "lance-context", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newDeleteCmd(), newTrajectoryCmd(), newCheckoutCmd())
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "--url", srv.URL, "--token", "tok"))
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	return run, client.New(srv.URL, client.WithToken("tok"))
}

func ptr[T any](v T) *T { return &v }

func TestTrajectoryVerb(t *testing.T) {
	run, c := storeVerbsServer(t)
	ctx := context.Background()
	if _, err := c.CreateStore(ctx, "runs"); err != nil {
		t.Fatal(err)
	}
	// Written out of order, one turn merged into the base and two left in the WAL.
	if _, err := c.Append(ctx, "runs", []api.Record{{ID: "t2", RolloutID: "r1", SequenceOrder: 2, Role: "assistant", Content: ptr("four")}}, client.AppendOptions{Flush: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Merge(ctx, "runs"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "runs", []api.Record{
		{ID: "t1", RolloutID: "r1", SequenceOrder: 1, Role: "user", Content: ptr("2+2?")},
		{ID: "t0", RolloutID: "r1", SequenceOrder: 0, Role: "system", Content: ptr("be brief")},
		{ID: "other", RolloutID: "r2", Role: "user", Content: ptr("elsewhere")},
	}, client.AppendOptions{Flush: true}); err != nil {
		t.Fatal(err)
	}

	out, err := run("trajectory", "runs", "r1")
	if err != nil {
		t.Fatalf("trajectory: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[1], "t0") || !strings.HasPrefix(lines[2], "t1") ||
		!strings.HasPrefix(lines[3], "t2") || lines[4] != "3 records in rollout r1" {
		t.Fatalf("trajectory text:\n%s", out)
	}

	out, err = run("trajectory", "runs", "r1", "--json")
	if err != nil {
		t.Fatalf("trajectory --json: %v", err)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r api.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("trajectory --json line %q: %v", l, err)
		}
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "t0,t1,t2" {
		t.Fatalf("trajectory --json ids: %v", ids)
	}

	// An unknown rollout is empty, not an error.
	if out, err := run("trajectory", "runs", "nope"); err != nil || !strings.Contains(out, "0 records in rollout nope") {
		t.Fatalf("empty trajectory: %q %v", out, err)
	}
	if out, err := run("trajectory", "runs", "nope", "--json"); err != nil || out != "" {
		t.Fatalf("empty trajectory --json: %q %v", out, err)
	}
	if _, err := run("trajectory", "missing", "r1"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("trajectory of a missing store: %v", err)
	}
}

func TestCheckoutVerb(t *testing.T) {
	run, c := storeVerbsServer(t)
	ctx := context.Background()
	if _, err := c.CreateStore(ctx, "runs"); err != nil {
		t.Fatal(err)
	}
	var versions []uint64
	for _, id := range []string{"a", "b"} {
		if _, err := c.Append(ctx, "runs", []api.Record{{ID: id, RolloutID: "r"}}, client.AppendOptions{Flush: true}); err != nil {
			t.Fatal(err)
		}
		m, err := c.Merge(ctx, "runs")
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, m.BaseVersion)
	}
	first, latest := versions[0], versions[1]
	if first >= latest {
		t.Fatalf("merges did not advance the base version: %v", versions)
	}
	baseRows := func() int {
		t.Helper()
		p, err := c.List(ctx, "runs", client.ListOptions{Source: api.SourceFragments, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Records)
	}
	if n := baseRows(); n != 2 {
		t.Fatalf("base rows before checkout: %d", n)
	}

	out, err := run("checkout", "runs", itoa(first))
	if err != nil || !strings.Contains(out, "reads pinned to version "+itoa(first)) {
		t.Fatalf("checkout %d: %q %v", first, out, err)
	}
	if n := baseRows(); n != 1 {
		t.Fatalf("base rows while pinned to %d: %d", first, n)
	}

	out, err = run("checkout", "runs", "--latest", "--json")
	if err != nil {
		t.Fatalf("checkout --latest: %v", err)
	}
	var v api.VersionResponse
	// Taking and releasing the pin's lease may commit versions of its own.
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version < latest {
		t.Fatalf("checkout --latest: %q (want version >= %d) %v", out, latest, err)
	}
	if n := baseRows(); n != 2 {
		t.Fatalf("base rows after unpinning: %d", n)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"checkout", "runs"}, "either a VERSION or --latest"},
		{[]string{"checkout", "runs", "3", "--latest"}, "either a VERSION or --latest"},
		{[]string{"checkout", "runs", "0"}, "version >= 1"},
		{[]string{"checkout", "runs", "x"}, `version "x"`},
		{[]string{"checkout", "runs", "999"}, "404"},
		{[]string{"checkout", "missing", "--latest"}, "404"},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestDeleteVerb(t *testing.T) {
	run, c := storeVerbsServer(t)
	ctx := context.Background()
	for _, n := range []string{"keep", "doomed"} {
		if _, err := c.CreateStore(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Append(ctx, "doomed", []api.Record{{ID: "x", RolloutID: "r"}}, client.AppendOptions{Flush: true}); err != nil {
		t.Fatal(err)
	}
	// Without --yes nothing is deleted.
	if _, err := run("delete", "doomed"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("delete without --yes: %v", err)
	}
	if _, err := c.Stats(ctx, "doomed"); err != nil {
		t.Fatalf("the store went without --yes: %v", err)
	}
	if out, err := run("delete", "doomed", "--yes"); err != nil || out != "deleted store doomed\n" {
		t.Fatalf("delete --yes: %q %v", out, err)
	}
	stores, err := c.ListStores(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stores) != 1 || stores[0].Name != "keep" {
		t.Fatalf("stores after delete: %+v", stores)
	}
	if _, err := run("delete", "doomed", "--yes"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("second delete: %v", err)
	}
	if out, err := run("delete", "keep", "--yes", "--json"); err != nil || strings.TrimSpace(out) != `{"deleted":"keep"}` {
		t.Fatalf("delete --json: %q %v", out, err)
	}
}

func TestStoreVerbsRegistered(t *testing.T) {
	root := newRootCmd()
	for _, name := range []string{"delete", "trajectory", "checkout"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Errorf("lance-context %s: not a verb (%v)", name, err)
		}
	}
}

func itoa(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
