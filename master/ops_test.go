package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/master"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// keys checks that a decoded JSON object has every key (the reference's
// DTO field names).
func keys(t *testing.T, what string, m map[string]json.RawMessage, want ...string) {
	t.Helper()
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Fatalf("%s without %q: %v", what, k, m)
		}
	}
}

type obj = map[string]json.RawMessage

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a string: %v", raw, err)
	}
	return s
}

// TestReferenceOpsRoutes replays the reference master's operations calls
// and checks the answers carry its DTO field names: compact status
// (none, then done with the fragment counts), rescan of one store and of
// all, merge progress, the scheduler views, the task list page and the
// ExperimentSummary names.
func TestReferenceOpsRoutes(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour, SchedulerInterval: time.Hour}})
	w := f.catalog("w1")
	fragments(t, f.create(w, "ops"), 3)

	st := call[obj](f, "GET", "/api/v1/experiments/ops/compact/status", "", 200)
	keys(t, "compact status", st, "state")
	if str(t, st["state"]) != "none" {
		t.Fatalf("compact status before any compaction: %v", st)
	}
	f.status("GET", "/api/v1/experiments/nope/compact/status", "", 404)

	mp := call[obj](f, "GET", "/api/v1/merge-progress?target=ops", "", 200)
	keys(t, "merge progress", mp, "target", "status", "sampled_at_ms")
	if str(t, mp["status"]) != "no_active_record" || str(t, mp["target"]) != "ops" {
		t.Fatalf("merge progress with no merge: %v", mp)
	}
	for _, q := range []string{"", "?target=", "?target=" + strings.Repeat("x", 513)} {
		if e := call[errorBody](f, "GET", "/api/v1/merge-progress"+q, "", 400); e.Error.Code != "INVALID_REQUEST" {
			t.Fatalf("merge-progress%s: %+v", q, e)
		}
	}
	call[obj](f, "GET", "/api/v1/merge-progress?target="+strings.Repeat("x", 512), "", 200)

	x := call[obj](f, "POST", "/api/v1/experiments/ops/rescan", "", 200)
	keys(t, "rescan", x, "name", "row_count", "fragment_count", "pending_wal_generations", "compacted", "last_updated", "last_compaction", "scanned_at", "stale")
	if string(x["row_count"]) != "3" || string(x["fragment_count"]) != "3" || string(x["pending_wal_generations"]) != "0" || string(x["compacted"]) != "false" || string(x["stale"]) != "false" {
		t.Fatalf("rescan: %v", x)
	}
	f.status("POST", "/api/v1/experiments/nope/rescan", "", 404)
	fragments(t, f.create(w, "ops2"), 1)
	all := call[obj](f, "POST", "/api/v1/rescan", "", 200)
	keys(t, "rescan all", all, "scanned")
	if string(all["scanned"]) != "2" {
		t.Fatalf("rescan all: %v", all)
	}

	// A compaction, run by the master.
	f.run()
	tk := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"compact","target":"ops"}`, 201)
	f.waitTask(tk.ID)
	st = call[obj](f, "GET", "/api/v1/experiments/ops/compact/status", "", 200)
	keys(t, "compact status", st, "state", "task_id", "fragments_removed", "fragments_added")
	if str(t, st["state"]) != "done" || str(t, st["task_id"]) != tk.ID || string(st["fragments_removed"]) != "3" || string(st["fragments_added"]) != "1" {
		t.Fatalf("compact status after the compaction: %v", st)
	}
	x = call[obj](f, "GET", "/api/v1/experiments/ops?fresh=true", "", 200)
	if string(x["compacted"]) != "true" || string(x["fragment_count"]) != "1" {
		t.Fatalf("after the compaction: %v", x)
	}

	// The task list page and a task record, with the reference's names.
	page := call[obj](f, "GET", "/api/v1/tasks?limit=1", "", 200)
	keys(t, "task list", page, "tasks", "total", "limit", "offset")
	var tasks []obj
	if err := json.Unmarshal(page["tasks"], &tasks); err != nil || len(tasks) != 1 || string(page["limit"]) != "1" {
		t.Fatalf("task page %v (%v)", page, err)
	}
	done := call[obj](f, "GET", "/api/v1/tasks/"+tk.ID, "", 200)
	keys(t, "task", done, "id", "kind", "target", "state", "detail", "enqueued_at", "started_at", "finished_at", "duration_ms")
	if str(t, done["detail"]) != "removed 3 / added 1 fragments" || str(t, done["target"]) != "ops" {
		t.Fatalf("task %v", done)
	}
	f.status("GET", "/api/v1/tasks?limit=0", "", 400)

	// Scheduler views.
	if cs := call[[]obj](f, "GET", "/api/v1/scheduler/cooldowns", "", 200); len(cs) != 0 {
		t.Fatalf("cooldowns without failures: %v", cs)
	}
	if rs := call[[]obj](f, "GET", "/api/v1/scheduler/repairs", "", 200); len(rs) != 0 {
		t.Fatalf("repairs without any: %v", rs)
	}
	var dm obj
	eventually(t, 20*time.Second, "this master to lead", func() bool {
		dm = call[obj](f, "GET", "/api/v1/scheduler/demand", "", 200)
		return string(dm["leader"]) == "true"
	})
	keys(t, "demand", dm, "leader", "tables")
	var tables []obj
	if err := json.Unmarshal(dm["tables"], &tables); err != nil || len(tables) != 2 {
		t.Fatalf("demand tables %s (%v)", dm["tables"], err)
	}
	for _, tb := range tables {
		keys(t, "demand table", tb, "target", "pending_wal_generations", "merge_lag_seconds", "score")
	}
	one := call[api.SchedulerDemand](f, "GET", "/api/v1/scheduler/demand?target=ops2", "", 200)
	if len(one.Tables) != 1 || one.Tables[0].Target != "ops2" {
		t.Fatalf("demand of one target: %+v", one)
	}

	// The listing carries both names.
	var lp obj
	lp = call[obj](f, "GET", "/api/v1/experiments", "", 200)
	var exps []obj
	if err := json.Unmarshal(lp["experiments"], &exps); err != nil || len(exps) != 2 {
		t.Fatalf("experiments %v", lp)
	}
	for _, e := range exps {
		keys(t, "experiment", e, "name", "rows", "row_count", "fragments", "fragment_count", "pending_generations", "pending_wal_generations", "compacted", "last_compaction")
	}
}

// TestMergeProgressRoute: a queued merge is progress_unknown; a running one
// reports what it has done (read through a slow disk, so it runs long
// enough to be seen); once done there is no active record.
func TestMergeProgressRoute(t *testing.T) {
	slow := &slowStore{delay: 150 * time.Millisecond, slow: map[string]bool{}}
	f := newFixture(t, fixtureOpts{
		cfg:  master.Config{RefreshInterval: time.Hour, SchedulerInterval: time.Hour},
		wrap: func(s objstore.Store) objstore.Store { slow.Store = s; return slow },
	})
	backlog(t, f, "gone", "prog", 3)
	tk := call[taskReply](f, "POST", "/api/v1/experiments/prog/merge", "", 202).Task
	mp := call[api.MergeProgress](f, "GET", "/api/v1/merge-progress?target=prog", "", 200)
	if mp.Status != api.MergeProgressUnknown || mp.TaskID != tk.ID || mp.SampledAtMS == 0 {
		t.Fatalf("queued merge: %+v", mp)
	}
	slow.set("prog.rollout.lance/_lc_wal/", true)
	f.run()
	eventually(t, 30*time.Second, "the running merge to report", func() bool {
		mp = call[api.MergeProgress](f, "GET", "/api/v1/merge-progress?target=prog", "", 200)
		return mp.Status == api.MergeProgressReported
	})
	if p := mp.Progress; p == nil || mp.TaskID != tk.ID || p.ShardsTotal != 1 || p.PendingGenerations != 3 || p.StartedAtMS == 0 {
		t.Fatalf("running merge: %+v %+v", mp, mp.Progress)
	}
	slow.set("prog.rollout.lance/_lc_wal/", false)
	f.waitTask(tk.ID)
	if mp = call[api.MergeProgress](f, "GET", "/api/v1/merge-progress?target=prog", "", 200); mp.Status != api.MergeProgressNoActiveRecord {
		t.Fatalf("after the merge: %+v", mp)
	}
}

// TestRepairDropsFragmentsWithMissingDataFiles: a store one of whose data
// files was deleted fails to read; a repair task drops exactly that
// fragment in one Lance commit (the other rows stay readable), records
// it, and a second repair finds nothing to do.
func TestRepairDropsFragmentsWithMissingDataFiles(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour, SchedulerInterval: time.Hour}})
	st := f.create(f.catalog("w1"), "rep")
	fragments(t, st, 3)
	ds, err := table.Open(f.ctx, st.Root())
	if err != nil {
		t.Fatal(err)
	}
	frags := ds.Fragments()
	if len(frags) != 3 {
		t.Fatalf("%d fragments, want 3", len(frags))
	}
	lost := frags[1]
	lostKey := "data/" + lost.GetFiles()[0].GetPath()
	if err := st.Root().Delete(f.ctx, lostKey); err != nil {
		t.Fatal(err)
	}
	if resp, b := f.request("GET", "/api/v1/experiments/rep/records?limit=100", ""); resp.StatusCode < 500 {
		t.Fatalf("a read with a data file missing answered %d %s", resp.StatusCode, b)
	}
	f.run()
	tk := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"repair","target":"rep"}`, 201)
	done := f.waitTask(tk.ID)
	var rec api.RepairRecord
	if err := json.Unmarshal(done.Result, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.FragmentsDropped != 1 || len(rec.Dropped) != 1 || rec.Dropped[0].ID != lost.GetId() || !slices.Equal(rec.Dropped[0].MissingFiles, []string{lostKey}) ||
		rec.RowsDropped != 1 || rec.ReadVersion != ds.Version() || rec.CommittedVersion != ds.Version()+1 || rec.Target != "rep" || rec.TaskID != tk.ID {
		t.Fatalf("repair result %+v", rec)
	}
	if !strings.Contains(done.Detail, "dropped 1 fragments") {
		t.Fatalf("repair detail %q", done.Detail)
	}
	after, err := table.Open(f.ctx, st.Root())
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, fr := range after.Fragments() {
		ids = append(ids, fr.GetId())
	}
	if !slices.Equal(ids, []uint64{frags[0].GetId(), frags[2].GetId()}) {
		t.Fatalf("fragments after the repair %v", ids)
	}
	if p := call[recordsPage](f, "GET", "/api/v1/experiments/rep/records?limit=100", "", 200); len(p.Records) != 2 {
		t.Fatalf("records after the repair: %d, want 2", len(p.Records))
	}
	rs := call[[]obj](f, "GET", "/api/v1/scheduler/repairs", "", 200)
	if len(rs) != 1 {
		t.Fatalf("repairs %v", rs)
	}
	keys(t, "repair record", rs[0], "target", "at_ms", "fragments_dropped", "detail", "repaired_at_ms", "read_version", "committed_version", "triggered_by", "dropped")
	if string(rs[0]["fragments_dropped"]) != "1" || str(t, rs[0]["target"]) != "rep" {
		t.Fatalf("repair record %v", rs[0])
	}
	// Again: nothing to do, no commit, no record.
	again := f.waitTask(call[taskReply](f, "POST", "/api/v1/experiments/rep/repair", "", 202).Task.ID)
	var rec2 api.RepairRecord
	if err := json.Unmarshal(again.Result, &rec2); err != nil || rec2.FragmentsDropped != 0 || rec2.CommittedVersion != rec.CommittedVersion {
		t.Fatalf("second repair %+v (%v)", rec2, err)
	}
	if rs := call[[]obj](f, "GET", "/api/v1/scheduler/repairs?target=rep", "", 200); len(rs) != 1 {
		t.Fatalf("repairs after a no-op repair: %v", rs)
	}
}

