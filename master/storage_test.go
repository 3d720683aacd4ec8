package master_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/master"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

// The master reads each live worker's storage metrics from its /metrics
// (behind the API token): after a known workload the counts match it, and
// a worker that does not answer is listed with an error, not dropped.
func TestWorkerStorageMetrics(t *testing.T) {
	const token = "s3cret"
	f := newFixture(t, fixtureOpts{token: token, cfg: master.Config{RefreshInterval: time.Hour, APIToken: token}})
	wcfg, err := worker.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	wcfg.InstanceID, wcfg.APIToken = "w-1", token
	reg := worker.NewRegistry()
	wcat := rollout.NewCatalog(f.data, rollout.ShardID(wcfg.InstanceID), wcfg.StoreOptions())
	t.Cleanup(func() { _ = wcat.Close(context.Background()) })
	ws := worker.NewServer(wcfg, wcat, reg)
	wsrv := httptest.NewServer(ws.Handler())
	t.Cleanup(wsrv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for _, wi := range []coord.WorkerInfo{
		{InstanceID: "w-1", ShardID: wcat.Shard(), Endpoint: wsrv.URL, Version: "test"},
		{InstanceID: "w-2", ShardID: rollout.ShardID("w-2"), Endpoint: "http://127.0.0.1:1", Version: "test"}, // nothing listens
	} {
		go func() { _ = f.c.RegisterWorker(ctx, wi, 10); done <- struct{}{} }()
	}
	t.Cleanup(func() { cancel(); <-done; <-done })

	st := f.create(wcat, "exp")
	const flushes = 3
	for i := 0; i < flushes; i++ {
		appendFlush(t, st, recs(fmt.Sprintf("g%d", i), 4, "ro"))
	}
	var got api.WorkerStorageList
	eventually(t, 10*time.Second, "both workers to be listed", func() bool {
		got = call[api.WorkerStorageList](f, "GET", "/api/v1/workers/storage", "", 200)
		return len(got.Workers) == 2
	})
	w1, w2 := got.Workers[0], got.Workers[1]
	if w1.InstanceID != "w-1" || w1.Error != "" {
		t.Fatalf("w-1: %+v", w1)
	}
	if w1.Seals["flush"] != flushes || w1.PendingGenerations != flushes || w1.EntryRowsTotal != 4*flushes ||
		w1.UnsealedRows != 0 || w1.FencedWriters != 0 || w1.WALPuts+w1.WALSyncs < flushes ||
		(w1.WALPuts > 0) != (w1.WALPutMeanMS > 0) || (w1.WALSyncs > 0) != (w1.WALSyncMeanMS > 0) || w1.SealMeanMS <= 0 {
		t.Fatalf("w-1 metrics after %d flushes of 4 rows: %+v", flushes, w1)
	}
	if w2.InstanceID != "w-2" || w2.Error == "" || w2.WALPuts != 0 {
		t.Fatalf("unreachable w-2: %+v", w2)
	}
}
