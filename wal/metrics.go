package wal

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace is the Prometheus namespace of the storage metrics. A metric
// the reference service has (rollout_*, its core metrics) keeps the
// reference's name instead, and is counted once: PendingGens is
// rollout_wal_pending_generations, RowsTotal
// rollout_records_appended_total (the worker's handler no longer counts
// them beside).
const Namespace = "lance_context"

// Seal causes, the values of the cause label of lance_context_wal_seals_total.
const (
	SealFull  = "memtable_full" // the memtable reached its row or byte limit
	SealFlush = "flush"         // Seal (a flush) asked for it
	SealClaim = "claim"         // a claim sealed what it replayed
	SealClose = "close"         // Close sealed the rest
)

// Metrics are the instruments of the shard writers of a process, shared by
// all of them (Options.Metrics). NewMetrics(nil) makes unregistered ones:
// they count, and nobody collects them.
type Metrics struct {
	SyncSeconds   prometheus.Histogram   // segment frame write and data flush
	PutSeconds    prometheus.Histogram   // object entry put-if-absent
	EntryBytes    prometheus.Histogram   // bytes per WAL entry (one group commit)
	EntryRows     prometheus.Histogram   // rows per WAL entry
	EntryAppends  prometheus.Histogram   // appends acknowledged by one WAL entry: the group commit
	Seals         *prometheus.CounterVec // committed seals, by cause
	SealSeconds   prometheus.Histogram   // from a seal's start to its commit
	FencedWriters prometheus.Counter     // writers stopped by a newer claim
	FailedWriters prometheus.Counter     // writers stopped by a failed log write
	ReplayCorrupt prometheus.Counter     // claims refused: the log is corrupt
	PendingGens   prometheus.Gauge       // sealed generations not yet merged, over the writers
	UnsealedRows  prometheus.Gauge       // acknowledged rows not yet sealed, over the writers
	RowsTotal     prometheus.Counter     // rows made durable in entries: the records appends acknowledged
	// AdoptedRows counts rows of entries another writer put in the log,
	// taken into this one's memtable: replayed by a claim, or found at a
	// position a put met taken.
	AdoptedRows prometheus.Counter
	// NoSpace counts appends and seals that failed because the disk or
	// quota is full; SegmentsDegraded, segments allocated smaller than
	// wanted for lack of space.
	NoSpace          prometheus.Counter
	SegmentsDegraded prometheus.Counter
	// ClaimsRefused counts claims not made because a live process of
	// another owner holds the shard (see Holder).
	ClaimsRefused prometheus.Counter
}

// NewMetrics makes the writer instruments and registers them with reg
// (nil: none). If reg holds a Metrics already (a second catalog in one
// process), that one is returned: the writers share it.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	latency := prometheus.ExponentialBuckets(0.0001, 2, 16) // 100 µs to 3.3 s
	m := &Metrics{
		SyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "wal", Name: "sync_seconds",
			Help: "Time to write a frame to the local segment log and flush it (fdatasync).", Buckets: latency}),
		PutSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "wal", Name: "put_seconds",
			Help: "Time to put a WAL entry object (put-if-absent, retries included).", Buckets: latency}),
		EntryBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "wal", Name: "entry_bytes",
			Help: "Bytes of a WAL entry: the appends of one group commit.", Buckets: prometheus.ExponentialBuckets(256, 4, 10)}),
		EntryRows: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "wal", Name: "entry_rows",
			Help: "Rows of a WAL entry: the appends of one group commit.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
		EntryAppends: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "wal", Name: "entry_appends",
			Help: "Appends (callers) acknowledged by one WAL entry: the size of a group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		Seals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "seals_total",
			Help: "Memtables sealed into generations, by cause (memtable_full, flush, claim, close)."}, []string{"cause"}),
		SealSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "wal", Name: "seal_seconds",
			Help: "Time from a seal's start to its manifest commit.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		FencedWriters: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "writers_fenced_total",
			Help: "Shard writers stopped because a newer claim fenced them."}),
		FailedWriters: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "writers_failed_total",
			Help: "Shard writers stopped by a failed segment log write or flush."}),
		ReplayCorrupt: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "replay_corruptions_total",
			Help: "Claims refused because replay found a corrupt log (damage followed by valid entries)."}),
		PendingGens: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rollout_wal_pending_generations",
			Help: "Sealed generations listed in the manifests of this process's shard writers (not yet merged and dropped)."}),
		UnsealedRows: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "wal", Name: "unsealed_rows",
			Help: "Rows acknowledged by this process's shard writers and not yet sealed."}),
		RowsTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_records_appended_total",
			Help: "Records acknowledged by appends: rows made durable in WAL entries by this process's shard writers."}),
		AdoptedRows: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "adopted_rows_total",
			Help: "Rows of WAL entries written by another (earlier) writer that this process's writers took over: replayed at a claim or found at a taken position."}),
		NoSpace: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "no_space_errors_total",
			Help: "WAL appends and seals that failed because the disk or quota is full (ENOSPC, EDQUOT)."}),
		SegmentsDegraded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "segments_degraded_total",
			Help: "Log segments allocated smaller than wanted because the disk could not hold the full size."}),
		ClaimsRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "wal", Name: "claims_refused_total",
			Help: "Claims of a shard not made because a live process of another owner holds it (a duplicated instance id)."}),
	}
	if reg == nil {
		return m
	}
	if err := reg.Register(m); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(*Metrics); ok {
				return prev
			}
		}
		panic(err) // a name clash with another metric: a programming error
	}
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.SyncSeconds, m.PutSeconds, m.EntryBytes, m.EntryRows, m.EntryAppends, m.Seals, m.SealSeconds,
		m.FencedWriters, m.FailedWriters, m.ReplayCorrupt, m.PendingGens, m.UnsealedRows, m.RowsTotal,
		m.AdoptedRows, m.NoSpace, m.SegmentsDegraded, m.ClaimsRefused}
}

// Describe implements prometheus.Collector: m registers as one.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// defaultMetrics are the instruments of writers whose Options name none.
var defaultMetrics = NewMetrics(nil)

func since(start time.Time) float64 { return time.Since(start).Seconds() }
