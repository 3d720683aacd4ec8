package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

func (m *Master) enqueueFor(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := httpapi.PathParam(r, "name")
		if _, err := m.catalog.Open(r.Context(), name); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		t, created, err := m.coord.Enqueue(r.Context(), kind, name, "api")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		status := http.StatusAccepted
		if !created {
			status = http.StatusOK // the live task of (kind, store)
		}
		// state and task_id: the reference's CompactJobStatus answer to
		// POST .../compact, beside ours.
		httpapi.WriteJSON(w, status, map[string]any{"task": t, "created": created, "state": t.State, "task_id": t.ID})
	}
}

// listTasks answers GET /api/v1/tasks: newest first, limit (1-500,
// default 200) from offset, with the total kept.
func (m *Master) listTasks(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := pageParams(r, 200, 500)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	ts, err := m.coord.ListTasks(r.Context(), offset+limit)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	total, err := m.coord.CountTasks(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	page := []*coord.Task{}
	if offset < len(ts) {
		page = ts[offset:]
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"tasks": page, "total": total, "limit": limit, "offset": offset})
}

// pageParams reads limit (1 to maxLimit, default def) and offset (>= 0).
func pageParams(r *http.Request, def, maxLimit int) (limit, offset int, err error) {
	q := r.URL.Query()
	limit = def
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > maxLimit {
			return 0, 0, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "limit must be an integer from 1 to %d, got %q", maxLimit, v)
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return 0, 0, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "offset must be a non-negative integer, got %q", v)
		}
		offset = n
	}
	return limit, offset, nil
}

// dependsOn is the depends_on of a task request: one task id, or a list
// of them (the reference sends a list).
type dependsOn []string

func (d *dependsOn) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		if one != "" {
			*d = dependsOn{one}
		}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("depends_on must be a task id or a list of task ids")
	}
	*d = many
	return nil
}

func (m *Master) postTask(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Kind      string    `json:"kind"`
		Store     string    `json:"store"`
		Target    string    `json:"target"` // the reference's name for store
		DependsOn dependsOn `json:"depends_on"`
	}
	if err := httpapi.DecodeJSON(w, r, 1<<16, &body, ""); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if body.Store == "" {
		body.Store = body.Target
	} else if body.Target != "" && body.Target != body.Store {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "store %q and target %q disagree: give one", body.Store, body.Target))
		return
	}
	// The reference's kind names are accepted too.
	switch body.Kind {
	case "merge_wal":
		body.Kind = coord.KindMerge
	case "index_id":
		body.Kind = coord.KindIndex
	}
	switch body.Kind {
	case coord.KindMerge, coord.KindCompact, coord.KindIndex, coord.KindCleanup, coord.KindRepair:
	default:
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "kind must be \"merge\" (merge_wal), \"compact\", \"index\" (index_id), \"cleanup\" or \"repair\", got %q", body.Kind))
		return
	}
	for _, d := range body.DependsOn {
		if d == "" || len(d) > 128 {
			httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "depends_on must name tasks by id, got %q", d))
			return
		}
	}
	if _, err := m.catalog.Open(r.Context(), body.Store); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	t, created, err := m.coord.EnqueueOpts(r.Context(), body.Kind, body.Store, "api", coord.EnqueueOptions{DependsOn: body.DependsOn})
	if errors.Is(err, coord.ErrNoTask) {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusNotFound, "NOT_FOUND", "%v", err))
		return
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	httpapi.WriteJSON(w, status, t)
}

func (m *Master) getTask(w http.ResponseWriter, r *http.Request) {
	t, err := m.coord.GetTask(r.Context(), httpapi.PathParam(r, "id"))
	if errors.Is(err, coord.ErrNoTask) {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusNotFound, "NOT_FOUND", "%v", err))
		return
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, t)
}

// lead runs the scheduler and the task runner while this master leads.
func (m *Master) lead(ctx context.Context) {
	sess, err := concurrency.NewSession(m.coord.Client(), concurrency.WithTTL(15), concurrency.WithContext(ctx))
	if err != nil {
		m.log.Warn("task runner session", "err", err)
		return
	}
	defer sess.Close()
	sched := time.NewTicker(m.cfg.SchedulerInterval)
	defer sched.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	// Up to TaskConcurrency tasks at once; the claim takes the store's lock,
	// so two tasks of one store never run at once. Leaving waits for them:
	// the session (their claims) ends after.
	slots := make(chan struct{}, m.cfg.TaskConcurrency)
	var running sync.WaitGroup
	defer running.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			return
		case <-sched.C:
			if m.cfg.Maintenance {
				m.schedule(ctx)
			}
			if _, err := m.coord.PruneTasks(ctx, keepTasks); err != nil {
				m.log.Warn("prune tasks", "err", err)
			}
		case <-poll.C:
			_ = m.coord.RequeueOrphans(ctx)
			for len(slots) < cap(slots) {
				t, err := m.coord.Claim(ctx, sess.Lease())
				if err != nil || t == nil {
					break
				}
				slots <- struct{}{}
				running.Add(1)
				go func() {
					defer running.Done()
					defer func() { <-slots }()
					m.runTask(ctx, t)
				}()
			}
		}
	}
}

