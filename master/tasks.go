package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
		httpapi.WriteJSON(w, status, map[string]any{"task": t, "created": created})
	}
}

func (m *Master) listTasks(w http.ResponseWriter, r *http.Request) {
	ts, err := m.coord.ListTasks(r.Context(), 200)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if ts == nil {
		ts = []*coord.Task{}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"tasks": ts})
}

func (m *Master) postTask(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Kind   string `json:"kind"`
		Store  string `json:"store"`
		Target string `json:"target"` // the reference's name for store
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
	if body.Kind != coord.KindMerge && body.Kind != coord.KindCompact && body.Kind != coord.KindIndex && body.Kind != coord.KindCleanup {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "kind must be \"merge\" (merge_wal), \"compact\", \"index\" (index_id) or \"cleanup\", got %q", body.Kind))
		return
	}
	if _, err := m.catalog.Open(r.Context(), body.Store); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	t, created, err := m.coord.Enqueue(r.Context(), body.Kind, body.Store, "api")
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
			for {
				t, err := m.coord.Claim(ctx, sess.Lease())
				if err != nil || t == nil {
					break
				}
				m.runTask(ctx, t)
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
		if e.stats.Fragments >= m.cfg.CompactMinFragments {
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
		passes, err = m.mergeStore(ctx, t.Store)
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
func (m *Master) mergeStore(ctx context.Context, name string) ([]*rollout.MergeResult, error) {
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
	for _, sh := range stats.Shards {
		if sh.PendingGenerations == 0 {
			continue
		}
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
			if res.Remaining == 0 {
				break
			}
		}
	}
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
