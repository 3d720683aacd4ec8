// Package master is the control plane: the store registry and worker
// membership in etcd, store statistics read from manifests, the
// leader-elected maintenance scheduler and task runner, and the data
// browser API (the embedded web UI is served beside it).
package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/buildinfo"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/rollout"
)

// Config tunes the master.
type Config struct {
	ID                   string        // this master's id (election candidate); default hostname + random
	RefreshInterval      time.Duration // statistics refresh; default 10 s
	StatsTimeout         time.Duration // per store per refresh; default 3 s
	Maintenance          bool          // run the scheduler (LC_MAINTENANCE=off disables)
	SchedulerInterval    time.Duration // default 15 s
	MergeThreshold       int           // pending generations that trigger a merge; default 8
	CompactMinFragments  int           // fragments that trigger compaction; default 16
	WorkerLeaseTTLSecond int
	APIToken             string // LC_API_TOKEN: sent to workers when asking them to merge
	// Store tunes the stores the master opens (to read statistics, merge
	// orphan shards, compact and index): the ROLLOUT_* and LC_INDEX_COLUMNS
	// variables, as rollout.OptionsFromEnv reads them.
	Store rollout.Options
}

// ConfigFromEnv reads LC_MAINTENANCE (on|off), LC_MERGE_THRESHOLD_GENERATIONS
// (8), LC_COMPACT_MIN_FRAGMENTS (16), LC_STATS_REFRESH_SECS (10),
// LC_API_TOKEN and the store options (rollout.OptionsFromEnv).
func ConfigFromEnv() (Config, error) {
	c := Config{Maintenance: os.Getenv("LC_MAINTENANCE") != "off", APIToken: os.Getenv("LC_API_TOKEN")}
	var err error
	c.Store, err = rollout.OptionsFromEnv()
	c.MergeThreshold = envInt("LC_MERGE_THRESHOLD_GENERATIONS", 8)
	c.CompactMinFragments = envInt("LC_COMPACT_MIN_FRAGMENTS", 16)
	c.RefreshInterval = time.Duration(envInt("LC_STATS_REFRESH_SECS", 10)) * time.Second
	return c, err
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func (c *Config) setDefaults() {
	if c.ID == "" {
		h, _ := os.Hostname()
		c.ID = h + "-" + uuid.NewString()[:8]
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = 10 * time.Second
	}
	if c.StatsTimeout <= 0 {
		c.StatsTimeout = 3 * time.Second
	}
	if c.SchedulerInterval <= 0 {
		c.SchedulerInterval = 15 * time.Second
	}
	if c.MergeThreshold <= 0 {
		c.MergeThreshold = 8
	}
	if c.CompactMinFragments <= 0 {
		c.CompactMinFragments = 16
	}
}

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
}

type statsEntry struct {
	stats   *rollout.Stats
	fetched time.Time
	err     error
}

// New returns a master. catalog reads the stores (the master never appends).
func New(cfg Config, c *coord.Coord, catalog *rollout.Catalog, reg prometheus.Registerer) *Master {
	cfg.setDefaults()
	m := &Master{cfg: cfg, coord: c, catalog: catalog, http: &http.Client{Timeout: 10 * time.Minute},
		log: slog.Default().With("component", "master"), stats: map[string]*statsEntry{},
		refreshing: map[string]bool{}, fetchSem: make(chan struct{}, 8)}
	m.metrics = httpapi.NewMetrics(reg, "master")
	m.tasksRun = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lc_master_tasks_total", Help: "Maintenance tasks run, by kind and result."}, []string{"kind", "result"})
	m.isLeader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "lc_master_leader", Help: "1 while this master leads the scheduler."})
	reg.MustRegister(m.tasksRun, m.isLeader)
	return m
}

// Metrics returns the request metrics middleware owner.
func (m *Master) Metrics() *httpapi.Metrics { return m.metrics }

// Run refreshes statistics and, while leader, schedules and runs tasks,
// until ctx ends.
func (m *Master) Run(ctx context.Context) {
	go m.refreshLoop(ctx)
	m.coord.Lead(ctx, m.cfg.ID, func(lctx context.Context) {
		m.log.Info("leading the scheduler", "id", m.cfg.ID)
		m.isLeader.Set(1)
		defer m.isLeader.Set(0)
		m.lead(lctx)
	})
}

