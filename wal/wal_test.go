package wal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/objstore"
)

var rowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func rows(ids ...string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rowSchema)
	defer b.Release()
	for i, id := range ids {
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

func opts(store objstore.Store) Options {
	return Options{Store: store, Shard: "s1", Schema: rowSchema, KeyColumn: "id"}
}

func claim(t *testing.T, o Options) *Writer {
	t.Helper()
	w, err := Claim(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func appendIDs(t *testing.T, w *Writer, ids ...string) error {
	t.Helper()
	r := rows(ids...)
	defer r.Release()
	return w.Append(context.Background(), r)
}

// sealedIDs reads every id in the shard's sealed generations.
func sealedIDs(t *testing.T, store objstore.Store, shard string) []string {
	t.Helper()
	ctx := context.Background()
	m, err := LoadManifest(ctx, store, shard)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range m.Generations {
		r, err := OpenGeneration(ctx, store, shard, g)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.Read(ctx, []int32{0}, 0, r.NumRows())
		if err != nil {
			t.Fatal(err)
		}
		c := rec.Column(0).(*array.String)
		for i := 0; i < c.Len(); i++ {
			ids = append(ids, c.Value(i))
		}
		rec.Release()
	}
	sort.Strings(ids)
	return ids
}

func TestAppendSealGC(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	if err := appendIDs(t, w, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := appendIDs(t, w, "c", "a"); err != nil { // "a" again: newest wins at seal
		t.Fatal(err)
	}
	if w.UnsealedRows() != 4 {
		t.Fatalf("unsealed %d", w.UnsealedRows())
	}
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(ctx); err != nil { // nothing buffered: no-op
		t.Fatal(err)
	}
	m := w.Manifest()
	if len(m.Generations) != 1 || m.Generations[0].Rows != 3 || m.ReplayAfter != 2 || m.Epoch != 1 {
		t.Fatalf("manifest %+v", m)
	}
	if g := m.Generations[0]; g.MinID != "a" || g.MaxID != "c" || g.Bytes <= 0 {
		t.Fatalf("generation %+v", g)
	}
	if got := sealedIDs(t, store, "s1"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("sealed %v", got)
	}
	w.WaitCollect()
	if objs, _ := store.List(ctx, shardDir("s1")+"wal/"); len(objs) != 0 {
		t.Fatalf("WAL entries not collected: %v", objs)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := appendIDs(t, w, "z"); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	shards, err := ListShards(ctx, store)
	if err != nil || !slices.Equal(shards, []string{"s1"}) {
		t.Fatalf("shards %v %v", shards, err)
	}
}

func TestGroupCommit(t *testing.T) {
	store := objstore.NewMemory()
	// Slow puts let appends pile up behind the one in flight.
	slow := objstore.NewFaulty(store, objstore.FaultConfig{PerOp: map[objstore.Op]objstore.Rates{
		objstore.OpPutIfAbsent: {MinLatency: 2 * time.Millisecond, MaxLatency: 3 * time.Millisecond},
	}})
	o := opts(slow)
	o.Metrics = NewMetrics(nil) // this test's own counts
	w := claim(t, o)
	var wg sync.WaitGroup
	const n = 200
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := appendIDs(t, w, fmt.Sprintf("id-%03d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	entries, _ := observed(t, o.Metrics.EntryRows) // one sample per entry
	if entries >= n/4 {
		t.Fatalf("%d appends took %d entries: no group commit", n, entries)
	}
	t.Logf("%d appends in %d WAL entries", n, entries)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sealedIDs(t, store, "s1"); len(got) != n {
		t.Fatalf("sealed %d rows, want %d", len(got), n)
	}
}

func TestCrashReplay(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	_ = appendIDs(t, w, "a")
	_ = w.Seal(ctx)
	_ = appendIDs(t, w, "b")
	_ = appendIDs(t, w, "c")
	w.Abandon() // crash: b and c are only in the WAL

	o := opts(store)
	o.Metrics = NewMetrics(nil)
	w2 := claim(t, o)
	if w2.Epoch() != 2 {
		t.Fatalf("epoch %d", w2.Epoch())
	}
	if got := counted(t, o.Metrics.AdoptedRows); got != 2 {
		t.Fatalf("adopted rows %v after replaying b and c, want 2", got)
	}
	if got := sealedIDs(t, store, "s1"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after replay %v", got)
	}
	if err := appendIDs(t, w2, "d"); err != nil {
		t.Fatal(err)
	}
	w2.Abandon()
	w3 := claim(t, opts(store))
	defer w3.Abandon()
	if got := sealedIDs(t, store, "s1"); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("after second replay %v", got)
	}
}

func TestFencing(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	a := claim(t, opts(store))
	if err := appendIDs(t, a, "a1"); err != nil {
		t.Fatal(err)
	}
	b := claim(t, opts(store)) // takes the shard; replays a1
	defer b.Abandon()
	if err := appendIDs(t, a, "a2"); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer appended: %v", err)
	}
	if err := a.Seal(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer sealed: %v", err)
	}
	if err := appendIDs(t, b, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	got := sealedIDs(t, store, "s1")
	// a2 was not acknowledged; it may or may not survive, but a1 and b1 must.
	if !slices.Contains(got, "a1") || !slices.Contains(got, "b1") {
		t.Fatalf("acknowledged rows missing: %v", got)
	}
}

// TestStalledWriterAfterGC is the zombie hazard of doc.go: a writer stalls
// inside its WAL put; a new writer claims the shard, seals past that
// position, and GC deletes the entry name; then the stalled put lands on the
// free name. The stalled writer must not acknowledge.
func TestStalledWriterAfterGC(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	stall := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hooked := &hookStore{Store: store, beforePut: func(key string) {
		if strings.HasSuffix(key, fmt.Sprintf("%020d.arrow", 2)) {
			once.Do(func() { close(stall); <-release })
		}
	}}
	a := claim(t, opts(hooked))
	if err := appendIDs(t, a, "a1"); err != nil { // position 1
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- appendIDs(t, a, "zombie") }() // position 2, stalls
	<-stall

	// b replays 1 and puts its fence entry at 2.
	b := claim(t, opts(store))
	if err := appendIDs(t, b, "b1"); err != nil { // b writes position 3
		t.Fatal(err)
	}
	if err := b.Seal(ctx); err != nil { // replay_after = 3; GC deletes 1 and 3
		t.Fatal(err)
	}
	b.WaitCollect()
	for _, p := range []uint64{1, 3} {
		if _, err := store.Head(ctx, entryKey("s1", p)); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("position %d not collected: %v", p, err)
		}
	}
	// The hazard: were position 2 deleted, the stalled put would land on
	// a free name, unread by any replay. The fence entry is never collected.
	if _, err := store.Head(ctx, entryKey("s1", 2)); err != nil {
		t.Fatalf("the claim's fence entry at position 2 was collected: %v", err)
	}
	close(release) // the stalled put now meets the fence entry
	if err := <-res; !errors.Is(err, ErrFenced) {
		t.Fatalf("stalled writer acknowledged after GC: %v", err)
	}
	b.Abandon()
	c := claim(t, opts(store))
	defer c.Abandon()
	got := sealedIDs(t, store, "s1")
	if !slices.Contains(got, "a1") || !slices.Contains(got, "b1") || slices.Contains(got, "zombie") {
		t.Fatalf("rows %v", got)
	}
}

type hookStore struct {
	objstore.Store
	beforePut func(key string)
}

func (h *hookStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	h.beforePut(key)
	return h.Store.PutIfAbsent(ctx, key, data)
}

// TestAdoptsOlderEpochEntry: a deposed writer's entry landed at the new
// owner's next position; it may have been acknowledged, so the owner keeps it.
func TestAdoptsOlderEpochEntry(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	a := claim(t, opts(store))
	a.Abandon()
	b := claim(t, opts(store))
	defer b.Abandon()
	r := rows("from-zombie")
	data, err := encodeEntry(rowSchema, []arrow.RecordBatch{r}, "s1", 1, 2)
	r.Release()
	if err != nil {
		t.Fatal(err)
	}
	// b's fence entry is at 1, so b's next position is 2.
	if err := store.PutIfAbsent(ctx, entryKey("s1", 2), data); err != nil {
		t.Fatal(err)
	}
	if err := appendIDs(t, b, "mine"); err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sealedIDs(t, store, "s1"); !slices.Equal(got, []string{"from-zombie", "mine"}) {
		t.Fatalf("rows %v", got)
	}
}

func TestLostAckIsRecognised(t *testing.T) {
	store := objstore.NewMemory()
	f := objstore.NewFaulty(store, objstore.FaultConfig{Hook: objstore.FailKey(objstore.OpPutIfAbsent,
		func(k string) bool { return strings.Contains(k, "/wal/") }, objstore.FaultLostAck)})
	o := opts(f)
	w := claim(t, o)
	// Every WAL put lands but reports failure; the retry sees our own bytes.
	if err := appendIDs(t, w, "x"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sealedIDs(t, store, "s1"); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("rows %v", got)
	}
}

func TestAmbiguousFailureNeverLeavesAGap(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	var mu sync.Mutex
	failing := true
	f := objstore.NewFaulty(store, objstore.FaultConfig{})
	f.SetHook(func(op objstore.Op, key string, _ int) objstore.Fault {
		mu.Lock()
		defer mu.Unlock()
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/wal/") && failing {
			return objstore.FaultLostAck // lands, reports an error, every retry too
		}
		return objstore.FaultNone
	})
	w := claim(t, opts(f))
	if err := appendIDs(t, w, "p1"); err == nil {
		// retries see ErrExists with our bytes: acknowledged
	} else {
		t.Fatalf("lost ack with identical bytes should succeed: %v", err)
	}
	f.SetHook(func(op objstore.Op, key string, _ int) objstore.Fault {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/wal/") {
			return objstore.FaultError
		}
		return objstore.FaultNone
	})
	if err := appendIDs(t, w, "p2"); err == nil {
		t.Fatal("append succeeded while every WAL put fails")
	}
	f.SetHook(nil)
	if err := appendIDs(t, w, "p3"); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	got := sealedIDs(t, store, "s1")
	if !slices.Contains(got, "p1") || !slices.Contains(got, "p3") {
		t.Fatalf("rows %v", got)
	}
	if m := w.Manifest(); m.ReplayAfter != 2 {
		t.Fatalf("replay_after %d: positions must stay dense", m.ReplayAfter)
	}
	w.Abandon()
}

func TestDropGenerations(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	defer w.Abandon()
	for i := 0; i < 3; i++ {
		_ = appendIDs(t, w, fmt.Sprintf("g%d", i))
		if err := w.Seal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	gens := w.Manifest().Generations
	if len(gens) != 3 {
		t.Fatalf("gens %v", gens)
	}
	if err := w.DropGenerations(ctx, gens[1].Generation); err != nil {
		t.Fatal(err)
	}
	w.WaitCollect()
	if m := w.Manifest(); len(m.Generations) != 1 || m.Generations[0].Generation != gens[2].Generation {
		t.Fatalf("after drop %+v", m.Generations)
	}
	if _, err := store.Head(ctx, GenerationKey("s1", gens[0])); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal("dropped generation file still there")
	}
	if got := sealedIDs(t, store, "s1"); !slices.Equal(got, []string{"g2"}) {
		t.Fatalf("rows %v", got)
	}
}

func TestManifestDiscovery(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	for i := 0; i < 5; i++ {
		_ = appendIDs(t, w, fmt.Sprintf("r%d", i))
		_ = w.Seal(ctx)
	}
	w.Abandon()
	want := w.Manifest().Version
	// Stale hint and no hint both find the latest.
	_ = store.Put(ctx, hintKey("s1"), []byte(`{"version":2}`))
	if m, err := LoadManifest(ctx, store, "s1"); err != nil || m.Version != want {
		t.Fatalf("stale hint: %v %v", m, err)
	}
	_ = store.Delete(ctx, hintKey("s1"))
	if m, err := LoadManifest(ctx, store, "s1"); err != nil || m.Version != want {
		t.Fatalf("no hint: %v %v", m, err)
	}
	if _, err := LoadManifest(ctx, store, "nope"); !errors.Is(err, ErrNoShard) {
		t.Fatalf("missing shard: %v", err)
	}
	for _, v := range []uint64{1, 2, 255, 1 << 40} {
		if got, ok := parseManifestKey(manifestKey("s", v)); !ok || got != v {
			t.Fatalf("name round trip %d -> %d", v, got)
		}
	}
}

// TestClaimSweepsPredecessorsLeftovers: WAL entries below the replay
// position and old manifest versions that a crashed writer never collected
// are deleted by the next claim; nothing above the replay position is.
func TestClaimSweepsPredecessorsLeftovers(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	for i := 0; i < 20; i++ {
		_ = appendIDs(t, w, fmt.Sprintf("r%d", i))
		if err := w.Seal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.WaitCollect()
	// Leftovers as if collection had never run: old entries and versions.
	for _, k := range []string{entryKey("s1", 3), entryKey("s1", 7), manifestKey("s1", 2)} {
		if err := store.Put(ctx, k, []byte("stale")); err != nil {
			t.Fatal(err)
		}
	}
	_ = appendIDs(t, w, "unsealed") // position 21, above replay_after
	w.Abandon()
	w2 := claim(t, opts(store))
	defer w2.Abandon()
	w2.WaitCollect()
	for _, k := range []string{entryKey("s1", 3), entryKey("s1", 7), manifestKey("s1", 2)} {
		if _, err := store.Head(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("%s survived the claim: %v", k, err)
		}
	}
	if got := sealedIDs(t, store, "s1"); !slices.Contains(got, "unsealed") || len(got) != 21 {
		t.Fatalf("rows after claim: %d %v", len(got), got)
	}
}

// TestRegression_ClaimBuildsOnTheListedLatestManifest: a hint that points
// at an old manifest version below a gap (a deleted version came back after
// a crash; the ones above it did not) made the claim write the version
// after the stale one, forking the chain and dropping the generations
// committed since.
func TestRegression_ClaimBuildsOnTheListedLatestManifest(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	for i := range 6 {
		if err := appendIDs(t, w, fmt.Sprint("r", i)); err != nil {
			t.Fatal(err)
		}
		if err := w.Seal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	latest := w.Manifest().Version
	w.Close(ctx)
	if err := store.Delete(ctx, manifestKey("s1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := writeHint(ctx, store, "s1", 2); err != nil {
		t.Fatal(err)
	}
	w2 := claim(t, opts(store))
	defer w2.Abandon()
	if got := w2.Manifest().Version; got <= latest {
		t.Fatalf("claim committed version %d, not above the latest %d", got, latest)
	}
	wantIDs(t, store, "r0", "r1", "r2", "r3", "r4", "r5")
}

// TestManifestsFromTheHintUpAreKept: with the hint written at most a few
// times a second, a burst of commits must not delete versions at or above
// it, or a reader probing up from the hint would stop at the gap.
func TestManifestsFromTheHintUpAreKept(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	defer w.Abandon()
	for i := range 3 * keepManifests {
		if err := appendIDs(t, w, fmt.Sprint("r", i)); err != nil {
			t.Fatal(err)
		}
		if err := w.Seal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.WaitCollect()
	b, err := store.Get(ctx, hintKey("s1"))
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Version uint64 }
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	latest := w.Manifest().Version
	if h.Version+keepManifests >= latest {
		t.Skipf("the hint (%d) kept up with the commits (%d): nothing to check", h.Version, latest)
	}
	for v := h.Version; v <= latest; v++ {
		if _, err := store.Head(ctx, manifestKey("s1", v)); err != nil {
			t.Fatalf("version %d (hint %d, latest %d): %v", v, h.Version, latest, err)
		}
	}
	if m, err := LoadManifest(ctx, store, "s1"); err != nil || m.Version != latest {
		t.Fatalf("LoadManifest: %v, %v; want version %d", m, err, latest)
	}
}

// TestRegression_ReplayFetchesListedEntriesAtOnce: a claim over 40
// unsealed object entries reads them a window at a time, not one round
// trip each (a worker's start on S3 replayed 33 entries in 33 sequential
// requests), and adopts every row in order.
func TestRegression_ReplayFetchesListedEntriesAtOnce(t *testing.T) {
	mem := objstore.NewMemory()
	w := claim(t, opts(mem))
	var want []string
	for i := range 40 {
		id := fmt.Sprintf("r%02d", i)
		want = append(want, id)
		if err := appendIDs(t, w, id); err != nil {
			t.Fatal(err)
		}
	}
	w.Abandon() // crash: every row only in the WAL
	cs := objstore.NewCounting(mem, 20*time.Millisecond)
	o := opts(cs)
	o.Metrics = NewMetrics(nil)
	w2 := claim(t, o)
	defer w2.Abandon()
	if got := counted(t, o.Metrics.AdoptedRows); got != 40 {
		t.Fatalf("adopted %v rows, want 40", got)
	}
	if got := sealedIDs(t, mem, "s1"); !slices.Equal(got, want) {
		t.Fatalf("after replay %v, want %v", got, want)
	}
	t.Logf("claim: %s", cs.Counts())
	if c := cs.Counts(); c.Sequential > 12 {
		t.Errorf("claim over 40 entries: %s; want the entries fetched in windows, the first and the one after them each read beside a listing (at most 12 sequential; one entry at a time took 51, the windows alone 15)", c)
	}
}

// TestRegression_IdleRestartsReplayNoPileOfFences: a store restarted while
// idle (each claim puts a fence entry and seals no rows) must not replay
// the fences of every claim before: the writer commits replay_after past
// them. Before, the eighth claim read seven fences more than the second.
func TestRegression_IdleRestartsReplayNoPileOfFences(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	w := claim(t, opts(mem))
	if err := appendIDs(t, w, "a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	w.Abandon()
	gets := map[int]int{}
	for i := 2; i <= 8; i++ {
		cs := objstore.NewCounting(mem, 0)
		w := claim(t, opts(cs))
		gets[i] = cs.Counts().Calls[objstore.OpGet]
		if err := w.Seal(ctx); err != nil { // after the loop's first step
			t.Fatal(err)
		}
		m, err := LoadManifest(ctx, mem, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if m.ReplayAfter != w.nextPos-1 {
			t.Fatalf("claim %d: replay_after %d with the writer at position %d; want it past the fences", i, m.ReplayAfter, w.nextPos)
		}
		w.Abandon() // restarted while idle
	}
	t.Logf("object gets per claim: %v", gets)
	if gets[8] > gets[2] {
		t.Errorf("the eighth idle claim read %d objects, the second %d; want no more", gets[8], gets[2])
	}
	wantIDs(t, mem, "a")
}
