package rollout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// mergedVersions appends and merges n batches, returning the base version
// after each merge.
func mergedVersions(t *testing.T, s *Store, prefix string, n int) []uint64 {
	t.Helper()
	var out []uint64
	for i := range n {
		appendFlush(t, s, recs(fmt.Sprintf("%s%d", prefix, i), 5, "r"+prefix))
		if _, err := s.Merge(context.Background()); err != nil {
			t.Fatal(err)
		}
		d, err := table.Open(context.Background(), s.root)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Version())
	}
	return out
}

func versionAlive(t *testing.T, s *Store, v uint64) bool {
	t.Helper()
	d, err := table.Checkout(context.Background(), s.root, v)
	if errors.Is(err, objstore.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	// Kept means readable: every fragment's rows, not only the manifest.
	if err := d.Scan(context.Background(), table.ScanOptions{Columns: []string{ColID}}, func(arrow.RecordBatch) error { return nil }); err != nil {
		t.Fatalf("version %d kept but unreadable: %v", v, err)
	}
	return true
}

// TestCleanupHonoursLeasesPinsAndTags: a cleanup keeping nothing for age
// keeps the latest version, the leased, the pinned and the tagged ones,
// and nothing else; released, unpinned, untagged and expired ones go at
// the next cleanup, expired lease files with them.
func TestCleanupHonoursLeasesPinsAndTags(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "life")
	vs := mergedVersions(t, s, "a", 6)
	now := time.Now()
	s.now = func() time.Time { return now }
	leased, err := s.TakeLease(ctx, vs[1], time.Hour, "test")
	if err != nil {
		t.Fatal(err)
	}
	short, err := s.TakeLease(ctx, vs[0], time.Minute, "short")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, "keep-me", vs[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkout(ctx, vs[3]); err != nil {
		t.Fatal(err)
	}
	zero := time.Duration(0)
	res, err := s.Cleanup(ctx, CleanupOptions{ReadGrace: &zero})
	if err != nil {
		t.Fatal(err)
	}
	latest := vs[len(vs)-1]
	want := []uint64{vs[0], vs[1], vs[2], vs[3], latest}
	for v := uint64(1); v <= latest; v++ {
		if got := versionAlive(t, s, v); got != slices.Contains(want, v) {
			t.Fatalf("version %d alive=%v after the first cleanup (want kept %v; result %+v)", v, got, want, res)
		}
	}
	if !slices.Equal(res.HeldVersions, []uint64{vs[0], vs[1], vs[3]}) || !slices.Equal(res.TaggedVersion, []uint64{vs[2]}) {
		t.Fatalf("held %v tagged %v", res.HeldVersions, res.TaggedVersion)
	}
	// The short lease expires; the rest are let go.
	now = now.Add(2 * time.Minute)
	if _, err := s.Lease(ctx, short.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired lease: %v", err)
	}
	if _, err := s.RenewLease(ctx, short.ID, time.Hour); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renewing an expired lease: %v", err)
	}
	if err := s.ReleaseLease(ctx, leased.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTag(ctx, "keep-me"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkout(ctx, latest); err != nil { // unpins
		t.Fatal(err)
	}
	res, err = s.Cleanup(ctx, CleanupOptions{ReadGrace: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if res.VersionsKept != 1 || res.LeasesExpired != 1 || len(res.HeldVersions) != 0 {
		t.Fatalf("second cleanup: %+v", res)
	}
	if ls, err := s.Leases(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("leases left: %v %v", ls, err)
	}
	if infos, _ := s.root.List(ctx, leasesDir); len(infos) != 0 {
		t.Fatalf("lease files left: %v", infos)
	}
	if ids := listIDs(t, s, ListOptions{Source: SourceAll, Limit: 7}); len(ids) != 30 {
		t.Fatalf("after cleanups the store lists %d rows, want 30", len(ids))
	}
}

// TestTagAndLeaseErrors: bad names and missing versions are the caller's
// errors, with what to fix.
func TestTagAndLeaseErrors(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "tags")
	mergedVersions(t, s, "a", 1)
	var ve *ValidationError
	if _, err := s.CreateTag(ctx, "bad name", 0); !errors.As(err, &ve) {
		t.Fatalf("bad tag name: %v", err)
	}
	if _, err := s.CreateTag(ctx, "t1", 99); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tag of a missing version: %v", err)
	}
	if _, err := s.CreateTag(ctx, "t1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, "t1", 0); !errors.Is(err, ErrExists) {
		t.Fatalf("tag twice: %v", err)
	}
	if err := s.DeleteTag(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete a missing tag: %v", err)
	}
	if _, err := s.TakeLease(ctx, 99, time.Hour, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lease of a missing version: %v", err)
	}
	if _, err := s.Lease(ctx, "../x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lease with a bad id: %v", err)
	}
}

// TestReadersNeverMeetACleanedFile: gets, trajectories and cursor walks
// run while merges, a compaction and cleanups that keep nothing for age
// run; no read fails and every walk sees every row that existed when it
// began.
func TestReadersNeverMeetACleanedFile(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "busy")
	var acked atomic.Int64
	appendFlush(t, s, recs("seed", 20, "r0"))
	acked.Store(20)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 8)
	reader := func(fn func(r *rand.Rand) error) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := fn(r); err != nil {
				errs <- err
				return
			}
			reads.Add(1)
		}
	}
	wg.Add(3)
	go reader(func(r *rand.Rand) error {
		id := fmt.Sprintf("seed-%03d", r.IntN(20))
		rec, err := s.Get(ctx, id)
		if err == nil && rec == nil {
			err = fmt.Errorf("get %s: missing", id)
		}
		return err
	})
	go reader(func(*rand.Rand) error {
		_, err := s.Trajectory(ctx, "r0")
		return err
	})
	go reader(func(*rand.Rand) error {
		before := acked.Load()
		var n int64
		o := ListOptions{Source: SourceAll, Limit: 13}
		for {
			res, err := s.List(ctx, o)
			if err != nil {
				return err
			}
			n += int64(len(res.Records))
			if !res.HasMore {
				break
			}
			o.After, _ = DecodeCursor(res.NextCursor)
		}
		if n < before {
			return fmt.Errorf("cursor walk saw %d rows, %d existed when it began", n, before)
		}
		return nil
	})
	grace := 2 * time.Second
	for i := range 25 {
		// Rewrites of the seed ids: each merge replaces a deletion file.
		appendFlush(t, s, append(recs(fmt.Sprintf("b%02d", i), 10, fmt.Sprintf("r%d", i%3)), recs("seed", 20, "r0")...))
		acked.Add(10)
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		if i%6 == 5 {
			if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Cleanup(ctx, CleanupOptions{ReadGrace: &grace}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a reader failed during cleanups: %v", err)
	}
	if reads.Load() < 30 {
		t.Fatalf("only %d reads ran", reads.Load())
	}
	zero := time.Duration(0)
	res, err := s.Cleanup(ctx, CleanupOptions{ReadGrace: &zero})
	if err != nil || res.VersionsKept != 1 {
		t.Fatalf("final cleanup: %+v %v", res, err)
	}
	if ids := listIDs(t, s, ListOptions{Source: SourceFragments, Limit: 100}); len(ids) != int(acked.Load()) {
		t.Fatalf("%d rows after cleanups, want %d", len(ids), acked.Load())
	}
}

// TestMaintainerMergesByAge: with a fake clock, a pending generation is
// merged once it is older than MergeAfterAge, not before.
func TestMaintainerMergesByAge(t *testing.T) {
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "aged")
	appendFlush(t, s, recs("a", 3, "r"))
	sealed, ok := s.OldestPendingOwn()
	if !ok {
		t.Fatal("no pending generation after a flush")
	}
	var merges atomic.Int32
	m := NewMaintainer(c, MaintainPolicy{MergeAfterAge: time.Minute}, MaintainEvents{
		Merged: func(trigger string, res *MergeResult, err error) {
			if trigger == "age" && err == nil && res.Generations > 0 {
				merges.Add(1)
			}
		},
	}, nil)
	now := sealed.Add(59 * time.Second)
	m.SetClock(func() time.Time { return now })
	m.MaybeMerge(s)
	m.Wait()
	if merges.Load() != 0 || s.PendingOwn() != 1 {
		t.Fatalf("merged at 59 s: %d merges, %d pending", merges.Load(), s.PendingOwn())
	}
	now = sealed.Add(61 * time.Second)
	m.MaybeMerge(s)
	m.Wait()
	if merges.Load() != 1 || s.PendingOwn() != 0 {
		t.Fatalf("at 61 s: %d merges, %d pending", merges.Load(), s.PendingOwn())
	}
	st, err := s.Stats(context.Background())
	if err != nil || st.MergeLagSeconds != 0 || st.BaseRows != 3 {
		t.Fatalf("stats after the age merge: %+v %v", st, err)
	}
}

