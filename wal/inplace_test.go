package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

var textSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// textRow is the text of row i: 4 KiB, different per row (a null every 13th).
func textRow(i int) (string, bool) {
	if i%13 == 5 {
		return "", false
	}
	return fmt.Sprintf("%06d:%s", i, strings.Repeat(string(rune('a'+i%26)), 4<<10)), true
}

func textRows(from, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, textSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("id-%06d", i))
		if v, ok := textRow(i); ok {
			b.Field(1).(*array.StringBuilder).Append(v)
		} else {
			b.Field(1).(*array.StringBuilder).AppendNull()
		}
		b.Field(2).(*array.Int64Builder).AppendNull()
	}
	return b.NewRecordBatch()
}

// linkFS is the OS file system whose Link fails while fail is set.
type linkFS struct {
	vfs.FS
	fail  atomic.Bool
	links atomic.Int64
}

func (l *linkFS) Link(oldname, newname string) error {
	if l.fail.Load() {
		return errors.New("injected: link failed")
	}
	l.links.Add(1)
	return l.FS.(linker).Link(oldname, newname)
}

func inPlaceOpts(t *testing.T, fsys vfs.FS) (Options, string) {
	t.Helper()
	dir := t.TempDir()
	local, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: objstore.Sub(local, "ds"), Shard: "s1", Schema: textSchema, KeyColumn: "id", SeqColumn: "seq"}
	o.Log = Log{FS: fsys, Dir: filepath.Join(dir, "ds"), Objects: true}
	return o, filepath.Join(dir, "ds")
}

func appendText(t *testing.T, w *Writer, from, n, per int) {
	t.Helper()
	for i := from; i < from+n; i += per {
		r := textRows(i, min(per, from+n-i))
		err := w.Append(context.Background(), r)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkText reads every generation of the shard and checks that rows
// [0, n) are there once each with their text and ascending seqs.
func checkText(t *testing.T, o Options, n int) {
	t.Helper()
	ctx := context.Background()
	m, err := LoadManifest(ctx, o.Store, o.Shard)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range m.Generations {
		lg, err := LoadGeneration(ctx, o.Store, GenRef{Shard: o.Shard, Gen: g}, ReadOptions{KeyColumn: "id", Whole: true})
		if err != nil {
			t.Fatal(err)
		}
		ids := lg.Rec.Column(0).(*array.String)
		texts := lg.Rec.Column(1).(*array.String)
		seqs := lg.Rec.Column(2).(*array.Int64)
		for r := range ids.Len() {
			var i int
			fmt.Sscanf(ids.Value(r), "id-%d", &i)
			if seen[ids.Value(r)] {
				t.Fatalf("%s twice", ids.Value(r))
			}
			seen[ids.Value(r)] = true
			want, ok := textRow(i)
			if texts.IsValid(r) != ok || texts.Value(r) != want {
				t.Fatalf("generation %d row %d (%s): text of %d bytes, want %d", g.Generation, r, ids.Value(r), len(texts.Value(r)), len(want))
			}
			if r > 0 && seqs.Value(r) <= seqs.Value(r-1) {
				t.Fatalf("generation %d: seqs not ascending at row %d", g.Generation, r)
			}
		}
		lg.Rec.Release()
	}
	if len(seen) != n {
		t.Fatalf("%d rows sealed, want %d", len(seen), n)
	}
}

// TestSealInPlace: a memtable of large values is sealed into the segment
// that holds its frames: the generation's file is that segment (its first
// bytes are the frame of the memtable's first position), its text is not
// written a second time, it reads back row for row, and the segment is
// never reused as a spare.
func TestSealInPlace(t *testing.T) {
	ctx := context.Background()
	lfs := &linkFS{FS: vfs.Default}
	o, root := inPlaceOpts(t, lfs)
	w := claim(t, o)
	defer w.Abandon()
	appendText(t, w, 0, 600, 20) // 2.4 MB of text in 30 entries
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	appendText(t, w, 600, 400, 25)
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if lfs.links.Load() != 2 {
		t.Fatalf("%d seals in place, want 2", lfs.links.Load())
	}
	m := w.Manifest()
	if len(m.Generations) != 2 {
		t.Fatalf("%d generations, want 2", len(m.Generations))
	}
	// The first memtable began in the writer's first segment (1 MiB, so
	// its first rows are written anew); the second one has a segment of
	// its own from its first frame, position 31.
	firstPos := []uint64{0, 31}
	for i, g := range m.Generations {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(GenerationKey("s1", g))))
		if err != nil {
			t.Fatal(err)
		}
		if pos := binary.LittleEndian.Uint64(b[:8]); pos != firstPos[i] && (firstPos[i] != 0 || pos < 2 || pos > 30) {
			t.Fatalf("generation %d starts with position %d, want the frame of %d", g.Generation, pos, firstPos[i])
		}
		text := int64(0)
		for r := range []int{600, 400}[i] {
			v, _ := textRow(r + 600*i)
			text += int64(len(v))
		}
		if int64(len(b)) > text+text/8 {
			t.Fatalf("generation %d is %d bytes for %d bytes of text: written twice?", g.Generation, len(b), text)
		}
	}
	// A small seal (a file of its own) after a frame in a new segment:
	// then no log file is a generation's (the segment cut last kept its
	// name until the next frame started a new one; the seal collects it).
	appendText(t, w, 1000, 5, 5)
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if lfs.links.Load() != 2 {
		t.Fatalf("a seal of 5 rows was sealed in place")
	}
	m = w.Manifest()
	segs, spares := segmentFiles(t, filepath.Join(root, segmentDir("s1")))
	for _, name := range append(segs, spares...) {
		si, err := os.Stat(filepath.Join(root, segmentDir("s1"), name))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range m.Generations {
			gi, err := os.Stat(filepath.Join(root, filepath.FromSlash(GenerationKey("s1", g))))
			if err != nil {
				t.Fatal(err)
			}
			if os.SameFile(si, gi) {
				t.Fatalf("log file %s is generation %d's file after its seal", name, g.Generation)
			}
		}
	}
	checkText(t, o, 1005)
	// A new writer (after a crash) replays nothing twice.
	w.Abandon()
	checkAfterClaim(t, o, 1005)
}

