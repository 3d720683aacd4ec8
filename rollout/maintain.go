package rollout

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lance-context/lance-context/lance/table"
)

// MaintainPolicy is when a process maintains the stores it has open.
// Zero durations and counts turn a trigger off.
type MaintainPolicy struct {
	// FlushInterval seals memtables holding rows on this period (the
	// reference's ROLLOUT_FLUSH_INTERVAL_SECS).
	FlushInterval time.Duration
	// MergeAfterGenerations merges this process's shard of a store when
	// that many generations are pending.
	MergeAfterGenerations int
	// MergeAfterAge merges it when its oldest pending generation is older
	// than this, so the base lags the tail by a bounded time at any
	// ingest rate.
	MergeAfterAge time.Duration
	// DrainInterval folds everything the shard holds into the base on this
	// period (the reference's ROLLOUT_CLEANUP_INTERVAL_SECS).
	DrainInterval time.Duration
	// CleanupInterval removes old base versions on this period (Cleanup),
	// keeping what Retention says.
	CleanupInterval time.Duration
	Retention       CleanupOptions
	// CleanupAfterCompact runs a cleanup after each compaction that
	// rewrote fragments.
	CleanupAfterCompact bool
	// CompactMinFragments compacts a store after a merge once the base
	// holds this many more fragments than after its last compaction here
	// (the first time: this many). Without it, a process that no master
	// schedules for kept every merge's fragment and deletion file.
	CompactMinFragments int
	// MemtableBudget bounds the memtables of all open stores together:
	// past it, the largest is sealed (0: no bound beyond each store's own).
	MemtableBudget int64
	// IdleClose closes a store unused for this long, once quiescent
	// (idle.go); MaxOpenStores closes the least recently used ones past
	// this many. Zero: neither.
	IdleClose     time.Duration
	MaxOpenStores int
}

// MaintainEvents observes maintenance (a process's counters); nil fields
// are skipped.
type MaintainEvents struct {
	Sealed func()
	Merged func(trigger string, res *MergeResult, err error)
}

// Maintainer drives the upkeep of a catalog's open stores: sealing on a
// period, merging this process's shard by count, by age and on a drain
// period, compaction and version cleanup, and renewing checkout pins.
// Worker, master and dev all maintain through it, so a seal from any cause
// (the sweeper, a flush, a full memtable) meets the same merge policy.
type Maintainer struct {
	catalog *Catalog
	policy  MaintainPolicy
	events  MaintainEvents
	log     *slog.Logger
	now     func() time.Time

	mu      sync.Mutex
	merging map[string]bool // stores with a background merge running
	// compacted is a store's fragment count after its last compaction by
	// CompactMinFragments: large fragments a compaction leaves as they
	// are do not call for another one after every merge.
	compacted map[string]int
	sealing   bool // a budget seal is running
	wg        sync.WaitGroup
}

// NewMaintainer returns a maintainer of catalog's stores.
func NewMaintainer(catalog *Catalog, policy MaintainPolicy, events MaintainEvents, log *slog.Logger) *Maintainer {
	if log == nil {
		log = slog.Default()
	}
	return &Maintainer{catalog: catalog, policy: policy, events: events, log: log, now: time.Now, merging: map[string]bool{}, compacted: map[string]int{}}
}

// SetClock replaces the clock (tests).
func (m *Maintainer) SetClock(now func() time.Time) { m.now = now }

// Flushed notes a seal of st and starts a merge when the policy says so.
func (m *Maintainer) Flushed(st *Store) {
	if m.events.Sealed != nil {
		m.events.Sealed()
	}
	m.MaybeMerge(st)
}

// Flush seals st's memtable, then applies the merge policy.
func (m *Maintainer) Flush(ctx context.Context, st *Store) error {
	if err := st.Flush(ctx); err != nil {
		return err
	}
	m.Flushed(st)
	return nil
}

// mergeDue reports which trigger, if any, calls for a merge of st's own
// shard now.
func (m *Maintainer) mergeDue(st *Store) string {
	n := st.PendingOwn()
	if n <= 0 {
		return ""
	}
	if c := m.policy.MergeAfterGenerations; c > 0 && n >= c {
		return "count"
	}
	if a := m.policy.MergeAfterAge; a > 0 {
		if t, ok := st.OldestPendingOwn(); ok && m.now().Sub(t) >= a {
			return "age"
		}
	}
	return ""
}

// MaybeMerge starts a background merge of st's own shard when a trigger
// is due and none is running.
func (m *Maintainer) MaybeMerge(st *Store) {
	trigger := m.mergeDue(st)
	if trigger == "" {
		return
	}
	m.mu.Lock()
	if m.merging[st.Name()] {
		m.mu.Unlock()
		return
	}
	m.merging[st.Name()] = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.merging, st.Name())
			m.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// Fold the whole backlog: an age trigger means the oldest rows
		// waited long enough, and each pass is capped by itself.
		m.mergeAll(ctx, st, trigger)
		// Here, not in mergeAll: Run's drain merges inline, and a
		// compaction there would hold up its flush sweeper. Its own
		// deadline: a large store's compaction outlasts the merges'.
		cctx, ccancel := context.WithTimeout(context.Background(), time.Hour)
		defer ccancel()
		m.maybeCompact(cctx, st)
	}()
}