// schedule enqueues merges for stores with a deep backlog or an old tail,
// compactions for stores with many fragments, and cleanups on a period.
func (m *Master) schedule(ctx context.Context) {
	now := time.Now()
	m.mu.Lock()
	var merge, compact, cleanup []string
	for n, e := range m.stats {
		if e.stats == nil {
			continue
		}
		if mergeDue(e.stats.Shards, m.cfg.MergeThreshold, m.cfg.MergeAfterAge, now) {
			merge = append(merge, n)
		}
		if needsCompaction(e.stats, m.cfg.CompactMinFragments) {
			compact = append(compact, n)
		}
		// A store's first periodic cleanup comes a period after this master
		// first saw it: a restart of the master is not a cleanup storm.
		if last, ok := m.cleaned[n]; !ok {
			m.cleaned[n] = now
		} else if now.Sub(last) >= m.cfg.CleanupEvery {
			cleanup = append(cleanup, n)
		}
	}
	m.mu.Unlock()
	for _, n := range merge {
		if !m.coord.InCooldown(ctx, coord.KindMerge, n) {
			_, _, _ = m.coord.Enqueue(ctx, coord.KindMerge, n, "scheduler")
		}
	}
	for _, n := range compact {
		if !m.coord.InCooldown(ctx, coord.KindCompact, n) {
			_, _, _ = m.coord.Enqueue(ctx, coord.KindCompact, n, "scheduler")
		}
	}
	for _, n := range cleanup {
		if !m.coord.InCooldown(ctx, coord.KindCleanup, n) {
			if _, _, err := m.coord.Enqueue(ctx, coord.KindCleanup, n, "scheduler"); err == nil {
				m.mu.Lock()
				m.cleaned[n] = now
				m.mu.Unlock()
			}
		}
	}
}

// mergeDue reports whether a store's shards call for a merge: one has
// threshold pending generations, or its oldest pending generation is
// older than age (a negative age turns that trigger off).
func mergeDue(shards []rollout.ShardStats, threshold int, age time.Duration, now time.Time) bool {
	for _, sh := range shards {
		if sh.PendingGenerations == 0 {
			continue
		}
		if sh.PendingGenerations >= threshold {
			return true
		}
		if age > 0 && sh.OldestPendingAt != nil && now.Sub(*sh.OldestPendingAt) >= age {
			return true
		}
	}
	return false
}

func (m *Master) runTask(ctx context.Context, t *coord.Task) {
	m.log.Info("running task", "id", t.ID, "kind", t.Kind, "store", t.Store, "attempt", t.Attempts)
	var result any
	var err error
	switch t.Kind {
	case coord.KindMerge:
		var passes []*rollout.MergeResult
		passes, err = m.mergeStore(ctx, t.Store, m.progressReporter(ctx, t))
		res := api.TaskResult{Passes: len(passes)}
		for _, p := range passes {
			res.Generations += p.Generations
			res.Rows += p.Rows
			res.Replaced += p.Replaced
			res.Version = max(res.Version, p.BaseVersion)
		}
		result = res
	case coord.KindCompact:
		var st *rollout.Store
		if st, err = m.catalog.Open(ctx, t.Store); err == nil {
			var cr *rollout.CompactResult
			if cr, _, err = m.maint.Compact(ctx, st, rollout.CompactOptions{}); err == nil {
				result = api.TaskResult{Passes: 1, FragmentsRemoved: cr.Removed, FragmentsAdded: cr.Added,
					FilesRemoved: cr.FilesRemoved, FilesAdded: cr.FilesAdded, Version: cr.Dataset.Version()}
				if cr.Removed > 0 { // index, then remove what the compaction superseded
					_, _, _ = m.coord.Enqueue(ctx, coord.KindIndex, t.Store, "scheduler")
					_, _, _ = m.coord.Enqueue(ctx, coord.KindCleanup, t.Store, "scheduler")
				}
			}
		}
	case coord.KindCleanup:
		var st *rollout.Store
		if st, err = m.catalog.Open(ctx, t.Store); err == nil {
			var cr *rollout.CleanupResult
			if cr, err = m.maint.Cleanup(ctx, st); err == nil {
				result = api.TaskResult{Passes: 1, VersionsRemoved: cr.VersionsRemoved, FilesRemoved: cr.FilesRemoved,
					BytesRemoved: cr.BytesRemoved, RowsExpired: cr.RowsExpired, Version: cr.Latest}
			}
		}
	case coord.KindRepair:
		var rec *api.RepairRecord
		if rec, err = m.repairStore(ctx, t.Store, t.ID); err == nil {
			result = rec
		}
	case coord.KindIndex:
		var st *rollout.Store
		if st, err = m.catalog.Open(ctx, t.Store); err == nil {
			var ir *rollout.IndexResult
			if ir, err = st.Index(ctx); err == nil {
				result = indexTaskResult(ir)
			}
		}
	default:
		err = fmt.Errorf("unknown task kind %q", t.Kind)
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
		m.log.Warn("task failed", "id", t.ID, "kind", t.Kind, "store", t.Store, "err", err)
	}
	m.tasksRun.WithLabelValues(t.Kind, outcome).Inc()
	if err == nil {
		t.Detail = taskDetail(t.Kind, result)
	}
	if ferr := m.coord.Finish(context.WithoutCancel(ctx), t, result, err); ferr != nil {
		m.log.Warn("finish task", "id", t.ID, "err", ferr)
	}
	_, _ = m.refreshStore(ctx, t.Store)
}