// TestMemtableBudgetSealsTheLargest: past the budget of all memtables
// together, the largest is sealed and the others are left alone.
func TestMemtableBudgetSealsTheLargest(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	small, big := mustStore(t, c, "small"), mustStore(t, c, "big")
	if _, err := small.Append(ctx, recs("s", 5, "r")); err != nil {
		t.Fatal(err)
	}
	if _, err := big.Append(ctx, recs("b", 200, "r")); err != nil {
		t.Fatal(err)
	}
	total := small.UnsealedBytes() + big.UnsealedBytes()
	m := NewMaintainer(c, MaintainPolicy{MemtableBudget: total + 1}, MaintainEvents{}, nil)
	m.MaybeSeal()
	m.Wait()
	if big.UnflushedRows() != 200 {
		t.Fatal("sealed under the budget")
	}
	m = NewMaintainer(c, MaintainPolicy{MemtableBudget: total - 1}, MaintainEvents{}, nil)
	m.MaybeSeal()
	m.Wait()
	if big.UnflushedRows() != 0 || small.UnflushedRows() != 5 || big.UnsealedBytes() != 0 {
		t.Fatalf("past the budget: big %d rows unsealed, small %d", big.UnflushedRows(), small.UnflushedRows())
	}
}

// TestRetentionDropsOldRowsAndOldPolicyVersions: with a row retention of
// a day and the newest three policy versions (in natural order: step-10
// after step-9), applying it deletes exactly the other base rows; a
// compaction then materializes the deletions and the rows read the same.
func TestRetentionDropsOldRowsAndOldPolicyVersions(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "kept")
	now := time.Now().UTC()
	var rs []Record
	want := map[string]bool{}
	for i := range 24 {
		pv := fmt.Sprintf("step-%d", i%12)                  // step-0 .. step-11: keep step-9, step-10, step-11
		at := now.Add(-time.Duration(i%3) * 20 * time.Hour) // 0, 20 h, 40 h old: the last goes
		id := fmt.Sprintf("r%02d", i)
		rs = append(rs, Record{ID: id, RolloutID: "r", PolicyVersion: ptr(pv), CreatedAt: ptr(at)})
		if i%12 >= 9 && i%3 != 2 {
			want[id] = true
		}
	}
	rs = append(rs, Record{ID: "no-version", RolloutID: "r", CreatedAt: ptr(now)}) // no policy version: kept by that rule
	want["no-version"] = true
	appendFlush(t, s, rs)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := s.ApplyRetention(ctx); err != nil || res.RowsDeleted != 0 {
		t.Fatalf("without a retention: %+v %v", res, err)
	}
	if err := s.SetRetention(ctx, Retention{MaxAge: 24 * time.Hour, KeepPolicyVersions: 3}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Retention(ctx); err != nil || r.MaxAge != 24*time.Hour || r.KeepPolicyVersions != 3 {
		t.Fatalf("retention read back: %+v %v", r, err)
	}
	res, err := s.ApplyRetention(ctx)
	if err != nil || res.RowsDeleted != int64(25-len(want)) {
		t.Fatalf("retention: %+v %v (want %d deleted)", res, err, 25-len(want))
	}
	check := func(when string) {
		got := listIDs(t, s, ListOptions{Source: SourceAll, Limit: 10})
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows %v, want %d", when, len(got), got, len(want))
		}
		for _, id := range got {
			if !want[id] {
				t.Fatalf("%s: %s should have been dropped", when, id)
			}
		}
	}
	check("after retention")
	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
	if res, err := s.ApplyRetention(ctx); err != nil || res.RowsDeleted != 0 {
		t.Fatalf("second application: %+v %v", res, err)
	}
	var ve *ValidationError
	if err := s.SetRetention(ctx, Retention{KeepPolicyVersions: -1}); !errors.As(err, &ve) {
		t.Fatalf("negative retention: %v", err)
	}
}

