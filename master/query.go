package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/sqlquery"
)

// maxQueryBody bounds a query request body.
const maxQueryBody = 1 << 20

// sqlLimits reads the query limits from the environment once:
// LC_SQL_MAX_ROWS_SCANNED (100000000), LC_SQL_MAX_ROWS_RETURNED (10000),
// LC_SQL_TIMEOUT_SECS (30), LC_SQL_MEMORY_MB (512), LC_SQL_THREADS (2), and
// LC_CHARTS_MAX_ROWS_SCANNED (10000000) for the charts (whose other limits
// are the query's), and LC_CHARTS_CACHE_MB (256; 0 turns it off), the memory
// the charts' cached base tables may take (sqlquery.CacheChartBases). Listed
// in `lance-context master --help`.
var sqlLimits = sync.OnceValues(func() (sqlquery.Limits, sqlquery.Limits) {
	q := sqlquery.Limits{
		MaxRowsScanned:  int64(envInt("LC_SQL_MAX_ROWS_SCANNED", sqlquery.DefaultMaxRowsScanned)),
		MaxRowsReturned: envInt("LC_SQL_MAX_ROWS_RETURNED", sqlquery.DefaultMaxRowsReturned),
		MaxTime:         time.Duration(envInt("LC_SQL_TIMEOUT_SECS", int(sqlquery.DefaultMaxTime/time.Second))) * time.Second,
		MaxMemoryMB:     envInt("LC_SQL_MEMORY_MB", sqlquery.DefaultMaxMemoryMB),
		Threads:         envInt("LC_SQL_THREADS", sqlquery.DefaultThreads),
	}
	c := q
	c.MaxRowsScanned = int64(envInt("LC_CHARTS_MAX_ROWS_SCANNED", sqlquery.DefaultChartsMaxRowsScanned))
	c.Settings = map[string]string{"max_rows_scanned": "LC_CHARTS_MAX_ROWS_SCANNED"}
	return q, c
})

// sqlSlots bounds the queries (and chart computations) running at once:
// each has its own DuckDB memory limit, so the bound caps their sum.
// LC_SQL_MAX_CONCURRENT, default 4.
var sqlSlots = sync.OnceValue(func() chan struct{} {
	return make(chan struct{}, envInt("LC_SQL_MAX_CONCURRENT", 4))
})

// acquireSQL takes a slot, waiting at most a few seconds; a 503 with
// Retry-After when the engine stays busy.
func acquireSQL(r *http.Request) (func(), error) {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case sqlSlots() <- struct{}{}:
		return func() { <-sqlSlots() }, nil
	case <-t.C:
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: api.CodeOverloaded,
			Message: fmt.Sprintf("%d SQL queries are running (LC_SQL_MAX_CONCURRENT); retry", cap(sqlSlots())), RetryAfter: 1}
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// sqlEngines are a master's two SQL engines, shared by all requests: one
// for queries, one for the charts (a larger scan bound).
type sqlEngines struct {
	once          sync.Once
	query, charts *sqlquery.Engine
	cache         chartsCache
}

// chartsCache keeps the last charts of each store and source with the state
// of the store they were computed at (chartsState): the overview polls its
// charts, and a store that has not changed gets them without a scan.
type chartsCache struct {
	mu sync.Mutex
	m  map[string]chartsEntry // by store and source
}

type chartsEntry struct {
	state  string
	charts sqlquery.Charts
}

// maxChartsCached bounds the cache; past it an arbitrary entry goes.
const maxChartsCached = 256

func (c *chartsCache) get(key, state string) (*sqlquery.Charts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || e.state != state {
		return nil, false
	}
	ch := e.charts
	return &ch, true
}

func (c *chartsCache) put(key, state string, ch *sqlquery.Charts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]chartsEntry{}
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= maxChartsCached {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = chartsEntry{state: state, charts: *ch}
}

// defaultChartsCacheMB is the default of LC_CHARTS_CACHE_MB: the chart
// base of a store of 1M rollout rows takes about 90 MB.
const defaultChartsCacheMB = 256

// chartsState identifies what a store's reads of source src see, from its
// manifests: every commit of the base table (merge, compaction, delete,
// checkout) changes its version and commit time, and every seal or merge
// commits a shard manifest, which fragments does not read. Rows only in a
// memtable are read by no source.
//
// base identifies the base table (sqlquery.BaseIdentity), which is all a
// fragments read depends on: a seal changes only the other sources' state.
func chartsState(st *rollout.Stats, src rollout.Source, base string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "v%d r%d f%d %s", st.Version, st.BaseRows, st.Fragments, base)
	if src == rollout.SourceFragments && base != "" {
		return b.String()
	}
	fmt.Fprintf(&b, " p%d g%d", st.PendingRows, st.PendingGenerations)
	if st.LastUpdated != nil {
		fmt.Fprintf(&b, " u%d", st.LastUpdated.UnixNano())
	}
	for _, sh := range st.Shards {
		fmt.Fprintf(&b, " %s:%d:%d:%d:%d:%d", sh.ShardID, sh.Epoch, sh.Watermark, sh.PendingGenerations, sh.PendingRows, sh.UpdatedAt.UnixNano())
	}
	return b.String()
}

func (m *Master) engines() *sqlEngines {
	m.sql.once.Do(func() {
		q, c := sqlLimits()
		m.sql.query = sqlquery.New(sqlquery.FromCatalog(m.catalog), q)
		m.sql.charts = sqlquery.New(sqlquery.FromCatalog(m.catalog), c)
		// By default a sixteenth of the process's memory budget, at most 256 MiB.
		m.sql.charts.CacheChartBases(int64(envInt("LC_CHARTS_CACHE_MB", int(gctune.Share(16, defaultChartsCacheMB<<20)>>20))) << 20)
	})
	return &m.sql
}