// TestTaskChainOverHTTP: the optimize chain (merge_wal, then compact
// depending on it, then index_id depending on that) runs in order, each
// step after the one it depends on finished; an unknown dependency is a
// 404. With two task slots, two tasks of one store never overlap.
func TestTaskChainOverHTTP(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour, SchedulerInterval: time.Hour, TaskConcurrency: 2}})
	fragments(t, f.create(f.catalog("w3"), "chain"), 2)
	gone := mustOpen(t, f.catalog("gone"), "chain")
	for i := 0; i < 3; i++ {
		appendFlush(t, gone, recs(fmt.Sprintf("p%d", i), 1, "ro"))
	}
	fragments(t, f.create(f.catalog("w2"), "other"), 2)
	if e := call[errorBody](f, "POST", "/api/v1/tasks", `{"kind":"compact","target":"chain","depends_on":"no-such-task"}`, 404); e.Error.Code != "NOT_FOUND" {
		t.Fatalf("unknown dependency: %+v", e)
	}
	f.status("POST", "/api/v1/tasks", `{"kind":"compact","target":"chain","depends_on":7}`, 400)
	merge := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"merge_wal","target":"chain"}`, 201)
	compact := call[coord.Task](f, "POST", "/api/v1/tasks", fmt.Sprintf(`{"kind":"compact","target":"chain","depends_on":%q}`, merge.ID), 201)
	index := call[coord.Task](f, "POST", "/api/v1/tasks", fmt.Sprintf(`{"kind":"index_id","target":"chain","depends_on":[%q]}`, compact.ID), 201)
	if !slices.Equal(compact.DependsOn, []string{merge.ID}) || !slices.Equal(index.DependsOn, []string{compact.ID}) {
		t.Fatalf("depends_on %v %v", compact.DependsOn, index.DependsOn)
	}
	cleanup := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"cleanup","target":"chain"}`, 201)
	otherMerge := call[coord.Task](f, "POST", "/api/v1/tasks", `{"kind":"compact","target":"other"}`, 201)
	f.run()
	var ts []coord.Task
	for _, id := range []string{merge.ID, compact.ID, index.ID, cleanup.ID, otherMerge.ID} {
		ts = append(ts, f.waitTask(id))
	}
	for i := 1; i < 3; i++ {
		if *ts[i].StartedAt < *ts[i-1].FinishedAt {
			t.Fatalf("%s started at %d, before %s finished at %d", ts[i].Kind, *ts[i].StartedAt, ts[i-1].Kind, *ts[i-1].FinishedAt)
		}
	}
	for i := 0; i < 4; i++ {
		for j := i + 1; j < 4; j++ {
			a, b := ts[i], ts[j]
			if *a.StartedAt < *b.FinishedAt && *b.StartedAt < *a.FinishedAt {
				t.Fatalf("two tasks of one store ran at once: %s [%d,%d] and %s [%d,%d]", a.Kind, *a.StartedAt, *a.FinishedAt, b.Kind, *b.StartedAt, *b.FinishedAt)
			}
		}
	}
	if x := call[master.Experiment](f, "GET", "/api/v1/experiments/chain?fresh=true", "", 200); x.PendingGenerations != 0 || x.Fragments != 1 || x.Rows != 5 || !x.Compacted {
		t.Fatalf("after the chain: %+v", x)
	}
}