func TestNaturalCompare(t *testing.T) {
	in := []string{"step-10", "step-2", "step-1", "a", "step-02", "step-9", "b10", "b9", "step-100"}
	slices.SortStableFunc(in, naturalCompare)
	want := []string{"a", "b9", "b10", "step-1", "step-2", "step-02", "step-9", "step-10", "step-100"}
	if !slices.Equal(in, want) {
		t.Fatalf("natural order %v, want %v", in, want)
	}
}

// TestMaintainerCompactsAfterMerges: a process that no master schedules
// compacts a store once its merges have added CompactMinFragments base
// fragments since the last compaction, and removes what that superseded;
// a compaction that leaves fragments as they are is not asked for again
// after the next merge.
func TestMaintainerCompactsAfterMerges(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "packed")
	m := NewMaintainer(c, MaintainPolicy{MergeAfterGenerations: 1, CompactMinFragments: 3, CleanupAfterCompact: true}, MaintainEvents{}, nil)
	fragments := func() int {
		t.Helper()
		st, err := s.CompactionStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TotalFragments
	}
	for round := range 2 {
		appendFlush(t, s, recs(fmt.Sprintf("r%d-", round), 4, "r"))
		m.MaybeMerge(s)
		m.Wait()
	}
	if n := fragments(); n != 2 {
		t.Fatalf("%d fragments after 2 merges, want 2 (no compaction yet)", n)
	}
	// A rewrite of an id: the third merge's fragment, and a deletion in
	// the first one.
	appendFlush(t, s, recs("r0-", 1, "r"))
	m.MaybeMerge(s)
	m.Wait()
	if n := fragments(); n != 1 {
		t.Fatalf("%d fragments after the third merge, want 1 (compacted)", n)
	}
	st, err := s.CompactionStats(ctx)
	if err != nil || st.TotalCompactions != 1 {
		t.Fatalf("%d compactions, want 1 (%v)", st.TotalCompactions, err)
	}
	rows, err := s.Stats(ctx)
	if err != nil || rows.BaseRows != 8 {
		t.Fatalf("base rows after the compaction: %+v %v, want 8", rows, err)
	}
	// Two more merges: 3 fragments, 2 added since the compaction.
	for round := 2; round < 4; round++ {
		appendFlush(t, s, recs(fmt.Sprintf("r%d-", round), 4, "r"))
		m.MaybeMerge(s)
		m.Wait()
	}
	if n := fragments(); n != 3 {
		t.Fatalf("%d fragments, want 3: compacted again before 3 were added", n)
	}
}

