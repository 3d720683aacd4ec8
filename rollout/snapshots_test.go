package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// cursorWalk follows next_cursor through source all and returns id ->
// rollout_id|content of every row.
func cursorWalk(t *testing.T, s *Store, o ListOptions) map[string]string {
	t.Helper()
	out := map[string]string{}
	o.Limit = 7
	for {
		res, err := s.List(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			if _, dup := out[r.ID]; dup {
				t.Fatalf("cursor walk repeats %s", r.ID)
			}
			out[r.ID] = r.RolloutID + "|" + deref(r.Content)
		}
		if res.NextCursor == "" {
			return out
		}
		o.After, _ = DecodeCursor(res.NextCursor)
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// versionRows reads base version v whole with our reader: id ->
// rollout_id|content.
func versionRows(t *testing.T, s *Store, v uint64) map[string]string {
	t.Helper()
	d, err := table.Checkout(context.Background(), s.root, v)
	if err != nil {
		t.Fatalf("version %d: %v", v, err)
	}
	out := map[string]string{}
	err = d.Scan(context.Background(), table.ScanOptions{Columns: []string{ColID, ColRolloutID, "content"}}, func(b arrow.RecordBatch) error {
		ids, rs, cs := b.Column(0).(*array.String), b.Column(1).(*array.String), b.Column(2)
		for i := range ids.Len() {
			c := "<nil>"
			if cs.IsValid(i) {
				c = cs.ValueStr(i)
			}
			if _, dup := out[ids.Value(i)]; dup {
				return fmt.Errorf("version %d holds %s twice", v, ids.Value(i))
			}
			out[ids.Value(i)] = rs.Value(i) + "|" + c
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// layeredStore fills s with merged rows, pending generations and unsealed
// rows, with rewrites of merged ids in both tiers.
func layeredStore(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	appendFlush(t, s, recs("base", 20, "r-base"))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, recs("gen1", 5, "r-gen"))
	rw := recs("base", 3, "r-rewritten") // base-000..002 written again
	appendFlush(t, s, rw)
	if _, err := s.Append(ctx, recs("tail", 4, "r-tail")); err != nil { // unsealed
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, []Record{{ID: "base-010", RolloutID: "r-rewritten-tail"}}); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotHoldsEverythingAcknowledged: a store with merged rows,
// pending generations, unsealed rows and rewrites of base ids: the
// snapshot's version holds exactly what a cursor walk of all sees right
// after a flush, by number and by tag, and appends after the call change
// nothing in it.
func TestSnapshotHoldsEverythingAcknowledged(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "snap")
	layeredStore(t, s)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := cursorWalk(t, s, ListOptions{Source: SourceAll})
	if len(want) != 29 || want["base-001"] != "r-rewritten|<nil>" && want["base-001"] != "r-rewritten|text base" {
		t.Fatalf("the walk before: %d rows, base-001 %q", len(want), want["base-001"])
	}
	if _, err := s.Append(ctx, recs("unsealed-at-call", 2, "r-late")); err != nil {
		t.Fatal(err)
	}
	want = cursorWalk(t, s, ListOptions{Source: SourceAll}) // no flush: not readable yet
	snap, err := s.CreateSnapshot(ctx, time.Hour, "trainer")
	if err != nil {
		t.Fatal(err)
	}
	// The rows unsealed at the call are acknowledged: they are in it too.
	want["unsealed-at-call-000"], want["unsealed-at-call-001"] = "r-late|text unsealed-at-call", "r-late|text unsealed-at-call"
	if _, err := s.Append(ctx, recs("after", 3, "r-after")); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, recs("after2", 3, "r-after"))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	got := versionRows(t, s, snap.Version)
	if !maps.Equal(got, want) {
		t.Fatalf("snapshot version %d holds %d rows, the walk %d:\n got %v\nwant %v", snap.Version, len(got), len(want), got, want)
	}
	tag, err := s.Tag(ctx, snap.Tag)
	if err != nil || tag.Version != snap.Version || snap.Tag != SnapshotTagPrefix+snap.ID {
		t.Fatalf("tag %+v %v of snapshot %+v", tag, err, snap)
	}
	v, err := s.ResolveVersion(ctx, snap.Tag)
	if err != nil || v != snap.Version {
		t.Fatalf("resolve %s: %d %v", snap.Tag, v, err)
	}
	if got, err := s.Snapshot(ctx, snap.ID); err != nil || got.Holder != "trainer" || got.Version != snap.Version {
		t.Fatalf("Snapshot(%s) = %+v %v", snap.ID, got, err)
	}
	if len(snap.ExcludedShards) != 0 {
		t.Fatalf("one process excludes %v", snap.ExcludedShards)
	}
}

// TestSnapshotRoundsBatchCallers: 20 concurrent calls cost at most two or
// three rounds and answer as few versions, each caller with its own lease
// and tag.
func TestSnapshotRoundsBatchCallers(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "snap")
	layeredStore(t, s)
	var wg sync.WaitGroup
	start := make(chan struct{})
	snaps := make([]*SnapshotInfo, 20)
	errs := make([]error, 20)
	for i := range snaps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := s.Append(ctx, recs(fmt.Sprintf("c%02d", i), 2, "r-c")); err != nil {
				errs[i] = err
				return
			}
			snaps[i], errs[i] = s.CreateSnapshot(ctx, time.Hour, fmt.Sprint("caller-", i))
		}()
	}
	close(start)
	wg.Wait()
	versions := map[uint64]bool{}
	ids := map[string]bool{}
	for i, sn := range snaps {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		versions[sn.Version] = true
		ids[sn.ID] = true
		// Each caller's rows, acknowledged before its call, are in its version.
		rows := versionRows(t, s, sn.Version)
		for _, id := range []string{fmt.Sprintf("c%02d-000", i), fmt.Sprintf("c%02d-001", i)} {
			if _, ok := rows[id]; !ok {
				t.Fatalf("caller %d: version %d lacks its row %s", i, sn.Version, id)
			}
		}
	}
	if n := s.SnapshotRounds(); n > 3 || len(versions) > 3 {
		t.Fatalf("20 concurrent callers cost %d rounds and %d versions", n, len(versions))
	}
	if len(ids) != 20 {
		t.Fatalf("%d distinct snapshots for 20 callers", len(ids))
	}
	all, err := s.Snapshots(ctx)
	if err != nil || len(all) != 20 {
		t.Fatalf("Snapshots: %d %v", len(all), err)
	}
	t.Logf("20 callers: %d rounds, %d versions", s.SnapshotRounds(), len(versions))
}

// TestSnapshotCallerDuringARoundJoinsTheNext: rows acknowledged while a
// round runs (after its seal) are in the version of a call made after
// them, which must not be served by the running round.
func TestSnapshotCallerDuringARoundJoinsTheNext(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "snap")
	appendFlush(t, s, recs("a", 3, "r"))
	entered, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	afterSnapshotSeal = func(st *Store) {
		if st == s {
			once.Do(func() { close(entered); <-resume })
		}
	}
	defer func() { afterSnapshotSeal = nil }()
	first := make(chan *SnapshotInfo, 1)
	go func() {
		sn, err := s.CreateSnapshot(ctx, time.Hour, "first")
		if err != nil {
			t.Error(err)
		}
		first <- sn
	}()
	<-entered // the first round has sealed and waits
	if _, err := s.Append(ctx, recs("late", 2, "r")); err != nil {
		t.Fatal(err)
	}
	second := make(chan *SnapshotInfo, 1)
	go func() {
		sn, err := s.CreateSnapshot(ctx, time.Hour, "second")
		if err != nil {
			t.Error(err)
		}
		second <- sn
	}()
	time.Sleep(50 * time.Millisecond) // let the second caller join
	close(resume)
	a, b := <-first, <-second
	if a == nil || b == nil {
		t.FailNow()
	}
	if _, ok := versionRows(t, s, b.Version)["late-000"]; !ok {
		t.Fatalf("the second caller's version %d lacks rows acknowledged before its call (the first's is %d)", b.Version, a.Version)
	}
	if _, ok := versionRows(t, s, a.Version)["late-000"]; ok {
		t.Fatalf("the first round's version %d holds rows sealed after it: the hook did not hold it", a.Version)
	}
}