func (m *Master) refreshLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.RefreshInterval)
	defer t.Stop()
	for {
		m.refreshAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// storeNames lists registered stores, backfilling etcd with stores found on
// storage that are not registered.
func (m *Master) storeNames(ctx context.Context) ([]string, error) {
	reg, err := m.coord.ListStores(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, s := range reg {
		names[s.Name] = true
	}
	onDisk, err := m.catalog.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range onDisk {
		if !names[n] {
			if err := m.coord.RegisterStore(ctx, n); err == nil {
				m.log.Info("backfilled store into the registry", "store", n)
			}
			names[n] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// refreshAll re-reads every store's statistics, each with a timeout, so a
// slow store keeps its previous figures (marked stale) instead of blocking.
func (m *Master) refreshAll(ctx context.Context) {
	names, err := m.storeNames(ctx)
	if err != nil {
		m.log.Warn("list stores", "err", err)
		return
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, _ = m.refreshStore(ctx, n)
		}()
	}
	wg.Wait()
	m.mu.Lock()
	keep := map[string]bool{}
	for _, n := range names {
		keep[n] = true
	}
	for n := range m.stats {
		if !keep[n] {
			delete(m.stats, n)
		}
	}
	m.refreshed = time.Now()
	m.mu.Unlock()
}

func (m *Master) refreshStore(ctx context.Context, name string) (*statsEntry, error) {
	sctx, cancel := context.WithTimeout(ctx, m.cfg.StatsTimeout)
	defer cancel()
	st, err := m.catalog.Open(sctx, name)
	var stats *rollout.Stats
	if err == nil {
		stats, err = st.Stats(sctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.stats[name]
	if errors.Is(err, rollout.ErrNotFound) {
		// No entry for a store that does not exist: it would be listed, and
		// served, as an empty experiment.
		delete(m.stats, name)
		return &statsEntry{err: err}, err
	}
	if e == nil {
		e = &statsEntry{}
		m.stats[name] = e
	}
	e.err = err
	if err == nil {
		e.stats, e.fetched = stats, time.Now()
	}
	c := *e
	return &c, err
}

// Experiment is the JSON of one store in the data browser.
type Experiment struct {
	Name               string               `json:"name"`
	Rows               int64                `json:"rows"`
	Fragments          int                  `json:"fragments"`
	PendingGenerations int                  `json:"pending_generations"`
	Shards             []rollout.ShardStats `json:"shards"`
	UnflushedRows      int64                `json:"unflushed_rows"`
	Version            uint64               `json:"version"`
	LastUpdated        *time.Time           `json:"last_updated"`
	LastCompaction     *time.Time           `json:"last_compaction"`
	NeedsCompaction    bool                 `json:"needs_compaction"`
	// Stale is true when the figures missed a refresh (or the last one
	// failed); StatsAgeSeconds says how old they are either way (refreshes
	// run every LC_STATS_REFRESH_SECS; ?fresh=true reads them now).
	Stale           bool       `json:"stale"`
	StatsFetchedAt  *time.Time `json:"stats_fetched_at"`
	StatsAgeSeconds float64    `json:"stats_age_seconds"`
	Error           string     `json:"error,omitempty"`
}

func (m *Master) experiment(name string, e *statsEntry) Experiment {
	x := Experiment{Name: name, Shards: []rollout.ShardStats{}}
	if e.stats != nil {
		s := e.stats
		x.Rows, x.Fragments, x.PendingGenerations, x.Shards = s.Rows, s.Fragments, s.PendingGenerations, s.Shards
		x.UnflushedRows, x.Version, x.LastUpdated, x.LastCompaction = s.UnflushedRows, s.Version, s.LastUpdated, s.LastCompaction
		x.NeedsCompaction = s.Fragments >= m.cfg.CompactMinFragments
	}
	x.Stale = e.stats == nil || e.err != nil || time.Since(e.fetched) > 2*m.cfg.RefreshInterval
	if !e.fetched.IsZero() {
		t := e.fetched.UTC()
		x.StatsFetchedAt, x.StatsAgeSeconds = &t, time.Since(e.fetched).Seconds()
	}
	if e.err != nil {
		x.Error = e.err.Error()
	}
	return x
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
		r.Post("/merge", m.enqueueFor(coord.KindMerge))
		r.Post("/index", m.enqueueFor(coord.KindIndex))
		r.Post("/query", m.query)  // master/query.go
		r.Get("/charts", m.charts) // master/query.go
	})
	r.Get("/api/v1/tasks", m.listTasks)
	r.Post("/api/v1/tasks", m.postTask)
	r.Get("/api/v1/tasks/{id}", m.getTask)
	r.Get("/api/v1/workers", m.listWorkers)
	r.Get("/api/v1/workers/storage", m.workerStorage) // master/storage.go
}

func (m *Master) listExperiments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset := 25, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "limit must be an integer from 1 to 1000, got %q", v))
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "offset must be a non-negative integer, got %q", v))
			return
		}
		offset = n
	}
	search := strings.ToLower(q.Get("search"))
	// The registry is cheap to read and always current; statistics come from
	// the cache (a store not yet refreshed shows as stale and is fetched in
	// the background).
	reg, err := m.coord.ListStores(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	m.mu.Lock()
	var names []string
	var missing []string
	seen := map[string]bool{}
	add := func(n string) {
		if seen[n] || (search != "" && !strings.Contains(strings.ToLower(n), search)) {
			return
		}
		seen[n] = true
		names = append(names, n)
	}
	for _, s := range reg {
		add(s.Name)
		if m.stats[s.Name] == nil && !m.refreshing[s.Name] {
			m.refreshing[s.Name] = true
			missing = append(missing, s.Name)
		}
	}
	for n := range m.stats {
		add(n)
	}
	sort.Strings(names)
	total := len(names)
	stale := time.Since(m.refreshed) > 3*m.cfg.RefreshInterval
	page := []Experiment{}
	for i := offset; i < len(names) && i < offset+limit; i++ {
		e := m.stats[names[i]]
		if e == nil {
			e = &statsEntry{}
		}
		x := m.experiment(names[i], e)
		stale = stale || x.Stale
		page = append(page, x)
	}
	m.mu.Unlock()
	// One background refresh per store at a time, a few at once: a page
	// polled during a cold start must not pile up reads of every store.
	for _, n := range missing {
		go func() {
			m.fetchSem <- struct{}{}
			_, _ = m.refreshStore(context.WithoutCancel(r.Context()), n)
			<-m.fetchSem
			m.mu.Lock()
			delete(m.refreshing, n)
			m.mu.Unlock()
		}()
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"experiments": page, "total": total, "stale": stale, "limit": limit, "offset": offset})
}

