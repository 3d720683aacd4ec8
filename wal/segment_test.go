package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// localOpts returns writer options on a local store in a temp dir with
// small segments, so that a few entries fill one, and the segment dir.
func localOpts(t *testing.T) (Options, string) {
	t.Helper()
	dir := t.TempDir()
	local, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := opts(objstore.Sub(local, "ds"))
	o.SegmentBytes = 4 << 10
	o.Log = Log{FS: vfs.Default, Dir: filepath.Join(dir, "ds")} // beside the data, as the catalog places it
	return o, filepath.Join(dir, "ds", segmentDir("s1"))
}

// replayed claims the shard anew, which replays its log, seals, and checks
// that the sealed ids are want. It returns the writer (abandoned at the
// end of the test).
func replayed(t *testing.T, o Options, want ...string) *Writer {
	t.Helper()
	w := claim(t, o)
	t.Cleanup(w.Abandon)
	if err := w.Seal(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, o.Store, want...)
	return w
}

func segmentFiles(t *testing.T, dir string) (segs, spares []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch {
		case strings.HasSuffix(e.Name(), segmentSuffix):
			segs = append(segs, e.Name())
		case strings.HasSuffix(e.Name(), spareSuffix):
			spares = append(spares, e.Name())
		}
	}
	return segs, spares
}

func wantIDs(t *testing.T, store objstore.Store, want ...string) {
	t.Helper()
	got := sealedIDs(t, store, "s1")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("sealed ids %v, want %v", got, want)
	}
}

// TestSegmentLogCrashReplay: acknowledged rows in segment files (several,
// rotated) survive a crash, and the next claim deletes the dead epoch's
// files.
func TestSegmentLogCrashReplay(t *testing.T) {
	o, dir := localOpts(t)
	w := claim(t, o)
	if w.seg == nil {
		t.Fatal("a writer on a local filesystem writes a segment log")
	}
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("row-%03d-%s", i, strings.Repeat("x", 200))
		ids = append(ids, id)
		if err := appendIDs(t, w, id); err != nil {
			t.Fatal(err)
		}
	}
	if segs, _ := segmentFiles(t, dir); len(segs) < 3 {
		t.Fatalf("40 entries of ~500 bytes in 4 KiB segments: %d segment files", len(segs))
	}
	w.Abandon() // a crash: nothing sealed

	w2 := replayed(t, o, ids...)
	w2.WaitCollect()
	segs, _ := segmentFiles(t, dir)
	for _, s := range segs {
		if e, _, _ := parseSegmentName(s); e < w2.Epoch() {
			t.Fatalf("segment %s of a dead epoch left after the claim", s)
		}
	}
}

// TestSegmentReplayStopsAtTornFrame: a frame whose bytes do not match its
// checksum ends the log; frames before it are replayed.
func TestSegmentReplayStopsAtTornFrame(t *testing.T) {
	o, dir := localOpts(t)
	o.SegmentBytes = 1 << 20
	w := claim(t, o)
	for _, id := range []string{"a", "b", "c"} {
		if err := appendIDs(t, w, id); err != nil {
			t.Fatal(err)
		}
	}
	w.Abandon()
	segs, _ := segmentFiles(t, dir)
	if len(segs) == 0 { // the one written, and maybe the next, prepared
		t.Fatal("no segment file")
	}
	path := filepath.Join(dir, segs[0])
	offs := frameOffsets(t, path)
	if len(offs) != 4 {
		t.Fatalf("%d frame boundaries, want 4", len(offs))
	}
	// Tear the last frame: its final bytes never reached the disk.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 8), offs[3]-8); err != nil {
		t.Fatal(err)
	}
	f.Close()

	replayed(t, o, "a", "b")
}

// TestSegmentDeposedWriterCannotAcknowledge: a writer whose shard was
// claimed keeps writing into its own epoch's files, which the claim made
// dead; it is fenced, and a later claim never reads what it wrote.
func TestSegmentDeposedWriterCannotAcknowledge(t *testing.T) {
	o, _ := localOpts(t)
	w1 := claim(t, o)
	defer w1.Abandon()
	if err := appendIDs(t, w1, "a"); err != nil {
		t.Fatal(err)
	}
	w2 := claim(t, o)
	w2.WaitCollect() // w1's files are deleted under it
	if err := appendIDs(t, w1, "zombie"); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed writer's append: %v, want ErrFenced", err)
	}
	if err := appendIDs(t, w2, "c"); err != nil {
		t.Fatal(err)
	}
	w2.Abandon()
	replayed(t, o, "a", "c")
}