// TestSnapshotLeaseKeepsVersionThenLetsGo: while a snapshot lives, merges,
// a compaction and cleanups leave its version readable; after release its
// tag is gone and the next cleanup removes it; after expiry, the
// maintainer's cleanup deletes the tag and the version.
func TestSnapshotLeaseKeepsVersionThenLetsGo(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "snap")
	var skew time.Duration // the store's clock runs ahead by this much
	s.now = func() time.Time { return time.Now().Add(skew) }
	layeredStore(t, s)
	released, err := s.CreateSnapshot(ctx, time.Hour, "r")
	if err != nil {
		t.Fatal(err)
	}
	want := versionRows(t, s, released.Version)
	appendFlush(t, s, recs("more", 4, "r"))
	expiring, err := s.CreateSnapshot(ctx, time.Minute, "e")
	if err != nil {
		t.Fatal(err)
	}
	if expiring.Version == released.Version {
		t.Fatalf("two snapshots on one version %d: the test needs two", expiring.Version)
	}
	wantE := versionRows(t, s, expiring.Version)
	zero := time.Duration(0)
	policy := CleanupOptions{ReadGrace: &zero}
	// A long read of the leased versions, with maintenance in between.
	for i := range 3 {
		appendFlush(t, s, recs(fmt.Sprintf("m%d", i), 3, "r"))
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := CleanupWith(ctx, s, policy); err != nil {
			t.Fatal(err)
		}
		if got := versionRows(t, s, released.Version); !maps.Equal(got, want) {
			t.Fatalf("pass %d: leased version %d reads %d rows, want %d", i, released.Version, len(got), len(want))
		}
		if got := versionRows(t, s, expiring.Version); !maps.Equal(got, wantE) {
			t.Fatalf("pass %d: leased version %d changed", i, expiring.Version)
		}
	}
	if err := s.ReleaseSnapshot(ctx, released.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tag(ctx, released.Tag); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tag of a released snapshot: %v", err)
	}
	if _, err := s.Snapshot(ctx, released.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a released snapshot: %v", err)
	}
	if _, err := CleanupWith(ctx, s, policy); err != nil {
		t.Fatal(err)
	}
	if versionAlive(t, s, released.Version) {
		t.Fatalf("version %d of a released snapshot survived cleanup", released.Version)
	}
	if !versionAlive(t, s, expiring.Version) {
		t.Fatalf("version %d of a live snapshot was cleaned up", expiring.Version)
	}
	// Renewal keeps it; expiry lets it go.
	if _, err := s.RenewSnapshot(ctx, expiring.ID, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	skew = 90 * time.Second
	if _, err := CleanupWith(ctx, s, policy); err != nil {
		t.Fatal(err)
	}
	if !versionAlive(t, s, expiring.Version) {
		t.Fatalf("a renewed snapshot's version %d was cleaned up", expiring.Version)
	}
	skew = 2 * time.Hour
	if _, err := CleanupWith(ctx, s, policy); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tag(ctx, expiring.Tag); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tag of an expired snapshot: %v", err)
	}
	if versionAlive(t, s, expiring.Version) {
		t.Fatalf("version %d of an expired snapshot survived cleanup", expiring.Version)
	}
	if _, err := s.RenewSnapshot(ctx, expiring.ID, time.Hour); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renewing an expired snapshot: %v", err)
	}
	// A plain lease is not a snapshot.
	l, err := s.TakeLease(ctx, 0, time.Hour, "reader")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, l.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a plain lease read as a snapshot: %v", err)
	}
	if err := s.ReleaseSnapshot(ctx, l.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("releasing a plain lease as a snapshot: %v", err)
	}
}

