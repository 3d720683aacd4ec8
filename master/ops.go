package master

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
)

// The reference's operations surface: compact status, rescans, merge
// progress and the scheduler's views (cooldowns, repairs, demand).

// compactStatus answers GET .../compact/status: the store's latest compact
// task, as a CompactJobStatus.
func (m *Master) compactStatus(w http.ResponseWriter, r *http.Request) {
	name := httpapi.PathParam(r, "name")
	if _, err := m.catalog.Open(r.Context(), name); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	t, err := m.latestTask(r, coord.KindCompact, name)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, compactJobStatus(t))
}

func compactJobStatus(t *coord.Task) api.CompactJobStatus {
	if t == nil {
		return api.CompactJobStatus{State: api.CompactNone}
	}
	s := api.CompactJobStatus{TaskID: t.ID, Detail: t.Detail, DependsOn: t.DependsOn}
	switch t.State {
	case coord.StateQueued:
		s.State = api.CompactQueued
	case coord.StateRunning:
		s.State = api.CompactRunning
	case coord.StateDone:
		s.State = api.CompactDone
		var res api.TaskResult
		_ = json.Unmarshal(t.Result, &res)
		s.FragmentsRemoved, s.FragmentsAdded = &res.FragmentsRemoved, &res.FragmentsAdded
	case coord.StateFailed:
		s.State, s.Error = api.CompactFailed, t.Error
	default:
		s.State = api.CompactNone
	}
	return s
}

// latestTask returns the newest task of (kind, store), nil if none.
func (m *Master) latestTask(r *http.Request, kind, store string) (*coord.Task, error) {
	ts, err := m.coord.ListTasks(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	for _, t := range ts { // newest first
		if t.Kind == kind && t.Store == store {
			return t, nil
		}
	}
	return nil, nil
}

// rescanOne answers POST /api/v1/experiments/{name}/rescan: the store's
// statistics read now.
func (m *Master) rescanOne(w http.ResponseWriter, r *http.Request) {
	name := httpapi.PathParam(r, "name")
	e, err := m.refreshStore(r.Context(), name)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, m.experiment(name, e))
}

// rescanAll answers POST /api/v1/rescan: every store's statistics read
// now (and stores found on storage registered).
func (m *Master) rescanAll(w http.ResponseWriter, r *http.Request) {
	n, err := m.refreshAll(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.RescanResponse{Scanned: n})
}

// maxTargetLen bounds the target of GET /api/v1/merge-progress.
const maxTargetLen = 512

// mergeProgress answers GET /api/v1/merge-progress?target=NAME: what the
// store's live merge task has done, as far as it has reported.
func (m *Master) mergeProgress(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("target")
	if target == "" || len(target) > maxTargetLen {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "target must be a store name of 1 to %d bytes, got %d bytes", maxTargetLen, len(target)))
		return
	}
	out := api.MergeProgress{Target: target, Status: api.MergeProgressNoActiveRecord}
	t, err := m.latestTask(r, coord.KindMerge, target)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if t != nil && (t.State == coord.StateQueued || t.State == coord.StateRunning) {
		out.TaskID, out.TaskState = t.ID, t.State
		out.Status = api.MergeProgressUnknown
		if t.State == coord.StateRunning {
			out.Status = api.MergeProgressDetailsUnavailable
			raw, err := m.coord.Progress(r.Context(), t.ID)
			if err != nil {
				httpapi.WriteError(w, r, err)
				return
			}
			var p api.MergeProgressDetail
			if raw != nil && json.Unmarshal(raw, &p) == nil {
				out.Status, out.Progress = api.MergeProgressReported, &p
			}
		}
	}
	out.SampledAtMS = time.Now().UnixMilli()
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// cooldowns answers GET /api/v1/scheduler/cooldowns: every (kind, store)
// with failures counted, active cooldowns first.
func (m *Master) cooldowns(w http.ResponseWriter, r *http.Request) {
	cs, err := m.coord.Cooldowns(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, cs)
}

// repairs answers GET /api/v1/scheduler/repairs[?target=NAME]: the repairs
// run, newest first.
func (m *Master) repairs(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("target")
	if len(target) > maxTargetLen {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "target must be at most %d bytes", maxTargetLen))
		return
	}
	docs, err := m.coord.Repairs(r.Context(), target)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := make([]json.RawMessage, 0, len(docs))
	out = append(out, docs...)
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// schedulerDemand answers GET /api/v1/scheduler/demand[?target=NAME]: each
// store's merge pressure from the cached statistics, highest first.
func (m *Master) schedulerDemand(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("target")
	if len(target) > maxTargetLen {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "target must be at most %d bytes", maxTargetLen))
		return
	}
	m.restoreStats(r.Context())
	out := api.SchedulerDemand{Leader: m.leading.Load(), Tables: []api.DemandTable{}}
	m.mu.Lock()
	for name, e := range m.stats {
		if (target != "" && name != target) || e.stats == nil {
			continue
		}
		x := m.experiment(name, e)
		out.Tables = append(out.Tables, api.DemandTable{Target: name, PendingWALGenerations: x.PendingGenerations,
			PendingRows: e.stats.PendingRows, MergeLagSeconds: x.MergeLagSeconds, Score: m.demandScore(x), Stale: x.Stale})
	}
	m.mu.Unlock()
	sort.Slice(out.Tables, func(i, j int) bool {
		if out.Tables[i].Score != out.Tables[j].Score {
			return out.Tables[i].Score > out.Tables[j].Score
		}
		return out.Tables[i].Target < out.Tables[j].Target
	})
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// demandScore is pending generations over the merge threshold plus the
// merge lag over the age trigger (when it is on): 1 or more is due.
func (m *Master) demandScore(x Experiment) float64 {
	s := float64(x.PendingGenerations) / float64(m.cfg.MergeThreshold)
	if m.cfg.MergeAfterAge > 0 && x.PendingGenerations > 0 {
		s += x.MergeLagSeconds / m.cfg.MergeAfterAge.Seconds()
	}
	return s
}
