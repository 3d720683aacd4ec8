// Package master is the control plane: the store registry and worker
// membership in etcd, store statistics read from manifests, the
// leader-elected maintenance scheduler and task runner, and the data
// browser API (the embedded web UI is served beside it).
package master

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/buildinfo"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// Master serves the control plane over one data directory.
type Master struct {
	cfg     Config
	coord   *coord.Coord
	catalog *rollout.Catalog
	http    *http.Client
	log     *slog.Logger
	metrics *httpapi.Metrics

	tasksRun *prometheus.CounterVec
	isLeader prometheus.Gauge

	mu         sync.Mutex
	stats      map[string]*statsEntry
	refreshed  time.Time
	refreshing map[string]bool // stores with a background refresh started by a list
	fetchSem   chan struct{}   // bounds those background refreshes

	sql sqlEngines // the SQL engines, built on first use (query.go)

	maint   *rollout.Maintainer  // compaction and cleanup of the tasks
	cleaned map[string]time.Time // when the scheduler last enqueued a cleanup, by store

	leading  atomic.Bool // this master leads the scheduler now
	loadOnce sync.Once   // statistics restored from etcd (stats.go)
}

// New returns a master. catalog reads the stores (the master never appends).
func New(cfg Config, c *coord.Coord, catalog *rollout.Catalog, reg prometheus.Registerer) *Master {
	cfg.setDefaults()
	m := &Master{cfg: cfg, coord: c, catalog: catalog, http: &http.Client{Timeout: 10 * time.Minute},
		log: slog.Default().With("component", "master"), stats: map[string]*statsEntry{},
		refreshing: map[string]bool{}, fetchSem: make(chan struct{}, 8), cleaned: map[string]time.Time{}}
	// The master's tasks run one at a time and enqueue their cleanups as
	// tasks of their own, so its maintainer runs no sweepers.
	m.maint = rollout.NewMaintainer(catalog, rollout.MaintainPolicy{Retention: cfg.Retention}, rollout.MaintainEvents{}, m.log)
	m.metrics = httpapi.NewMetrics(reg, "master")
	m.tasksRun = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lc_master_tasks_total", Help: "Maintenance tasks run, by kind and result."}, []string{"kind", "result"})
	m.isLeader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "lc_master_leader", Help: "1 while this master leads the scheduler."})
	reg.MustRegister(m.tasksRun, m.isLeader)
	if c != nil {
		c.SetCooldownPolicy(cfg.Cooldown)
	}
	return m
}

// Metrics returns the request metrics middleware owner.
func (m *Master) Metrics() *httpapi.Metrics { return m.metrics }

// Run refreshes statistics and, while leader, schedules and runs tasks,
// until ctx ends.
func (m *Master) Run(ctx context.Context) {
	m.restoreStats(ctx)
	go m.refreshLoop(ctx)
	m.coord.Lead(ctx, m.cfg.ID, func(lctx context.Context) {
		m.log.Info("leading the scheduler", "id", m.cfg.ID)
		m.isLeader.Set(1)
		m.leading.Store(true)
		defer m.isLeader.Set(0)
		defer m.leading.Store(false)
		m.lead(lctx)
	})
}

// Mount registers the master API on r (health optional: dev mode shares it).
func (m *Master) Mount(r chi.Router, withHealth bool) {
	if withHealth {
		r.Get("/api/v1/health", func(w http.ResponseWriter, _ *http.Request) {
			httpapi.WriteJSON(w, http.StatusOK, api.Health{Status: "ok", Role: "master", InstanceID: m.cfg.ID, Version: buildinfo.Version()})
		})
	}
	if withHealth { // dev mode mounts the worker's, which is the same
		r.Get(httpapi.OpenAPIPath, httpapi.OpenAPI)
	}
	r.Get("/api/v1/experiments", m.listExperiments)
	r.Route("/api/v1/experiments/{name}", func(r chi.Router) {
		r.Get("/", m.getExperiment)
		reads := httpapi.RecordReads{Catalog: m.catalog, MaxLimit: 100, DefaultSource: rollout.SourceFragments}
		r.Get("/records", reads.List)
		r.Get("/records/{id}", reads.Get)
		r.Get("/records/{id}/blob", reads.Blob)
		r.Get("/trajectories/{rollout_id}", reads.Trajectory)
		r.Post("/compact", m.enqueueFor(coord.KindCompact))
		r.Get("/compact/status", m.compactStatus) // master/ops.go
		r.Post("/rescan", m.rescanOne)
		r.Post("/merge", m.enqueueFor(coord.KindMerge))
		r.Post("/index", m.enqueueFor(coord.KindIndex))
		r.Post("/cleanup", m.enqueueFor(coord.KindCleanup))
		r.Post("/repair", m.enqueueFor(coord.KindRepair))
		r.Post("/query", m.query)  // master/query.go
		r.Get("/charts", m.charts) // master/query.go
	})
	r.Get("/api/v1/tasks", m.listTasks)
	r.Post("/api/v1/tasks", m.postTask)
	r.Get("/api/v1/tasks/{id}", m.getTask)
	r.Post("/api/v1/rescan", m.rescanAll)                // master/ops.go
	r.Get("/api/v1/merge-progress", m.mergeProgress)     // master/ops.go
	r.Get("/api/v1/scheduler/cooldowns", m.cooldowns)    // master/ops.go
	r.Get("/api/v1/scheduler/repairs", m.repairs)        // master/ops.go
	r.Get("/api/v1/scheduler/demand", m.schedulerDemand) // master/ops.go
	r.Get("/api/v1/workers", m.listWorkers)
	r.Get("/api/v1/workers/storage", m.workerStorage) // master/storage.go
}

func (m *Master) listWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := m.coord.ListWorkers(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"workers": ws})
}

// keepTasks is how many finished tasks stay visible in the task list.
const keepTasks = 500