// TestSnapshotAcrossWorkers: another live worker's pending rows are not
// in the version and its shard is listed as excluded; a dead worker's
// acknowledged rows, sealed or only in its log, are merged in (orphan
// merge); snapshotting the other worker too gives a version with all.
func TestSnapshotAcrossWorkers(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	opts := func(owner string, ttl time.Duration) Options {
		return Options{IndexColumns: []string{}, OwnerID: owner, HeartbeatInterval: ttl / 4, HeartbeatTTL: ttl}
	}
	a := mustStore(t, newCatalog(t, root, "a", opts("owner-a", 10*time.Second)), "exp")
	b := mustStore(t, newCatalog(t, root, "b", opts("owner-b", 10*time.Second)), "exp")
	dead := mustStore(t, NewCatalog(root, ShardID("dead"), opts("owner-dead", 200*time.Millisecond)), "exp")
	appendFlush(t, a, recs("a", 3, "r"))
	appendFlush(t, b, recs("b", 4, "r"))
	if _, err := b.Append(ctx, recs("b-unsealed", 2, "r")); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, dead, recs("dead-sealed", 2, "r"))
	if _, err := dead.Append(ctx, recs("dead-log", 2, "r")); err != nil {
		t.Fatal(err)
	}
	dead.writer.Load().Abandon() // kill -9: its heartbeat stops
	time.Sleep(400 * time.Millisecond)

	sa, err := a.CreateSnapshot(ctx, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	rows := versionRows(t, a, sa.Version)
	for _, id := range []string{"a-000", "dead-sealed-000", "dead-log-001"} {
		if _, ok := rows[id]; !ok {
			t.Fatalf("version %d lacks %s: %v", sa.Version, id, slices.Sorted(maps.Keys(rows)))
		}
	}
	if _, ok := rows["b-000"]; ok {
		t.Fatalf("version %d holds a live worker's pending row", sa.Version)
	}
	if len(sa.ExcludedShards) != 1 || sa.ExcludedShards[0].ShardID != ShardID("b") || sa.ExcludedShards[0].PendingRows != 4 {
		t.Fatalf("excluded %+v, want shard b with 4 pending rows", sa.ExcludedShards)
	}
	sb, err := b.CreateSnapshot(ctx, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Version <= sa.Version {
		t.Fatalf("b's version %d not above a's %d", sb.Version, sa.Version)
	}
	rows = versionRows(t, b, sb.Version)
	if len(rows) != 3+4+2+2+2 {
		t.Fatalf("the highest version holds %d rows, want 13: %v", len(rows), slices.Sorted(maps.Keys(rows)))
	}
	if len(sb.ExcludedShards) != 0 {
		t.Fatalf("b's snapshot excludes %+v (a has nothing pending)", sb.ExcludedShards)
	}
}

// handlePeers is SnapshotPeers over other Store handles on the same root,
// as the worker's is over their workers' HTTP routes; a shard missing from
// the map is unreachable, and noMerge peers accept merges and do nothing.
type handlePeers struct {
	stores  map[string]*Store
	noMerge map[string]bool
	calls   sync.Map // "seal:"/"merge:" + shard -> count
}

func (p *handlePeers) count(k string) {
	v, _ := p.calls.LoadOrStore(k, new(int))
	*v.(*int)++
}

func (p *handlePeers) Seal(ctx context.Context, _ string, x api.SnapshotShard) error {
	st, ok := p.stores[x.ShardID]
	if !ok {
		return errors.New("no endpoint registered for it")
	}
	p.count("seal:" + x.ShardID)
	return st.Flush(ctx)
}

func (p *handlePeers) Merge(ctx context.Context, _ string, x api.SnapshotShard) error {
	p.count("merge:" + x.ShardID)
	if p.noMerge[x.ShardID] {
		return nil
	}
	_, err := p.stores[x.ShardID].Merge(ctx)
	return err
}

// TestSnapshotSealsOtherWorkersThroughPeers: with SnapshotPeers, a snapshot
// on one worker holds what other live workers acknowledged before the call,
// sealed or not, their shards sealed and merged by their owners (several
// merge passes when the owner's pass is capped), and lists only the
// shards it could not cover, each with the reason: an owner it cannot
// reach (whose unsealed rows are then missing, though none were pending),
// an owner whose merges make no progress. Without peers the same store
// answers as before (live shards with pending generations).
func TestSnapshotSealsOtherWorkersThroughPeers(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	opts := func(owner string, maxGens int) Options {
		return Options{IndexColumns: []string{}, OwnerID: owner, HeartbeatInterval: time.Second, HeartbeatTTL: 10 * time.Second, MergeMaxGenerations: maxGens}
	}
	a := mustStore(t, newCatalog(t, root, "a", opts("owner-a", 0)), "exp")
	b := mustStore(t, newCatalog(t, root, "b", opts("owner-b", 1)), "exp")
	gone := mustStore(t, newCatalog(t, root, "unreachable", opts("owner-u", 0)), "exp")
	lazy := mustStore(t, newCatalog(t, root, "lazy", opts("owner-l", 0)), "exp")
	appendFlush(t, a, recs("a", 3, "r"))
	for g := range 3 { // three generations: three capped passes
		appendFlush(t, b, recs(fmt.Sprintf("b%d", g), 2, "r"))
	}
	if _, err := b.Append(ctx, recs("b-unsealed", 2, "r")); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Append(ctx, recs("u-unsealed", 2, "r")); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, lazy, recs("lazy", 2, "r"))

	peers := &handlePeers{
		stores:  map[string]*Store{ShardID("b"): b, ShardID("lazy"): lazy},
		noMerge: map[string]bool{ShardID("lazy"): true},
	}
	sa, err := a.CreateSnapshotWith(ctx, time.Hour, "", peers)
	if err != nil {
		t.Fatal(err)
	}
	rows := versionRows(t, a, sa.Version)
	for _, id := range []string{"a-000", "b0-000", "b2-001", "b-unsealed-000", "b-unsealed-001"} {
		if _, ok := rows[id]; !ok {
			t.Fatalf("version %d lacks %s: %v", sa.Version, id, slices.Sorted(maps.Keys(rows)))
		}
	}
	if len(rows) != 3+6+2 {
		t.Fatalf("version %d holds %d rows, want 11 (a's and b's): %v", sa.Version, len(rows), slices.Sorted(maps.Keys(rows)))
	}
	if v, _ := peers.calls.Load("merge:" + ShardID("b")); v == nil || *v.(*int) < 3 {
		t.Fatalf("b merged in %v passes, want at least 3 (capped at 1 generation)", v)
	}
	byShard := map[string]api.SnapshotShard{}
	for _, x := range sa.ExcludedShards {
		byShard[x.ShardID] = x
	}
	if len(byShard) != 2 {
		t.Fatalf("excluded %+v, want the unreachable and the lazy shard", sa.ExcludedShards)
	}
	if x := byShard[ShardID("unreachable")]; x.PendingGenerations != 0 || !strings.Contains(x.Reason, "no endpoint registered") {
		t.Fatalf("unreachable shard listed as %+v", x)
	}
	if x := byShard[ShardID("lazy")]; x.PendingRows != 2 || !strings.Contains(x.Reason, "no progress") {
		t.Fatalf("lazy shard listed as %+v", x)
	}

	// Without peers: the old answer (live shards with pending generations).
	sn, err := a.CreateSnapshot(ctx, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sn.ExcludedShards) != 1 || sn.ExcludedShards[0].ShardID != ShardID("lazy") || sn.ExcludedShards[0].Reason != "" {
		t.Fatalf("without peers: excluded %+v, want the lazy shard alone", sn.ExcludedShards)
	}
}