// checkAfterClaim claims the shard anew (its log replayed and sealed)
// and checks rows [0, n) as checkText does.
func checkAfterClaim(t *testing.T, o Options, n int) {
	t.Helper()
	w := claim(t, o)
	defer w.Abandon()
	if err := w.Seal(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkText(t, o, n)
}

// TestSealInPlaceFailsThenSealsAgain: a seal in place whose link fails
// puts its rows back; the next seal holds them (written anew) with the
// rows since, and a claim after that replays none of them twice.
func TestSealInPlaceFailsThenSealsAgain(t *testing.T) {
	ctx := context.Background()
	lfs := &linkFS{FS: vfs.Default}
	o, _ := inPlaceOpts(t, lfs)
	w := claim(t, o)
	defer w.Abandon()
	appendText(t, w, 0, 800, 20)
	lfs.fail.Store(true)
	if err := w.Seal(ctx); err == nil {
		t.Fatal("seal with a failing link succeeded")
	}
	lfs.fail.Store(false)
	appendText(t, w, 800, 400, 20)
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if lfs.links.Load() != 1 {
		t.Fatalf("%d seals in place, want 1", lfs.links.Load())
	}
	checkText(t, o, 1200)
	w.Abandon()
	checkAfterClaim(t, o, 1200)
}

// failManifests fails manifest writes while fail is set.
type failManifests struct {
	objstore.Store
	fail atomic.Bool
}

func (f *failManifests) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if f.fail.Load() && strings.Contains(key, "/manifest/") {
		return errors.New("injected: manifest write failed")
	}
	return f.Store.PutIfAbsent(ctx, key, data)
}