// MaybeSeal seals the largest memtable, in the background, when the
// memtables of all open stores hold more than the budget; one such seal
// runs at a time (appends go on while it runs, into a fresh memtable).
func (m *Maintainer) MaybeSeal() {
	budget := m.policy.MemtableBudget
	if budget <= 0 {
		return
	}
	var total, most int64
	var largest *Store
	for _, st := range m.catalog.Opened() {
		b := st.UnsealedBytes()
		total += b
		if b > most {
			most, largest = b, st
		}
	}
	if total <= budget || largest == nil {
		return
	}
	m.mu.Lock()
	if m.sealing {
		m.mu.Unlock()
		return
	}
	m.sealing = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			m.sealing = false
			m.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		m.log.Debug("memtable budget: sealing the largest memtable", "store", largest.Name(), "bytes", most, "total", total, "budget", budget)
		if err := m.Flush(ctx, largest); err != nil {
			m.log.Warn("memtable budget seal failed", "store", largest.Name(), "err", err)
		}
	}()
}

// Wait waits for background merges to end (tests, shutdown).
func (m *Maintainer) Wait() { m.wg.Wait() }

// MergeNow runs one merge pass of st's own shard.
func (m *Maintainer) MergeNow(ctx context.Context, st *Store, trigger string) (*MergeResult, error) {
	res, err := st.Merge(ctx)
	if m.events.Merged != nil {
		m.events.Merged(trigger, res, err)
	}
	return res, err
}

// Compact compacts st and, when the policy says so and fragments were
// rewritten, removes what the compaction superseded once the retention
// window allows (the cleanup's result is nil otherwise).
func (m *Maintainer) Compact(ctx context.Context, st *Store, o CompactOptions) (*CompactResult, *CleanupResult, error) {
	res, err := st.Compact(ctx, o)
	if err != nil || res.Removed == 0 || !m.policy.CleanupAfterCompact {
		return res, nil, err
	}
	_, _ = st.ExpireSnapshotTags(ctx) // snapshots.go: tags of dead snapshots go first (a failure only keeps them)
	cr, err := st.Cleanup(ctx, m.policy.Retention)
	if err != nil {
		// The compaction stands; the next cleanup removes what this did not.
		m.log.Warn("cleanup after compaction failed", "store", st.Name(), "err", err)
		return res, nil, nil
	}
	return res, cr, nil
}

// Cleanup applies st's row retention, then removes its old versions under
// the policy's retention window (CleanupWith); a failed row retention is
// logged, the version cleanup stands.
func (m *Maintainer) Cleanup(ctx context.Context, st *Store) (*CleanupResult, error) {
	res, err := CleanupWith(ctx, st, m.policy.Retention)
	var re *RetentionError
	if errors.As(err, &re) {
		m.log.Warn("row retention failed", "store", st.Name(), "err", err)
		return res, nil
	}
	return res, err
}

// RetentionError is a row retention that failed before a version cleanup
// that went on without it.
type RetentionError struct{ Err error }

func (e *RetentionError) Error() string { return "row retention: " + e.Err.Error() }
func (e *RetentionError) Unwrap() error { return e.Err }

// CleanupWith applies st's row retention (ApplyRetention), then removes its
// old versions (Store.Cleanup). The version cleanup does not depend on the
// retention: when only the retention fails, the result comes with a
// *RetentionError.
func CleanupWith(ctx context.Context, st *Store, o CleanupOptions) (*CleanupResult, error) {
	rr, rerr := st.ApplyRetention(ctx)
	if _, err := st.ExpireSnapshotTags(ctx); err != nil { // snapshots.go
		return nil, err
	}
	res, err := st.Cleanup(ctx, o)
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return res, &RetentionError{Err: rerr}
	}
	res.RowsExpired = rr.RowsDeleted
	return res, nil
}

// ageCheckEvery is how often Run looks for stores whose tail is older than
// MergeAfterAge: a tenth of it, within [1 s, 30 s].
func (m *Maintainer) ageCheckEvery() time.Duration {
	return min(max(m.policy.MergeAfterAge/10, time.Second), 30*time.Second)
}