// TestMaintainerCompactsWhenDeletedRowsOutnumberLive: rows rewritten by
// id leave their old versions deleted in older fragments; once those
// outnumber the live rows the store is compacted, however few fragments
// the merges added.
func TestMaintainerCompactsWhenDeletedRowsOutnumberLive(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "rewritten")
	m := NewMaintainer(c, MaintainPolicy{MergeAfterGenerations: 1, CompactMinFragments: 100}, MaintainEvents{}, nil)
	const n = 12_000 // live rows throughout
	all := recs("id", n, "r")
	rounds := [][]Record{
		all,
		all[:10_000], // 10,000 deleted, 12,000 live: left alone
		append(slices.Clone(all[:9_000]), all[10_000:11_000]...), // 20,000 deleted: compacted
	}
	for round, rs := range rounds {
		appendFlush(t, s, rs)
		m.MaybeMerge(s)
		m.Wait()
		st, err := s.CompactionStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := [][3]int{{1, 0, 0}, {2, 0, 10_000}, {1, 1, 0}}[round]
		if st.TotalFragments != want[0] || int(st.TotalCompactions) != want[1] {
			t.Fatalf("round %d: %d fragments and %d compactions, want %d and %d", round, st.TotalFragments, st.TotalCompactions, want[0], want[1])
		}
		if stats, err := s.Stats(ctx); err != nil || stats.DeletedRows != int64(want[2]) {
			t.Fatalf("round %d: stats report %+v deleted rows (%v), want %d", round, stats.DeletedRows, err, want[2])
		}
	}
	if rows, err := s.Stats(ctx); err != nil || rows.BaseRows != n {
		t.Fatalf("base rows %+v %v, want %d", rows, err, n)
	}
}