// TestSealInPlaceCrashBeforeCommit: a writer that linked its generation
// but could not commit it and then died leaves the segment's frames to
// the next claim, which seals them once (the linked file is garbage the
// manifest never lists).
func TestSealInPlaceCrashBeforeCommit(t *testing.T) {
	ctx := context.Background()
	o, root := inPlaceOpts(t, vfs.Default)
	fm := &failManifests{Store: o.Store}
	o.Store = fm
	w := claim(t, o)
	defer w.Abandon()
	appendText(t, w, 0, 800, 20)
	fm.fail.Store(true)
	if err := w.Seal(ctx); err == nil {
		t.Fatal("seal with a failing manifest write succeeded")
	}
	w.Abandon()
	fm.fail.Store(false)
	gens, _ := os.ReadDir(filepath.Join(root, shardDir("s1"), "gen"))
	if len(gens) != 1 {
		t.Fatalf("%d generation files before the claim, want the uncommitted one", len(gens))
	}
	checkAfterClaim(t, o, 800)
}

// TestSealInPlaceKeepsTheNewestOfAKey: keys written twice in one memtable
// are sealed once, with their newest text: the older batch, filtered, is
// written anew, the newer one referenced in the frames.
func TestSealInPlaceKeepsTheNewestOfAKey(t *testing.T) {
	ctx := context.Background()
	lfs := &linkFS{FS: vfs.Default}
	o, _ := inPlaceOpts(t, lfs)
	w := claim(t, o)
	defer w.Abandon()
	appendText(t, w, 0, 600, 20)
	// Rows 100..139 again, their text changed (and one made null).
	b := array.NewRecordBuilder(memory.DefaultAllocator, textSchema)
	for i := 100; i < 140; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("id-%06d", i))
		if i == 120 {
			b.Field(1).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("new %d %s", i, strings.Repeat("n", 2000)))
		}
		b.Field(2).(*array.Int64Builder).AppendNull()
	}
	r := b.NewRecordBatch()
	b.Release()
	if err := w.Append(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.Release()
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if lfs.links.Load() != 1 {
		t.Fatalf("%d seals in place, want 1", lfs.links.Load())
	}
	m := w.Manifest()
	lg, err := LoadGeneration(ctx, o.Store, GenRef{Shard: "s1", Gen: m.Generations[0]}, ReadOptions{KeyColumn: "id", Whole: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Rec.Release()
	if lg.NumRows() != 600 {
		t.Fatalf("%d rows, want 600 (each key once)", lg.NumRows())
	}
	texts := lg.Rec.Column(1).(*array.String)
	for row := range lg.NumRows() {
		var i int
		fmt.Sscanf(lg.Key(row), "id-%d", &i)
		want, ok := textRow(i)
		if i >= 100 && i < 140 {
			want, ok = fmt.Sprintf("new %d %s", i, strings.Repeat("n", 2000)), i != 120
			if !ok {
				want = ""
			}
		}
		if texts.IsValid(row) != ok || texts.Value(row) != want {
			t.Fatalf("%s: %d bytes of text, want %d (valid %v)", lg.Key(row), len(texts.Value(row)), len(want), ok)
		}
	}
}

// TestSealInPlaceWhereTheStoreDoesNotSeeTheLog: a Log that
// claims to hold the store's objects but does not (a wrong Objects flag)
// must not get a generation listed that the store cannot read: the seal
// in place fails, its rows go back, the writer stops sealing in place, and
// the next seal writes a file the store reads.
func TestSealInPlaceWhereTheStoreDoesNotSeeTheLog(t *testing.T) {
	ctx := context.Background()
	lfs := &linkFS{FS: vfs.Default}
	o, _ := inPlaceOpts(t, lfs)
	o.Store = objstore.NewMemory() // not the files under o.Log.Dir
	w := claim(t, o)
	defer w.Abandon()
	appendText(t, w, 0, 600, 20)
	if err := w.Seal(ctx); err == nil {
		t.Fatal("a seal in place the store cannot see succeeded")
	}
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if lfs.links.Load() != 1 {
		t.Fatalf("%d links, want the one refused", lfs.links.Load())
	}
	checkText(t, o, 600)
}