// query runs one read-only SQL statement over the store (as table records)
// and the other stores (by name). JSON by default; an Arrow IPC stream
// when the client accepts application/vnd.apache.arrow.stream.
func (m *Master) query(w http.ResponseWriter, r *http.Request) {
	name := httpapi.PathParam(r, "name")
	var body api.QueryRequest
	if err := httpapi.DecodeJSON(w, r, maxQueryBody, &body, `{"sql": "SELECT ...", "source": "fragments|wal|all", "max_rows": n, "version": 12 or "tag"}`); err != nil {
		writeQueryError(w, r, err)
		return
	}
	if body.MaxRows < 0 {
		writeQueryError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "max_rows must be >= 0, got %d", body.MaxRows))
		return
	}
	src, err := rollout.ParseSource(string(body.Source))
	if err != nil {
		writeQueryError(w, r, err)
		return
	}
	st, err := m.catalog.Open(r.Context(), name)
	if err != nil {
		writeQueryError(w, r, err)
		return
	}
	var version uint64
	if body.Version != "" {
		if version, err = st.ResolveVersion(r.Context(), string(body.Version)); err != nil {
			writeQueryError(w, r, err)
			return
		}
	}
	release, err := acquireSQL(r)
	if err != nil {
		writeQueryError(w, r, err)
		return
	}
	defer release()
	res, err := m.engines().query.Query(r.Context(), sqlquery.Request{Store: name, SQL: body.SQL, Source: src, MaxRows: body.MaxRows, Version: version})
	if err != nil {
		writeQueryError(w, r, err)
		return
	}
	if acceptsArrow(r) {
		w.Header().Set("Content-Type", api.ArrowStream)
		w.Header().Set(api.HeaderRowCount, strconv.Itoa(len(res.Rows)))
		w.Header().Set(api.HeaderTruncated, strconv.FormatBool(res.Truncated))
		w.Header().Set(api.HeaderRowsScanned, strconv.FormatInt(res.RowsScanned, 10))
		if err := res.WriteArrow(w); err != nil {
			m.log.Warn("query: write arrow", "store", name, "err", err)
		}
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, queryResponse(res))
}

// queryResponse is a result in the wire's terms.
func queryResponse(res *sqlquery.Result) api.QueryResponse {
	out := api.QueryResponse{
		Columns:     res.Columns,
		Rows:        res.JSONRows(),
		RowCount:    len(res.Rows),
		Truncated:   res.Truncated,
		RowsScanned: res.RowsScanned,
		ElapsedMS:   float64(res.Elapsed.Microseconds()) / 1000,
		Scans:       make([]api.QueryScan, len(res.Scans)),
	}
	for i, sc := range res.Scans {
		out.Scans[i] = sc.QueryScan
	}
	return out
}

func acceptsArrow(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), api.ArrowStream) {
			return true
		}
	}
	return false
}

// writeQueryError maps engine errors (bad or refused SQL: 400; a limit:
// 422 naming it) and hands the rest to httpapi (unknown store 404, storage
// faults 503 with Retry-After).
func writeQueryError(w http.ResponseWriter, r *http.Request, err error) {
	var le *sqlquery.LimitError
	switch {
	case errors.As(err, &le):
		err = httpapi.Errorf(http.StatusUnprocessableEntity, api.CodeQueryLimit, "%s", le.Error())
	case errors.Is(err, sqlquery.ErrUnavailable):
		err = httpapi.Errorf(http.StatusNotImplemented, api.CodeNotImplemented, "%v", err)
	case errors.Is(err, sqlquery.ErrInvalid):
		err = httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), sqlquery.ErrInvalid.Error()+": "))
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		err = httpapi.Errorf(http.StatusServiceUnavailable, api.CodeTimeout, "storage did not answer in time: %v", err)
	}
	httpapi.WriteError(w, r, err)
}

// charts returns the overview charts of a store, computed by SQL, or the
// ones computed last when the store has not changed since (chartsCache).
func (m *Master) charts(w http.ResponseWriter, r *http.Request) {
	name := httpapi.PathParam(r, "name")
	src, err := rollout.ParseSource(r.URL.Query().Get("source"))
	if err != nil {
		writeQueryError(w, r, err)
		return
	}
	store, err := m.catalog.Open(r.Context(), name)
	if err != nil {
		writeQueryError(w, r, err)
		return
	}
	// The state (and the backlog) from manifests first: charts cached at
	// this state are current; charts computed now are at least as new.
	st, err := store.Stats(r.Context())
	if err != nil {
		writeQueryError(w, r, fmt.Errorf("pending backlog: %w", err))
		return
	}
	base, _, err := sqlquery.BaseIdentity(r.Context(), store)
	if err != nil {
		writeQueryError(w, r, fmt.Errorf("base table: %w", err))
		return
	}
	key, state := name+"\x00"+string(src), chartsState(st, src, base)
	ch, hit := m.engines().cache.get(key, state)
	if !hit {
		release, err := acquireSQL(r)
		if err != nil {
			writeQueryError(w, r, err)
			return
		}
		ch, err = m.engines().charts.Charts(r.Context(), name, src)
		release()
		if err != nil {
			writeQueryError(w, r, err)
			return
		}
		m.engines().cache.put(key, state, ch)
	}
	ch.Pending = api.PendingBacklog{WALRows: st.PendingRows, Generations: st.PendingGenerations}
	w.Header().Set(api.HeaderChartsCache, map[bool]string{true: "hit", false: "miss"}[hit])
	if !hit {
		w.Header().Set(api.HeaderChartsBase, string(ch.Base))
	}
	httpapi.WriteJSON(w, http.StatusOK, ch.Charts)
}