// indexTaskResult is an index pass in the task results' shape (snake_case
// keys, as every other task's; the index package's own result type had
// none, so the task list showed Column, Built, NewRows).
func indexTaskResult(ir *rollout.IndexResult) api.TaskResult {
	res := api.TaskResult{Passes: 1, Indexes: []api.IndexColumnResult{}}
	for _, c := range ir.Columns {
		res.Indexes = append(res.Indexes, api.IndexColumnResult{Column: c.Column, Built: c.Built, Index: c.Index,
			Version: c.Version, NewRows: c.NewRows, Replaced: c.Replaced})
		res.Version = max(res.Version, c.Version)
	}
	return res
}

// mergeStore merges every shard of a store with pending generations: a
// shard with a live owner is asked to merge itself; an orphan shard is
// merged here, fenced by its storage epoch.
func (m *Master) mergeStore(ctx context.Context, name string, report func(api.MergeProgressDetail)) ([]*rollout.MergeResult, error) {
	st, err := m.catalog.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return nil, err
	}
	workers, err := m.coord.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	owner := map[string]coord.WorkerInfo{}
	for _, w := range workers {
		owner[w.ShardID] = w
	}
	var out []*rollout.MergeResult
	var errs []error
	prog := api.MergeProgressDetail{StartedAtMS: time.Now().UnixMilli()}
	for _, sh := range stats.Shards {
		if sh.PendingGenerations > 0 {
			prog.ShardsTotal++
			prog.PendingGenerations += sh.PendingGenerations
		}
	}
	report(prog)
	for _, sh := range stats.Shards {
		if sh.PendingGenerations == 0 {
			continue
		}
		prog.CurrentShard = sh.ShardID
		for pass := 0; pass < 1000; pass++ {
			var res *rollout.MergeResult
			if w, ok := owner[sh.ShardID]; ok {
				res, err = m.askWorker(ctx, w, name)
			} else {
				res, err = st.MergeShard(ctx, sh.ShardID)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %s: %w", sh.ShardID, err))
				break
			}
			out = append(out, res)
			prog.Passes++
			prog.Generations += res.Generations
			prog.Rows += res.Rows
			report(prog)
			if res.Remaining == 0 {
				break
			}
		}
		prog.ShardsDone++
	}
	prog.CurrentShard = ""
	report(prog)
	return out, errors.Join(errs...)
}

// askWorker asks a live worker to merge its own shard of store, through
// the worker API.
func (m *Master) askWorker(ctx context.Context, w coord.WorkerInfo, store string) (*rollout.MergeResult, error) {
	c := client.New(w.Endpoint, client.WithToken(m.cfg.APIToken), client.WithHTTPClient(m.http), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	res, err := c.Merge(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("ask worker %s to merge: %w", w.InstanceID, err)
	}
	return res, nil
}

// progressReporter records a merge task's progress in etcd, where
// GET /api/v1/merge-progress reads it (from any master).
func (m *Master) progressReporter(ctx context.Context, t *coord.Task) func(api.MergeProgressDetail) {
	return func(p api.MergeProgressDetail) {
		p.UpdatedAtMS = time.Now().UnixMilli()
		if err := m.coord.SetProgress(ctx, t.ID, p); err != nil {
			m.log.Debug("merge progress", "id", t.ID, "err", err)
		}
	}
}

// taskDetail is a one-line summary of a finished task's result.
func taskDetail(kind string, result any) string {
	switch r := result.(type) {
	case api.TaskResult:
		switch kind {
		case coord.KindMerge:
			if r.Generations == 0 {
				return "nothing to merge"
			}
			return fmt.Sprintf("merged %d generations, %d rows in %d passes (version %d)", r.Generations, r.Rows, r.Passes, r.Version)
		case coord.KindCompact:
			return fmt.Sprintf("removed %d / added %d fragments", r.FragmentsRemoved, r.FragmentsAdded)
		case coord.KindCleanup:
			return fmt.Sprintf("removed %d versions, %d files, %d bytes", r.VersionsRemoved, r.FilesRemoved, r.BytesRemoved)
		case coord.KindIndex:
			built := 0
			for _, c := range r.Indexes {
				if c.Built {
					built++
				}
			}
			return fmt.Sprintf("%d of %d indexes updated", built, len(r.Indexes))
		}
	case *api.RepairRecord:
		return r.Detail
	}
	return ""
}