// TestSegmentReuseSkipsStaleFrames: collected segments are reused, and
// the frames of their earlier life (sealed rows) are never replayed again.
func TestSegmentReuseSkipsStaleFrames(t *testing.T) {
	ctx := context.Background()
	o, dir := localOpts(t)
	w := claim(t, o)
	var ids []string
	add := func(prefix string, n int) {
		for i := range n {
			id := fmt.Sprintf("%s-%03d-%s", prefix, i, strings.Repeat("y", 300))
			ids = append(ids, id)
			if err := appendIDs(t, w, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("first", 30)
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	add("second", 20) // rotates into the reused segments
	if _, spares := segmentFiles(t, dir); len(spares) != 0 {
		t.Fatalf("spares %v left after rotating past them", spares)
	}
	w.Abandon()
	replayed(t, o, ids...) // once each: no stale frame came back
}

// TestObjectEntriesReplayedBeforeSegments: a shard whose log was written
// as objects (by an earlier version) is replayed, then continues in
// segments.
func TestObjectEntriesReplayedBeforeSegments(t *testing.T) {
	o, _ := localOpts(t)
	old := o
	old.ObjectLog = true
	w := claim(t, old)
	for _, id := range []string{"a", "b"} {
		if err := appendIDs(t, w, id); err != nil {
			t.Fatal(err)
		}
	}
	w.Abandon()
	w2 := claim(t, o)
	if err := appendIDs(t, w2, "c"); err != nil {
		t.Fatal(err)
	}
	w2.Abandon()
	replayed(t, o, "a", "b", "c")
}

// TestSegmentWriteFailureStopsWriter: after a failed segment write the
// writer acknowledges nothing more; a new claim replays what is durable.
func TestSegmentWriteFailureStopsWriter(t *testing.T) {
	o, _ := localOpts(t)
	w := claim(t, o)
	if err := appendIDs(t, w, "a"); err != nil {
		t.Fatal(err)
	}
	w.seg.cur.f.Close() // the next write fails
	if err := appendIDs(t, w, "b"); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after a failed write: %v, want ErrLogFailed", err)
	}
	if err := appendIDs(t, w, "c"); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("second append: %v, want ErrLogFailed", err)
	}
	w.Abandon()
	replayed(t, o, "a")
}

// TestSegmentSizesGrowFromSmall: a writer that receives little holds a
// few MiB of segment files, not two full segments; under load the
// segments grow to SegmentBytes.
func TestSegmentSizesGrowFromSmall(t *testing.T) {
	o, dir := localOpts(t)
	o.SegmentBytes = 0 // the default, 64 MiB
	w := claim(t, o)
	defer w.Abandon()
	if err := appendIDs(t, w, "small"); err != nil {
		t.Fatal(err)
	}
	sizes := func() (total, largest int64) {
		segs, _ := segmentFiles(t, dir)
		for _, s := range segs {
			fi, err := os.Stat(filepath.Join(dir, s))
			if err != nil {
				t.Fatal(err)
			}
			total += fi.Size()
			largest = max(largest, fi.Size())
		}
		return total, largest
	}
	// The second segment is prepared in the background; wait for it.
	for i := 0; i < 100; i++ {
		if segs, _ := segmentFiles(t, dir); len(segs) == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if total, _ := sizes(); total > 5<<20 { // 1 MiB written into, 4 MiB prepared
		t.Fatalf("an idle writer holds %d bytes of segments", total)
	}
	big := strings.Repeat("z", 256<<10)
	for i := range 40 { // 10 MiB: through the 1 and 4 MiB segments
		if err := appendIDs(t, w, fmt.Sprint(i, big)); err != nil {
			t.Fatal(err)
		}
	}
	if _, largest := sizes(); largest < 8<<20 {
		t.Fatalf("after 10 MiB of entries the largest segment is %d bytes", largest)
	}
}

// TestNextSegmentWaitsForASpare: while the current segment is nearly empty
// the next one is not zero-filled as a new file: a seal that completes
// meanwhile hands it a spare (the same file, renamed) instead.
func TestNextSegmentWaitsForASpare(t *testing.T) {
	o, dir := localOpts(t)
	o.SegmentBytes = 256 << 10
	w := claim(t, o)
	defer w.Abandon()
	i := 0
	fill := func(seq uint64) { // append ~20 KB entries until segment seq is current
		for w.seg.seq < seq {
			if err := appendIDs(t, w, fmt.Sprintf("%04d-%s", i, strings.Repeat("q", 20<<10))); err != nil {
				t.Fatal(err)
			}
			i++
		}
	}
	fill(3) // segment 3 holds one entry, far from a quarter full
	var before []os.FileInfo
	segs, _ := segmentFiles(t, dir)
	for _, s := range segs {
		fi, err := os.Stat(filepath.Join(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, fi)
	}
	if len(before) != 3 {
		t.Fatalf("segments %v: the fourth was prepared before it was needed", segs)
	}
	if err := w.Seal(context.Background()); err != nil { // segments 1 and 2 become spares
		t.Fatal(err)
	}
	fill(4)
	fi, err := os.Stat(filepath.Join(dir, segmentName(w.seg.epoch, 4)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(before, func(b os.FileInfo) bool { return os.SameFile(b, fi) }) {
		t.Fatal("segment 4 is a new file, not a spare")
	}
	w.Abandon()
	var ids []string
	for j := range i {
		ids = append(ids, fmt.Sprintf("%04d-%s", j, strings.Repeat("q", 20<<10)))
	}
	replayed(t, o, ids...)
}

// zeroFill, the fallback where fallocate is unsupported, writes zeros up
// to the size and gives up for a spare when asked.
func TestZeroFill(t *testing.T) {
	name := filepath.Join(t.TempDir(), "seg")
	f, err := vfs.Default.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("old"), 0); err != nil {
		t.Fatal(err)
	}
	if err := zeroFill(f, 3, 3<<20+5, nil, func() bool { return false }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3<<20+5 || string(b[:3]) != "old" || bytes.Count(b[3:], []byte{0}) != len(b)-3 {
		t.Fatalf("zero-filled file of %d bytes starts %q", len(b), b[:3])
	}
	if err := zeroFill(f, 0, 8<<20, nil, func() bool { return true }); !errors.Is(err, errSpareArrived) {
		t.Fatalf("abandoned fill: %v", err)
	}
}

// frameOffsets returns the offsets of the frames at the start of the
// segment at path, and the offset after the last.
func frameOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	r, err := openSegment(vfs.Default, path)
	if err != nil || r == nil {
		t.Fatalf("open segment %s: %v", path, err)
	}
	defer r.close()
	offs := []int64{0}
	for {
		_, payload, bad, err := r.frameAt(offs[len(offs)-1])
		if err != nil {
			t.Fatal(err)
		}
		if bad != "" {
			return offs
		}
		offs = append(offs, offs[len(offs)-1]+frameHeaderSize+int64(len(payload)))
	}
}