// TestExportSourcesFiltersColumns: Export of each source equals the
// records listing's rows, with filters and a column list; a version
// exports that version alone; bad requests fail before any batch.
func TestExportSourcesFiltersColumns(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "exp")
	layeredStore(t, s)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	export := func(o ExportOptions) (map[string]string, *arrow.Schema) {
		t.Helper()
		out := map[string]string{}
		var sch *arrow.Schema
		err := s.Export(ctx, o, func(b arrow.RecordBatch) error {
			if sch != nil && !sch.Equal(b.Schema()) {
				return fmt.Errorf("schema changed: %v then %v", sch, b.Schema())
			}
			sch = b.Schema()
			ids := b.Column(0).(*array.String)
			var rs *array.String
			if b.NumCols() > 1 {
				rs = b.Column(1).(*array.String)
			}
			for i := range ids.Len() {
				if _, dup := out[ids.Value(i)]; dup {
					return fmt.Errorf("%s twice", ids.Value(i))
				}
				v := ""
				if rs != nil {
					v = rs.Value(i)
				}
				out[ids.Value(i)] = v
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, sch
	}
	keys := func(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
	for _, src := range []Source{SourceAll, SourceWAL, SourceFragments} {
		for _, f := range [][]Filter{nil, {{ColRolloutID, "r-rewritten"}}} {
			got, sch := export(ExportOptions{Source: src, Filters: f, Columns: []string{ColID, ColRolloutID}, BatchRows: 4})
			want := listIDs(t, s, ListOptions{Source: src, Filters: f})
			if !slices.Equal(keys(got), slices.Sorted(slices.Values(want))) {
				t.Fatalf("%s %v: export %v, list %v", src, f, keys(got), want)
			}
			if sch != nil && (sch.NumFields() != 2 || sch.Field(1).Name != ColRolloutID) {
				t.Fatalf("schema %v", sch)
			}
		}
	}
	// Every column but the payload by default.
	_, sch := export(ExportOptions{})
	if sch.NumFields() != len(ScanColumns()) || sch.HasField(ColPayload) {
		t.Fatalf("default columns %v", sch)
	}
	if !sch.Equal(ExportSchema(ScanColumns())) {
		t.Fatalf("schema %v, ExportSchema %v", sch, ExportSchema(ScanColumns()))
	}
	sn, err := s.CreateSnapshot(ctx, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, recs("later", 2, "r"))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := export(ExportOptions{Version: sn.Version, Columns: []string{ColID, ColRolloutID}})
	want := versionRows(t, s, sn.Version)
	if !slices.Equal(keys(got), keys(want)) {
		t.Fatalf("export of version %d: %d rows, version holds %d", sn.Version, len(got), len(want))
	}
	for _, bad := range []ExportOptions{
		{Columns: []string{"nope"}},
		{Columns: []string{ColPayload}},
		{Columns: []string{ColID, ColID}},
		{Filters: []Filter{{"reward", "1"}}},
		{Source: "everything"},
		{Version: sn.Version, Source: SourceAll},
	} {
		called := false
		err := s.Export(ctx, bad, func(arrow.RecordBatch) error { called = true; return nil })
		var ve *ValidationError
		if !errors.As(err, &ve) || called {
			t.Fatalf("%+v: %v (streamed: %v)", bad, err, called)
		}
	}
	if err := s.Export(ctx, ExportOptions{Version: 9999}, func(arrow.RecordBatch) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing version: %v", err)
	}
}