// Run runs the periodic upkeep until ctx ends.
func (m *Maintainer) Run(ctx context.Context) {
	tick := func(d time.Duration) (<-chan time.Time, func()) {
		if d <= 0 {
			return nil, func() {}
		}
		t := time.NewTicker(d)
		return t.C, t.Stop
	}
	flushC, stop1 := tick(m.policy.FlushInterval)
	defer stop1()
	ageC, stop2 := tick(m.ageCheckEvery())
	defer stop2()
	drainC, stop3 := tick(m.policy.DrainInterval)
	defer stop3()
	cleanC, stop4 := tick(m.policy.CleanupInterval)
	defer stop4()
	pinC, stop5 := tick(PinLeaseTTL / 10)
	defer stop5()
	var idleC <-chan time.Time
	if m.policy.IdleClose > 0 || m.policy.MaxOpenStores > 0 {
		c, stop6 := tick(min(max(m.policy.IdleClose/4, time.Second), time.Minute))
		defer stop6()
		idleC = c
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-flushC:
			for _, st := range m.catalog.Opened() {
				if st.UnflushedRows() == 0 {
					continue
				}
				if err := m.Flush(ctx, st); err != nil {
					m.log.Warn("flush sweeper", "store", st.Name(), "err", err)
				}
			}
		case <-ageC:
			for _, st := range m.catalog.Opened() {
				m.MaybeMerge(st)
			}
		case <-drainC:
			for _, st := range m.catalog.Opened() {
				m.mergeAll(ctx, st, "cleanup")
			}
		case <-cleanC:
			for _, st := range m.catalog.Opened() {
				if res, err := m.Cleanup(ctx, st); err != nil {
					m.log.Warn("cleanup sweeper", "store", st.Name(), "err", err)
				} else if res.FilesRemoved > 0 {
					m.log.Info("cleanup", "store", st.Name(), "versions_removed", res.VersionsRemoved, "files_removed", res.FilesRemoved, "bytes_removed", res.BytesRemoved)
				}
			}
		case <-idleC:
			if closed := m.CloseIdle(ctx); len(closed) > 0 {
				m.log.Info("closed idle stores", "stores", closed)
			}
		case <-pinC:
			for _, st := range m.catalog.Opened() {
				if err := st.RenewPin(ctx); err != nil {
					m.log.Warn("renewing a checkout pin", "store", st.Name(), "err", err)
				}
			}
		}
	}
}

// CloseIdle closes the stores idle past the policy's IdleClose and the
// least recently used past MaxOpenStores, except those being merged here;
// it returns their names.
func (m *Maintainer) CloseIdle(ctx context.Context) []string {
	return m.catalog.closeIdle(ctx, m.policy.IdleClose, m.policy.MaxOpenStores, func(st *Store) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.merging[st.Name()]
	})
}

// mergeAll folds everything st's shard holds into the base, pass after
// pass (each capped by itself); a failed pass is logged and ends it.
func (m *Maintainer) mergeAll(ctx context.Context, st *Store, trigger string) {
	for pass := 0; pass < 1000; pass++ {
		res, err := m.MergeNow(ctx, st, trigger)
		if err != nil {
			m.log.Warn("merge failed", "store", st.Name(), "trigger", trigger, "err", err)
			return
		}
		if res.Remaining == 0 {
			return
		}
	}
}

// compactMinDeleted is the fewest deleted rows for which deletions alone
// call for a compaction.
const compactMinDeleted = 10_000

// DeletionsCallForCompaction reports whether a base of live rows whose
// fragments hold deleted more rows that deletion files mark should be
// compacted for that alone: when those outnumber the live rows (and are
// at least compactMinDeleted). A compaction then rewrites at most as
// many rows as it removes. The worker's trigger and the master's
// scheduler both use it.
func DeletionsCallForCompaction(live, deleted int64) bool {
	return deleted > live && deleted >= compactMinDeleted
}

// deletedRows counts the rows of base's fragments that deletion files mark.
func deletedRows(base *table.Dataset) int64 {
	var physical int64
	for _, f := range base.Fragments() {
		physical += int64(f.GetPhysicalRows())
	}
	return physical - base.CountRows()
}

// maybeCompact compacts st when CompactMinFragments says so: when the
// merges added that many fragments since the last compaction here, or
// when DeletionsCallForCompaction: rows rewritten by id leave their old
// versions in older fragments, and a store whose ids are rewritten fast
// would hold several times its live rows until the count came round.
func (m *Maintainer) maybeCompact(ctx context.Context, st *Store) {
	need := m.policy.CompactMinFragments
	if need <= 0 || st.compacting() {
		return
	}
	snap, err := st.snapshotLimit(ctx, false, 0, readPlan{})
	if err != nil {
		return
	}
	frags := snap.base.Fragments()
	deleted := deletedRows(snap.base)
	m.mu.Lock()
	due := len(frags)-m.compacted[st.Name()] >= need || DeletionsCallForCompaction(snap.base.CountRows(), deleted)
	m.mu.Unlock()
	if !due {
		return
	}
	res, cr, err := m.Compact(ctx, st, CompactOptions{})
	if err != nil {
		m.log.Warn("compaction after merges failed", "store", st.Name(), "fragments", len(frags), "err", err)
		return
	}
	after := len(res.Dataset.Fragments())
	m.mu.Lock()
	m.compacted[st.Name()] = after
	m.mu.Unlock()
	attrs := []any{"store", st.Name(), "fragments_before", len(frags), "fragments_after", after, "deleted_rows_before", deleted}
	if cr != nil {
		attrs = append(attrs, "files_removed", cr.FilesRemoved, "bytes_removed", cr.BytesRemoved)
	}
	m.log.Info("compacted after merges", attrs...)
}
