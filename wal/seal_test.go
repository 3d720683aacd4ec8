package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// genGate holds (or fails) the creation of generation files.
type genGate struct {
	objstore.Store
	hold chan struct{} // when not nil, a generation write waits for it
	fail atomic.Bool   // generation writes fail
}

func (g *genGate) Create(ctx context.Context, key string) (objstore.ObjectWriter, error) {
	if strings.Contains(key, "/gen/") {
		if g.hold != nil {
			<-g.hold
		}
		if g.fail.Load() {
			return nil, errors.New("injected: generation write failed")
		}
	}
	return g.Store.Create(ctx, key)
}

// TestAppendsContinueDuringSeal: a full memtable is sealed off the writer's
// loop, so appends are acknowledged while its generation is being written,
// and an explicit Seal answers only once every earlier row is committed.
func TestAppendsContinueDuringSeal(t *testing.T) {
	ctx := context.Background()
	gate := &genGate{Store: objstore.NewMemory(), hold: make(chan struct{})}
	o := opts(gate)
	o.MaxMemtableRows = 4
	w := claim(t, o)
	defer w.Abandon()
	if err := appendIDs(t, w, "a", "b", "c", "d"); err != nil { // fills the memtable: a seal starts
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- appendIDs(t, w, "e") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an append waited for the seal in flight")
	}
	if got := w.UnsealedRows(); got != 5 {
		t.Fatalf("unsealed rows %d, want 5 (4 sealing + 1)", got)
	}
	sealed := make(chan error, 1)
	go func() { sealed <- w.Seal(ctx) }()
	select {
	case err := <-sealed:
		t.Fatalf("Seal returned (%v) before the generation in flight was written", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate.hold)
	if err := <-sealed; err != nil {
		t.Fatal(err)
	}
	if got := sealedIDs(t, gate, "s1"); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("sealed %v", got)
	}
	if m := w.Manifest(); len(m.Generations) != 2 || m.ReplayAfter != 2 || w.UnsealedRows() != 0 {
		t.Fatalf("manifest %+v, unsealed %d", m, w.UnsealedRows())
	}
}

// TestFailedBackgroundSealKeepsRows: when writing a generation fails, its
// rows (acknowledged) stay buffered and the next seal commits them, in
// order, with nothing lost or duplicated.
func TestFailedBackgroundSealKeepsRows(t *testing.T) {
	ctx := context.Background()
	gate := &genGate{Store: objstore.NewMemory()}
	gate.fail.Store(true)
	o := opts(gate)
	o.MaxMemtableRows = 2
	w := claim(t, o)
	defer w.Abandon()
	for i := range 5 {
		if err := appendIDs(t, w, fmt.Sprint("k", i), "dup"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Seal(ctx); err == nil {
		t.Fatal("Seal succeeded while generation writes fail")
	}
	if w.UnsealedRows() != 10 || len(w.Manifest().Generations) != 0 {
		t.Fatalf("unsealed %d, manifest %+v", w.UnsealedRows(), w.Manifest())
	}
	gate.fail.Store(false)
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"dup", "k0", "k1", "k2", "k3", "k4"}
	if got := sealedIDs(t, gate, "s1"); !slices.Equal(got, want) {
		t.Fatalf("sealed %v, want %v", got, want)
	}
	if m := w.Manifest(); m.ReplayAfter != 5 {
		t.Fatalf("replay_after %d, want 5", m.ReplayAfter)
	}
	// A successor replays nothing and finds every row once.
	w.Abandon()
	w2 := claim(t, opts(gate))
	defer w2.Abandon()
	if got := sealedIDs(t, gate, "s1"); !slices.Equal(got, want) {
		t.Fatalf("after reclaim %v", got)
	}
}

// TestReusedEntryNameIsRefused: bytes under an entry's name that hold the
// entry of another position (the name reused, or a file copied in) must
// not be adopted as the entry it was named.
func TestReusedEntryNameIsRefused(t *testing.T) {
	store := objstore.NewMemory()
	w := claim(t, opts(store))
	defer w.Abandon()
	r := rows("x")
	defer r.Release()
	data, err := encodeEntry(rowSchema, []arrow.RecordBatch{r}, "s1", w.epoch, w.nextPos+7)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.adopt(data); err == nil || !strings.Contains(err.Error(), "holds the entry of shard s1 position 8") {
		t.Fatalf("adopting the entry of another position: %v", err)
	}
	if w.mem.rows != 0 {
		t.Fatalf("rows adopted: %d", w.mem.rows)
	}
}

// TestCollectedEntriesAreDeleted: on local disk with the object log, the
// entries a seal collects are deleted, and later entries are new files.
func TestCollectedEntriesAreDeleted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := opts(objstore.Sub(local, "ds"))
	o.ObjectLog = true
	o.Log = Log{FS: vfs.Default, Dir: filepath.Join(dir, "ds")} // beside the data, as the catalog places it
	w := claim(t, o)
	defer w.Abandon()
	for i := range 20 {
		if err := appendIDs(t, w, fmt.Sprint("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	w.WaitCollect()
	files := func() int {
		ents, err := os.ReadDir(filepath.Join(dir, "ds", shardDir("s1"), "wal"))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	if n := files(); n != 0 {
		t.Fatalf("%d files left after collecting 20 entries", n)
	}
	for i := range 5 {
		if err := appendIDs(t, w, fmt.Sprint("b", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := files(); n != 5 {
		t.Fatalf("%d files after 5 more entries, want 5", n)
	}
}

// TestSealBehindSealDoesNotBlockAppends: a Seal that arrives while a seal
// is in flight waits for the next one, but appends go on meanwhile.
func TestSealBehindSealDoesNotBlockAppends(t *testing.T) {
	ctx := context.Background()
	gate := &genGate{Store: objstore.NewMemory(), hold: make(chan struct{})}
	o := opts(gate)
	o.MaxMemtableRows = 2
	w := claim(t, o)
	defer w.Abandon()
	release := sync.OnceFunc(func() { close(gate.hold) })
	defer release()                                   // before Abandon, which waits for the held seal
	if err := appendIDs(t, w, "a", "b"); err != nil { // full: a seal starts and is held
		t.Fatal(err)
	}
	if err := appendIDs(t, w, "c"); err != nil {
		t.Fatal(err)
	}
	sealed := make(chan error, 1)
	go func() { sealed <- w.Seal(ctx) }() // must cover "c": waits for the next seal
	time.Sleep(50 * time.Millisecond)
	appended := make(chan error, 1)
	go func() { appended <- appendIDs(t, w, "d") }()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an append waited behind a Seal queued after the seal in flight")
	}
	select {
	case err := <-sealed:
		t.Fatalf("Seal returned (%v) while the seal in flight is held", err)
	default:
	}
	release()
	if err := <-sealed; err != nil {
		t.Fatal(err)
	}
	got := sealedIDs(t, gate, "s1")
	for _, id := range []string{"a", "b", "c"} {
		if !slices.Contains(got, id) {
			t.Fatalf("sealed %v: %s missing after Seal returned", got, id)
		}
	}
}
