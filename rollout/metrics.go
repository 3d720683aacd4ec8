package rollout

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/wal"
)

// opMetrics are the instruments of a catalog's merges and compactions and
// of its generation cache; they register with the catalog's other storage
// metrics (see Catalog.RegisterMetrics), in the lance_context namespace.
type opMetrics struct {
	mergeSeconds     prometheus.Histogram
	mergeRows        prometheus.Counter
	mergeGenerations prometheus.Counter
	mergeReplaced    prometheus.Counter
	mergeFailures    prometheus.Counter
	compactSeconds   prometheus.Histogram
	compactRows      prometheus.Counter
	compactFragments prometheus.Counter
	compactFailures  prometheus.Counter
	cleanupVersions  prometheus.Counter
	cleanupFiles     prometheus.Counter
	cleanupBytes     prometheus.Counter
	// cache is the generation cache of the catalog's stores, read at
	// collection (it may be shared with other catalogs).
	cache *GenCache
}

var (
	cacheHitsDesc = prometheus.NewDesc(wal.Namespace+"_generation_cache_hits_total",
		"Reads of a pending generation served from the generation cache.", nil, nil)
	cacheMissesDesc = prometheus.NewDesc(wal.Namespace+"_generation_cache_misses_total",
		"Reads of a pending generation that loaded it from storage into the generation cache.", nil, nil)
	cacheLoadedDesc = prometheus.NewDesc(wal.Namespace+"_generation_cache_loaded_bytes_total",
		"Bytes of decoded generations loaded into the generation cache.", nil, nil)
	cacheBytesDesc = prometheus.NewDesc(wal.Namespace+"_generation_cache_bytes",
		"Bytes of decoded generations the generation cache holds.", nil, nil)
)

func newOpMetrics(cache *GenCache) *opMetrics {
	secs := prometheus.ExponentialBuckets(0.001, 2, 18) // 1 ms to 2.2 min
	return &opMetrics{
		mergeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: wal.Namespace, Subsystem: "merge", Name: "seconds",
			Help: "Time of a merge pass that folded generations into the base table, drain and index upkeep included.", Buckets: secs}),
		mergeRows: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "merge", Name: "rows_total",
			Help: "Rows merges wrote into the base table (the newest write of each id)."}),
		mergeGenerations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "merge", Name: "generations_total",
			Help: "Generations merges folded into the base table."}),
		mergeReplaced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "merge", Name: "replaced_rows_total",
			Help: "Base rows merges deleted because a newer write of their id was merged."}),
		mergeFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "merge", Name: "failures_total",
			Help: "Merge passes that failed."}),
		compactSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: wal.Namespace, Subsystem: "compaction", Name: "seconds",
			Help: "Time of a compaction that rewrote fragments, index rebuild included.", Buckets: secs}),
		compactRows: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "compaction", Name: "rows_total",
			Help: "Rows compactions rewrote into new fragments."}),
		compactFragments: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "compaction", Name: "fragments_removed_total",
			Help: "Fragments compactions rewrote (removed)."}),
		compactFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "compaction", Name: "failures_total",
			Help: "Compactions that failed."}),
		cleanupVersions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "cleanup", Name: "versions_removed_total",
			Help: "Base table versions (manifests) cleanups removed."}),
		cleanupFiles: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "cleanup", Name: "files_removed_total",
			Help: "Files cleanups removed: manifests, data, deletion, transaction and index files."}),
		cleanupBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: wal.Namespace, Subsystem: "cleanup", Name: "bytes_removed_total",
			Help: "Bytes of the files cleanups removed."}),
		cache: cache,
	}
}

// cleaned records a cleanup.
func (m *opMetrics) cleaned(res *table.CleanupResult) {
	m.cleanupVersions.Add(float64(res.VersionsRemoved))
	m.cleanupFiles.Add(float64(res.FilesRemoved))
	m.cleanupBytes.Add(float64(res.BytesRemoved))
}

// merged records a merge pass that folded generations.
func (m *opMetrics) merged(start time.Time, res *MergeResult) {
	m.mergeSeconds.Observe(time.Since(start).Seconds())
	m.mergeGenerations.Add(float64(res.Generations))
	m.mergeRows.Add(float64(res.Rows))
	m.mergeReplaced.Add(float64(res.Replaced))
}

// compacted records a compaction that rewrote fragments.
func (m *opMetrics) compacted(start time.Time, res *table.CompactResult) {
	m.compactSeconds.Observe(time.Since(start).Seconds())
	m.compactFragments.Add(float64(res.Removed))
	m.compactRows.Add(float64(addedRows(res)))
}

// addedRows returns the rows of the fragments a compaction added: they
// took the highest fragment ids of the version it committed (new
// fragments' ids come after every existing id).
func addedRows(res *table.CompactResult) int64 {
	frags := res.Dataset.Fragments()
	ids := make([]int, len(frags))
	for i := range frags {
		ids[i] = i
	}
	sort.Slice(ids, func(a, b int) bool { return frags[ids[a]].GetId() > frags[ids[b]].GetId() })
	var rows int64
	for _, i := range ids[:min(res.Added, len(ids))] {
		rows += int64(frags[i].GetPhysicalRows())
	}
	return rows
}

func (m *opMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.mergeSeconds, m.mergeRows, m.mergeGenerations, m.mergeReplaced, m.mergeFailures,
		m.compactSeconds, m.compactRows, m.compactFragments, m.compactFailures,
		m.cleanupVersions, m.cleanupFiles, m.cleanupBytes}
}

func (m *opMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- cacheHitsDesc
	ch <- cacheMissesDesc
	ch <- cacheLoadedDesc
	ch <- cacheBytesDesc
}

func (m *opMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	var hits, misses, loaded, held int64
	if c := m.cache; c != nil {
		hits, misses, loaded, held = c.hits.Load(), c.misses.Load(), c.loaded.Load(), c.bytes()
	}
	ch <- prometheus.MustNewConstMetric(cacheHitsDesc, prometheus.CounterValue, float64(hits))
	ch <- prometheus.MustNewConstMetric(cacheMissesDesc, prometheus.CounterValue, float64(misses))
	ch <- prometheus.MustNewConstMetric(cacheLoadedDesc, prometheus.CounterValue, float64(loaded))
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(held))
}