func (m *Master) getExperiment(w http.ResponseWriter, r *http.Request) {
	name := httpapi.PathParam(r, "name")
	m.mu.Lock()
	e, ok := m.stats[name]
	var cached statsEntry
	if ok {
		cached = *e
	}
	m.mu.Unlock()
	if !ok || r.URL.Query().Get("fresh") == "true" || r.URL.Query().Get("fresh") == "1" {
		fresh, err := m.refreshStore(r.Context(), name)
		if err != nil {
			if errors.Is(err, rollout.ErrNotFound) || !ok {
				httpapi.WriteError(w, r, err)
				return
			}
			// Serve what we had, marked stale.
			fresh = &cached
			fresh.err = err
		}
		httpapi.WriteJSON(w, http.StatusOK, m.experiment(name, fresh))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, m.experiment(name, &cached))
}

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
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid JSON body: %v", err))
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
	if body.Kind != coord.KindMerge && body.Kind != coord.KindCompact && body.Kind != coord.KindIndex {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "kind must be \"merge\" (merge_wal), \"compact\" or \"index\" (index_id), got %q", body.Kind))
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

// schedule enqueues merges for stores with a deep backlog and compactions
// for stores with many fragments.
func (m *Master) schedule(ctx context.Context) {
	m.mu.Lock()
	var merge, compact []string
	for n, e := range m.stats {
		if e.stats == nil {
			continue
		}
		for _, sh := range e.stats.Shards {
			if sh.PendingGenerations >= m.cfg.MergeThreshold {
				merge = append(merge, n)
				break
			}
		}
		if e.stats.Fragments >= m.cfg.CompactMinFragments {
			compact = append(compact, n)
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
			var cr *table.CompactResult
			if cr, err = st.Compact(ctx, rollout.CompactOptions{}); err == nil {
				result = api.TaskResult{Passes: 1, FragmentsRemoved: cr.Removed, FragmentsAdded: cr.Added,
					FilesRemoved: cr.FilesRemoved, FilesAdded: cr.FilesAdded, Version: cr.Dataset.Version()}
				if cr.Removed > 0 { // index after compaction
					_, _, _ = m.coord.Enqueue(ctx, coord.KindIndex, t.Store, "scheduler")
				}
			}
		}
	case coord.KindIndex:
		var st *rollout.Store
		if st, err = m.catalog.Open(ctx, t.Store); err == nil {
			result, err = st.Index(ctx)
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