// TestCooldownsRoute: the cooldown policy comes from the master's config,
// and GET /api/v1/scheduler/cooldowns lists the failing (kind, store) with
// the reference's TaskCooldown names.
func TestCooldownsRoute(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: time.Hour, SchedulerInterval: time.Hour,
		Cooldown: coord.CooldownPolicy{AfterFailures: 2, Base: 100 * time.Second, Max: 300 * time.Second}}})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.c.SetClock(func() time.Time { return now })
	lease, err := f.c.Client().Grant(f.ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		tk, _, err := f.c.Enqueue(f.ctx, coord.KindCompact, "bad", "api")
		if err != nil {
			t.Fatal(err)
		}
		// Past the retry backoff, as if it had elapsed.
		resp, _ := f.c.Client().Get(f.ctx, f.prefix+"/tasks/"+tk.ID)
		var m map[string]any
		_ = json.Unmarshal(resp.Kvs[0].Value, &m)
		m["not_before"] = time.Now().Add(-time.Second).UTC()
		b, _ := json.Marshal(m)
		_, _ = f.c.Client().Put(f.ctx, f.prefix+"/tasks/"+tk.ID, string(b))
		run, err := f.c.Claim(f.ctx, lease.ID)
		if err != nil || run == nil {
			t.Fatalf("claim %v %v", run, err)
		}
		if err := f.c.Finish(f.ctx, run, nil, fmt.Errorf("failure %d", i)); err != nil {
			t.Fatal(err)
		}
		cs := call[[]obj](f, "GET", "/api/v1/scheduler/cooldowns", "", 200)
		if len(cs) != 1 {
			t.Fatalf("cooldowns %v", cs)
		}
		keys(t, "cooldown", cs[0], "kind", "target", "failures", "until_ms", "last_error")
		want := map[int]string{1: "null", 2: fmt.Sprint(now.Add(100 * time.Second).UnixMilli()), 3: fmt.Sprint(now.Add(200 * time.Second).UnixMilli()), 4: fmt.Sprint(now.Add(300 * time.Second).UnixMilli())}[i]
		if string(cs[0]["failures"]) != fmt.Sprint(i) || string(cs[0]["until_ms"]) != want || str(t, cs[0]["last_error"]) != fmt.Sprintf("failure %d", i) || str(t, cs[0]["target"]) != "bad" {
			t.Fatalf("after failure %d: %v, want until_ms %s", i, cs[0], want)
		}
	}
}

