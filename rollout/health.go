package rollout

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// Damage says that a store's shard WAL is corrupt (see wal.CorruptionError):
// the store refuses writes until it is repaired, and reads go on (they do
// not touch the WAL). It is the wire type api.StoreDamage.
type Damage = api.StoreDamage

// damageRecheck is how long a store refuses writes on a known damage
// before it tries to claim its shard again (a repair may have run).
var damageRecheck = 30 * time.Second

type damageState struct {
	c       *wal.CorruptionError
	since   time.Time
	checked time.Time
}

// storeHealth is the part of a Store that tracks what keeps it from
// writing: WAL damage, another live holder of its shard (claimguard.go),
// a full disk (nospace.go).
type storeHealth struct {
	damage atomic.Pointer[damageState]
	guard  claimGuard
	full   atomic.Pointer[fullState]
}

// Damage returns the WAL damage that keeps the store from writing, or nil.
func (s *Store) Damage() *Damage {
	d := s.health.damage.Load()
	if d == nil {
		return nil
	}
	c := d.c
	return &Damage{Store: s.name, Shard: s.shard, Segment: c.Segment, Offset: c.Offset, Position: c.Position, Next: c.Next,
		Reason: c.Reason, Since: d.since, Repair: repairCommand(s.name, s.shard)}
}

func repairCommand(store, shard string) string {
	return fmt.Sprintf("lance-context wal repair --data-dir DATA_DIR --store %s --shard %s", store, shard)
}

// refuseDamaged returns the error that refuses a write while the store's
// WAL is known to be damaged, or nil when the shard may be claimed (no
// damage known, or damageRecheck has passed since the last attempt).
func (s *Store) refuseDamaged() error {
	d := s.health.damage.Load()
	if d == nil || time.Since(d.checked) >= damageRecheck {
		return nil
	}
	return s.damagedError(d.c)
}

func (s *Store) damagedError(c *wal.CorruptionError) error {
	return fmt.Errorf("rollout: store %q refuses writes: the WAL of shard %s is damaged; stop writing to it and run `%s`: %w",
		s.name, s.shard, repairCommand(s.name, s.shard), c)
}

// noteClaim records the outcome of a claim of the store's shard: a
// corrupt log marks the store damaged (logged once, counted, and the
// error says how to repair); a successful claim clears it.
func (s *Store) noteClaim(err error) error {
	var c *wal.CorruptionError
	if err == nil {
		s.noteClaimed()
		if s.health.damage.Swap(nil) != nil {
			s.opts.metrics.damaged.WithLabelValues(s.name).Set(0)
			s.opts.Logger.Info("rollout: store WAL repaired; writes resume", "store", s.name, "shard", s.shard)
		}
		return nil
	}
	if !errors.As(err, &c) {
		s.noteClaimNoSpace(err)
		return err
	}
	now := time.Now()
	prev := s.health.damage.Load()
	d := &damageState{c: c, since: now, checked: now}
	if prev != nil {
		d.since = prev.since
	}
	s.health.damage.Store(d)
	s.opts.metrics.damaged.WithLabelValues(s.name).Set(1)
	if prev == nil {
		s.opts.Logger.Error("rollout: store WAL damaged; refusing writes until it is repaired", "store", s.name, "shard", s.shard,
			"segment", c.Segment, "offset", c.Offset, "position", c.Position, "next_valid", c.Next, "reason", c.Reason,
			"repair", repairCommand(s.name, s.shard))
	}
	return s.damagedError(c)
}

// Damaged returns the damage of every open store whose WAL is corrupt.
func (c *Catalog) Damaged() []Damage {
	var out []Damage
	for _, s := range c.Opened() {
		if d := s.Damage(); d != nil {
			out = append(out, *d)
		}
	}
	return out
}

// StoreRoot returns the object store of the store called name under a
// data directory's root (what a Catalog opens).
func StoreRoot(root objstore.Store, name string) objstore.Store {
	return objstore.Sub(root, name+storeSuffix)
}

// metrics are a catalog's storage instruments: its WAL writers' and its
// stores'. They register as one collector.
type metrics struct {
	wal     *wal.Metrics
	ops     *opMetrics // merges, compactions, the generation cache (metrics.go)
	damaged *prometheus.GaugeVec
	// storageFull and claimedElsewhere are 1 while a store's writes find
	// its disk full, or its shard held by another live process.
	storageFull, claimedElsewhere *prometheus.GaugeVec
	// stores lists the catalog's open stores for the per-store gauges,
	// read at collection (set by NewCatalog).
	stores func() []*Store
}

var (
	pendingDesc = prometheus.NewDesc(wal.Namespace+"_store_pending_generations",
		"Sealed generations of this process's shard of the store not yet merged (-1: shard not claimed).", []string{"store"}, nil)
	unsealedDesc = prometheus.NewDesc(wal.Namespace+"_store_unsealed_rows",
		"Rows this process acknowledged to the store and not yet sealed.", []string{"store"}, nil)
)

func newMetrics(reg prometheus.Registerer, cache *GenCache) *metrics {
	m := &metrics{
		wal: wal.NewMetrics(nil),
		ops: newOpMetrics(cache),
		damaged: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: wal.Namespace, Subsystem: "store", Name: "wal_damaged",
			Help: "1 while the store refuses writes because its shard's WAL is corrupt (see /api/v1/health)."}, []string{"store"}),
		storageFull: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: wal.Namespace, Subsystem: "store", Name: "storage_full",
			Help: "1 while writes to the store fail because the disk or quota holding it is full (507 INSUFFICIENT_STORAGE; see /api/v1/health)."}, []string{"store"}),
		claimedElsewhere: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: wal.Namespace, Subsystem: "store", Name: "shard_claimed_elsewhere",
			Help: "1 while the store refuses writes because another live process holds this process's shard: a duplicated instance id (503 SHARD_CLAIMED_ELSEWHERE; see /api/v1/health)."}, []string{"store"}),
	}
	if reg != nil {
		_ = m.register(reg)
	}
	return m
}

func (m *metrics) register(reg prometheus.Registerer) error {
	err := reg.Register(m)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return nil
	}
	return err
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.wal.Describe(ch)
	m.ops.Describe(ch)
	m.damaged.Describe(ch)
	m.storageFull.Describe(ch)
	m.claimedElsewhere.Describe(ch)
	ch <- pendingDesc
	ch <- unsealedDesc
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.wal.Collect(ch)
	m.ops.Collect(ch)
	m.damaged.Collect(ch)
	m.storageFull.Collect(ch)
	m.claimedElsewhere.Collect(ch)
	if m.stores == nil {
		return
	}
	for _, s := range m.stores() {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.PendingOwn()), s.name)
		ch <- prometheus.MustNewConstMetric(unsealedDesc, prometheus.GaugeValue, float64(s.UnflushedRows()), s.name)
	}
}

// RegisterMetrics registers the catalog's storage metrics (namespace
// lance_context: WAL sync and put latency, entry sizes, seals by cause,
// fenced and failed writers, replay corruption, pending generations and
// unsealed rows, per store too, damaged stores, stores whose disk is full
// or whose shard another live process holds) with reg. Registering
// them twice is harmless.
func (c *Catalog) RegisterMetrics(reg prometheus.Registerer) error {
	return c.opts.metrics.register(reg)
}

// DamageOf returns the WAL damage of the store called name if it is open
// and known to be damaged (no I/O), or nil.
func (c *Catalog) DamageOf(name string) *Damage {
	c.mu.Lock()
	s := c.stores[name]
	c.mu.Unlock()
	if s == nil || s.refuseDamaged() == nil {
		return nil
	}
	return s.Damage()
}
