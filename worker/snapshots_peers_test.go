package worker_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/devmode"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

// TestSnapshotSealsOtherWorkers: two workers write one store (each its own
// shard) and register in a real etcd; a snapshot on one holds what the
// other acknowledged before the call, sealed or not (the other worker was
// asked, at its registered endpoint and with the shared token, to seal and
// merge), and lists nothing as excluded. With the other worker's endpoint
// down (its shard still live), the snapshot lists that shard with the
// reason instead of claiming to hold its rows.
func TestSnapshotSealsOtherWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, etcdURL, err := devmode.StartEtcd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	root := objstore.NewMemory()

	type node struct {
		c   *client.Client
		srv *httptest.Server
	}
	start := func(instance string) node {
		t.Helper()
		cfg, err := worker.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		cfg.IndexColumns, cfg.InstanceID, cfg.APIToken = []string{}, instance, "tok"
		so := cfg.StoreOptions()
		so.OwnerID = "process-" + instance // two processes, as in a deployment (one process's catalogs share an owner id)
		cat := rollout.NewCatalog(root, rollout.ShardID(instance), so)
		t.Cleanup(func() { _ = cat.Close(context.Background()) })
		srv := worker.NewServer(cfg, cat, worker.NewRegistry())
		co, err := coord.Connect(ctx, coord.Config{Endpoints: []string{etcdURL}, Prefix: "/peers-test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { co.Close() })
		srv.Registry = co
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		go func() {
			_ = co.RegisterWorker(ctx, coord.WorkerInfo{InstanceID: instance, ShardID: cat.Shard(), Endpoint: ts.URL}, 10)
		}()
		return node{client.New(ts.URL, client.WithToken("tok"), client.WithRetry(client.RetryPolicy{MaxAttempts: 1})), ts}
	}
	a, b := start("wa"), start("wb")
	co, err := coord.Connect(ctx, coord.Config{Endpoints: []string{etcdURL}, Prefix: "/peers-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ws, err := co.ListWorkers(ctx)
		if err == nil && len(ws) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers registered: %v %v", ws, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if _, err := a.c.CreateStore(ctx, "multi"); err != nil {
		t.Fatal(err)
	}
	put := func(n node, prefix string, count int, flush bool) {
		t.Helper()
		var recs []api.Record
		for i := range count {
			recs = append(recs, api.Record{ID: fmt.Sprintf("%s-%03d", prefix, i), RolloutID: prefix})
		}
		if _, err := n.c.Append(ctx, "multi", recs, client.AppendOptions{Flush: flush}); err != nil {
			t.Fatal(err)
		}
	}
	put(a, "a", 5, true)
	put(b, "b-sealed", 4, true)
	put(b, "b-unsealed", 3, false) // acknowledged, in b's memtable alone
	put(a, "a-unsealed", 2, false)

	sn, err := a.c.CreateSnapshot(ctx, "multi", 600, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sn.ExcludedShards) != 0 {
		t.Fatalf("excluded %+v: b was reachable", sn.ExcludedShards)
	}
	put(b, "b-after", 2, true) // after the call: not in the version
	ids := map[string]bool{}
	if _, err := a.c.Export(ctx, "multi", client.ExportOptions{Snapshot: sn.Tag, Columns: []string{"id"}}, func(rb arrow.RecordBatch) error {
		col := rb.Column(0).(*array.String)
		for i := range col.Len() {
			ids[col.Value(i)] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a-000", "a-unsealed-001", "b-sealed-003", "b-unsealed-000", "b-unsealed-002"} {
		if !ids[id] {
			t.Fatalf("snapshot version %d lacks %s (%d rows)", sn.Version, id, len(ids))
		}
	}
	if len(ids) != 5+4+3+2 {
		t.Fatalf("snapshot version %d holds %d rows, want 14", sn.Version, len(ids))
	}

	// b's endpoint goes away, its process (and shard heartbeat) stays: the
	// snapshot says what it could not cover, and why.
	put(b, "b-stranded", 2, true)
	b.srv.Close()
	sn2, err := a.c.CreateSnapshot(ctx, "multi", 600, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sn2.ExcludedShards) != 1 || sn2.ExcludedShards[0].ShardID != rollout.ShardID("wb") ||
		sn2.ExcludedShards[0].PendingRows != 4 || !strings.Contains(sn2.ExcludedShards[0].Reason, "seal") {
		t.Fatalf("with b unreachable: excluded %+v, want shard wb, 4 pending rows, a reason", sn2.ExcludedShards)
	}
}