// TestStatsPersistedAcrossRestart: a master keeps store statistics in etcd;
// a master started after it serves them at once, marked stale and
// restored, while the store itself cannot be read, and fresh ones once it
// can.
func TestStatsPersistedAcrossRestart(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: 100 * time.Millisecond, SchedulerInterval: time.Hour}})
	st := f.create(f.catalog("w1"), "kept")
	fragments(t, st, 2)
	appendFlush(t, st, recs("p", 3, "ro"))
	f.run()
	eventually(t, 15*time.Second, "the first master to read the store", func() bool {
		x := byName(call[listPage](f, "GET", "/api/v1/experiments", "", 200), "kept")
		return x != nil && !x.Stale && x.Rows == 5
	})

	// The second master reads the same data through a disk that hangs for
	// this store.
	slow := &slowStore{Store: f.data, delay: time.Hour, slow: map[string]bool{"kept.rollout.lance/": true}}
	c2, err := coord.Connect(f.ctx, coord.Config{Endpoints: []string{etcdEndpoint(t)}, Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	cat2 := rollout.NewCatalog(slow, rollout.ShardID("master-2"), rollout.Options{})
	reg := prometheus.NewRegistry()
	m2 := master.New(master.Config{ID: "m2", RefreshInterval: 100 * time.Millisecond, StatsTimeout: 200 * time.Millisecond, SchedulerInterval: time.Hour}, c2, cat2, reg)
	srv2 := httptest.NewServer(m2.Handler(reg, ""))
	t.Cleanup(srv2.Close)
	f2 := &fixture{t: t, ctx: f.ctx, prefix: f.prefix, data: f.data, c: c2, cat: cat2, m: m2, srv: srv2}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m2.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	start := time.Now()
	p := call[listPage](f2, "GET", "/api/v1/experiments", "", 200)
	x := byName(p, "kept")
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the restarted master took %v to list", time.Since(start))
	}
	if x == nil || x.Rows != 5 || x.Fragments != 2 || x.PendingGenerations != 1 || x.RowCount != 5 || !x.Stale || !x.Restored || !p.Stale {
		t.Fatalf("restarted master lists %+v (page stale %v): want the kept figures, stale and restored", x, p.Stale)
	}
	if y := call[master.Experiment](f2, "GET", "/api/v1/experiments/kept", "", 200); y.Rows != 5 || !y.Stale {
		t.Fatalf("restarted master serves %+v", y)
	}
	slow.set("kept.rollout.lance/", false)
	eventually(t, 15*time.Second, "the restarted master to read the store itself", func() bool {
		x := byName(call[listPage](f2, "GET", "/api/v1/experiments", "", 200), "kept")
		return x != nil && !x.Stale && !x.Restored && x.Rows == 5
	})
}
