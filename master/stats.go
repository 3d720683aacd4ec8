package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

type statsEntry struct {
	stats   *rollout.Stats
	fetched time.Time
	err     error
	// restored: the figures come from etcd (a previous master's), not yet
	// read again by this one; they are served marked stale.
	restored bool
	// persisted is when this master last wrote them to etcd, and what.
	persisted    time.Time
	persistedSig string
}

// persistedStats is what etcd keeps of a store's statistics.
type persistedStats struct {
	Stats     *rollout.Stats `json:"stats"`
	FetchedAt time.Time      `json:"fetched_at"`
}

// statsSig is what, changed, makes statistics worth writing to etcd at
// once (the merge lag changes with the clock alone).
func statsSig(s *rollout.Stats) string {
	sig := fmt.Sprintf("%d/%d/%d/%d/%d", s.Version, s.Rows, s.Fragments, s.PendingGenerations, s.PendingRows)
	if s.LastCompaction != nil {
		sig += "/" + s.LastCompaction.String()
	}
	return sig
}

// restoreStats loads the statistics kept in etcd into the cache, once:
// a restarted master lists every store at once (stale) instead of reading
// each before it can answer.
func (m *Master) restoreStats(ctx context.Context) {
	m.loadOnce.Do(func() {
		if m.coord == nil {
			return
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		docs, err := m.coord.LoadStats(lctx)
		if err != nil {
			m.log.Warn("restore statistics", "err", err)
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		for name, b := range docs {
			var p persistedStats
			if json.Unmarshal(b, &p) != nil || p.Stats == nil {
				continue
			}
			if _, ok := m.stats[name]; ok {
				continue // read by this master already
			}
			m.stats[name] = &statsEntry{stats: p.Stats, fetched: p.FetchedAt, restored: true,
				persisted: p.FetchedAt, persistedSig: statsSig(p.Stats)}
		}
	})
}

// persistStats writes a store's statistics to etcd when they changed, or
// when the last write is older than StatsPersistEvery.
func (m *Master) persistStats(ctx context.Context, name string, stats *rollout.Stats, fetched time.Time) {
	if m.coord == nil {
		return
	}
	sig := statsSig(stats)
	m.mu.Lock()
	e := m.stats[name]
	due := e != nil && (e.persistedSig != sig || time.Since(e.persisted) >= m.cfg.StatsPersistEvery)
	m.mu.Unlock()
	if !due {
		return
	}
	b, err := json.Marshal(persistedStats{Stats: stats, FetchedAt: fetched.UTC()})
	if err != nil {
		return
	}
	if err := m.coord.PutStats(ctx, name, b); err != nil {
		m.log.Debug("persist statistics", "store", name, "err", err)
		return
	}
	m.mu.Lock()
	if e := m.stats[name]; e != nil {
		e.persisted, e.persistedSig = time.Now(), sig
	}
	m.mu.Unlock()
}

func (m *Master) refreshLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.RefreshInterval)
	defer t.Stop()
	for {
		_, _ = m.refreshAll(ctx)
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
func (m *Master) refreshAll(ctx context.Context) (int, error) {
	names, err := m.storeNames(ctx)
	if err != nil {
		m.log.Warn("list stores", "err", err)
		return 0, err
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
	var gone []string
	for n := range m.stats {
		if !keep[n] {
			delete(m.stats, n)
			gone = append(gone, n)
		}
	}
	m.refreshed = time.Now()
	m.mu.Unlock()
	for _, n := range gone {
		if m.coord != nil {
			_ = m.coord.DeleteStats(ctx, n)
		}
	}
	return len(names), nil
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
	e := m.stats[name]
	if errors.Is(err, rollout.ErrNotFound) {
		// No entry for a store that does not exist: it would be listed, and
		// served, as an empty experiment.
		delete(m.stats, name)
		m.mu.Unlock()
		if e != nil && m.coord != nil {
			_ = m.coord.DeleteStats(context.WithoutCancel(ctx), name)
		}
		return &statsEntry{err: err}, err
	}
	if e == nil {
		e = &statsEntry{}
		m.stats[name] = e
	}
	e.err = err
	if err == nil {
		e.stats, e.fetched, e.restored = stats, time.Now(), false
	}
	c := *e
	m.mu.Unlock()
	if err == nil {
		m.persistStats(ctx, name, stats, c.fetched)
	}
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
	// MergeLagSeconds is the age of the oldest pending generation (0 with
	// none): how far the base table LanceDB reads lags the tail. It is the
	// store's figure at the last refresh plus the time since, so cached
	// statistics do not understate it.
	MergeLagSeconds float64 `json:"merge_lag_seconds"`
	// Stale is true when the figures missed a refresh (or the last one
	// failed); StatsAgeSeconds says how old they are either way (refreshes
	// run every LC_STATS_REFRESH_SECS; ?fresh=true reads them now).
	Stale           bool       `json:"stale"`
	StatsFetchedAt  *time.Time `json:"stats_fetched_at"`
	StatsAgeSeconds float64    `json:"stats_age_seconds"`
	Error           string     `json:"error,omitempty"`

	// The reference's ExperimentSummary names of the same figures:
	// row_count (rows), fragment_count (fragments), pending_wal_generations
	// (pending_generations), scanned_at (stats_fetched_at, Unix ms; 0 when
	// never read), and compacted: whether the store was ever compacted
	// (last_compaction has when).
	RowCount              int64 `json:"row_count"`
	FragmentCount         int   `json:"fragment_count"`
	PendingWALGenerations int   `json:"pending_wal_generations"`
	ScannedAt             int64 `json:"scanned_at"`
	Compacted             bool  `json:"compacted"`
	// Restored is true while the figures are the ones kept in etcd by a
	// master before this one restarted, not yet read again (stale is true
	// as well).
	Restored bool `json:"restored,omitempty"`
}

func (m *Master) experiment(name string, e *statsEntry) Experiment {
	x := Experiment{Name: name, Shards: []rollout.ShardStats{}}
	if e.stats != nil {
		s := e.stats
		x.Rows, x.Fragments, x.PendingGenerations, x.Shards = s.Rows, s.Fragments, s.PendingGenerations, s.Shards
		x.UnflushedRows, x.Version, x.LastUpdated, x.LastCompaction = s.UnflushedRows, s.Version, s.LastUpdated, s.LastCompaction
		x.NeedsCompaction = needsCompaction(s, m.cfg.CompactMinFragments)
		if s.MergeLagSeconds > 0 {
			x.MergeLagSeconds = s.MergeLagSeconds + max(0, time.Since(e.fetched).Seconds())
		}
	}
	x.Stale = e.stats == nil || e.err != nil || e.restored || time.Since(e.fetched) > 2*m.cfg.RefreshInterval
	x.Restored = e.restored
	if !e.fetched.IsZero() {
		t := e.fetched.UTC()
		x.StatsFetchedAt, x.StatsAgeSeconds = &t, time.Since(e.fetched).Seconds()
		x.ScannedAt = t.UnixMilli()
	}
	x.RowCount, x.FragmentCount, x.PendingWALGenerations = x.Rows, x.Fragments, x.PendingGenerations
	x.Compacted = x.LastCompaction != nil
	if e.err != nil {
		x.Error = e.err.Error()
	}
	return x
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
	m.restoreStats(r.Context())
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
	m.restoreStats(r.Context())
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

// needsCompaction: a store with minFragments fragments, or with more
// deleted rows than live ones, is due a compaction.
func needsCompaction(s *rollout.Stats, minFragments int) bool {
	return s.Fragments >= minFragments || rollout.DeletionsCallForCompaction(s.BaseRows, s.DeletedRows)
}
