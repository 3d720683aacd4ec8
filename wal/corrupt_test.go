package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// liveFrame is a frame replay adopts.
type liveFrame struct {
	seg  string
	off  int64
	pos  uint64
	size int64 // header and payload
}

// liveFrames returns the frames of the segment log in dir that replay
// from position 1 adopts, in order.
func liveFrames(t *testing.T, dir string) []liveFrame {
	t.Helper()
	return liveFramesFrom(t, dir, 1)
}

func liveFramesFrom(t *testing.T, dir string, next uint64) []liveFrame {
	t.Helper()
	segs, err := listSegments(vfs.Default, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []liveFrame
	if _, err := replaySegments(vfs.Default, "s1", segs, next, func(seg string, off int64, pos uint64, payload []byte) error {
		out = append(out, liveFrame{seg: seg, off: off, pos: pos, size: frameHeaderSize + int64(len(payload))})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// segmentLogTemplate writes n entries of one id each (position i+1 holds
// ids[i]) into a segment log of 4 KiB segments, crashes, and returns the
// data directory and the ids. Tests copy it rather than write their own.
func segmentLogTemplate(t *testing.T, n int) (string, []string) {
	t.Helper()
	return segmentLogTemplateSealed(t, 0, n)
}

// segmentLogTemplateSealed writes and seals sealed entries first, then
// writes n more, which go into reused segments (spares) over the frames
// of their earlier life. ids are the n unsealed ones.
func segmentLogTemplateSealed(t *testing.T, sealed, n int) (string, []string) {
	t.Helper()
	o, dir := localOpts(t)
	w := claim(t, o)
	for i := range sealed {
		if err := appendIDs(t, w, fmt.Sprintf("sealed-%03d-%s", i, strings.Repeat("s", 300+i%7))); err != nil {
			t.Fatal(err)
		}
	}
	if sealed > 0 {
		if err := w.Seal(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range n {
		id := fmt.Sprintf("row-%03d-%s", i, strings.Repeat("z", 250))
		ids = append(ids, id)
		if err := appendIDs(t, w, id); err != nil {
			t.Fatal(err)
		}
	}
	w.Abandon()
	return filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(dir)))), ids
}

// copyLog copies a template data directory; it returns writer options on
// the copy and its segment directory.
func copyLog(t *testing.T, template string) (Options, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
		t.Fatal(err)
	}
	local, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := opts(objstore.Sub(local, "ds"))
	o.SegmentBytes = 4 << 10
	o.Log = Log{FS: vfs.Default, Dir: filepath.Join(dir, "ds")} // beside the data, as the catalog places it
	return o, filepath.Join(dir, "ds", segmentDir("s1"))
}

func flipBit(t *testing.T, path string, off int64, bit uint) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// claimCorrupt claims the shard and wants a *CorruptionError.
func claimCorrupt(t *testing.T, o Options) *CorruptionError {
	t.Helper()
	w, err := Claim(context.Background(), o)
	if err == nil {
		w.Abandon()
		t.Fatal("claim of a corrupt log succeeded")
	}
	var c *CorruptionError
	if !errors.As(err, &c) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("claim of a corrupt log: %v, want a *CorruptionError", err)
	}
	return c
}

// repairAndReplay repairs the shard's log (a dry run first, which must
// change nothing), checks what it reports lost, and checks that a claim
// then keeps exactly want.
func repairAndReplay(t *testing.T, o Options, damage *CorruptionError, lost []uint64, want []string) {
	t.Helper()
	ctx := context.Background()
	dry, err := Repair(ctx, o.Store, o.Log, "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Damage == nil || dry.Damage.Position != damage.Position || dry.Damage.Segment != damage.Segment || dry.Damage.Offset != damage.Offset {
		t.Fatalf("dry run found damage %+v, the claim %+v", dry.Damage, damage)
	}
	if _, err := Claim(ctx, o); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("claim after a dry run: %v, want still corrupt", err)
	}
	rep, err := Repair(ctx, o.Store, o.Log, "s1", false)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, l := range rep.Lost {
		got = append(got, l.Position)
		if l.Rows != 1 {
			t.Errorf("lost entry %+v: want 1 row", l)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(lost) || rep.LostRows != int64(len(lost)) {
		t.Fatalf("repair lost positions %v (%d rows), want %v", got, rep.LostRows, lost)
	}
	replayed(t, o, want...)
	again, err := Repair(ctx, o.Store, o.Log, "s1", true)
	if err != nil || again.Damage != nil {
		t.Fatalf("repair after repair and claim: %+v, %v", again.Damage, err)
	}
}

// TestRegression_MidSegmentBitFlipIsReported: one flipped bit in a frame
// in the middle of a segment used to end replay there without a word,
// dropping every acknowledged entry after it. The claim must refuse with
// the damage's place instead.
func TestRegression_MidSegmentBitFlipIsReported(t *testing.T) {
	template, ids := segmentLogTemplate(t, 6)
	o, dir := copyLog(t, template)
	frames := liveFrames(t, dir)
	victim := frames[2]
	if frames[3].seg != victim.seg {
		t.Fatalf("frames %v: want 3 and 4 in one segment", frames)
	}
	flipBit(t, filepath.Join(dir, victim.seg), victim.off+frameHeaderSize+20, 3)
	c := claimCorrupt(t, o)
	if c.Position != 3 || c.Segment != victim.seg || c.Offset != victim.off || c.Next != 4 || c.Shard != "s1" {
		t.Fatalf("corruption %+v, want position 3 at %s offset %d, next 4", c, victim.seg, victim.off)
	}
	if !strings.Contains(c.Error(), "position 3") || !strings.Contains(c.Error(), victim.seg) {
		t.Fatalf("message %q does not say where", c.Error())
	}
	repairAndReplay(t, o, c, []uint64{4, 5, 6}, ids[:2])
}

// TestSegmentBitFlips flips one bit at a seeded place of a seeded live
// frame of a multi-segment log (replay one with -run
// 'TestSegmentBitFlips/seed=N'). Damage before the last frame is reported
// with its place and never skipped; the last frame is a torn tail,
// truncated as before. A repair keeps everything before the damage.
func TestSegmentBitFlips(t *testing.T) {
	template, ids := segmentLogTemplate(t, 30)
	bitFlips(t, template, nil, ids)
}

// TestSegmentBitFlipsInReusedSegments: the same over segments reused
// after a seal, whose earlier frames (valid, at sealed positions) and
// their cut remains lie behind the live frames.
func TestSegmentBitFlipsInReusedSegments(t *testing.T) {
	template, ids := segmentLogTemplateSealed(t, 30, 20)
	o, dir := copyLog(t, template)
	m, err := LoadManifest(context.Background(), o.Store, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if m.ReplayAfter != 30 {
		t.Fatalf("replay_after %d, want 30", m.ReplayAfter)
	}
	frames := liveFramesFrom(t, dir, 31)
	segs, spares := segmentFiles(t, dir)
	if _, last, _ := parseSegmentName(frames[len(frames)-1].seg); len(spares) != 0 || int(last) < len(segs)+3 {
		t.Fatalf("segments %v, spares %v: want the unsealed frames over reused segments", segs, spares)
	}
	var sealed []string
	for i := range 30 {
		sealed = append(sealed, fmt.Sprintf("sealed-%03d-%s", i, strings.Repeat("s", 300+i%7)))
	}
	bitFlips(t, template, sealed, ids)
}

// bitFlips runs the seeded bit flips on copies of template, whose log
// holds ids after the sealed rows.
func bitFlips(t *testing.T, template string, sealed, ids []string) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			o, dir := copyLog(t, template)
			frames := liveFramesFrom(t, dir, uint64(len(sealed)+1))
			if len(frames) != len(ids) {
				t.Fatalf("%d live frames, want %d", len(frames), len(ids))
			}
			rng := rand.New(rand.NewPCG(seed, 14))
			k := rng.IntN(len(frames))
			if seed <= 3 { // always cover the last, the first, and a segment's first
				k = []int{len(frames) - 1, 0, firstOfSecondSegment(frames)}[seed-1]
			}
			v := frames[k]
			at := v.off + rng.Int64N(v.size)
			flipBit(t, filepath.Join(dir, v.seg), at, uint(rng.IntN(8)))
			t.Logf("frame of position %d (%s offset %d, %d bytes): bit flipped at offset %d", v.pos, v.seg, v.off, v.size, at)
			keep := append(slices.Clone(sealed), ids[:k]...)
			if k == len(frames)-1 {
				replayed(t, o, keep...) // a torn tail
				return
			}
			c := claimCorrupt(t, o)
			if c.Position != v.pos || c.Segment != v.seg || c.Offset != v.off || c.Next != v.pos+1 {
				t.Fatalf("corruption %+v, want position %d at %s offset %d, next %d", c, v.pos, v.seg, v.off, v.pos+1)
			}
			var lost []uint64
			for p := v.pos + 1; p <= uint64(len(sealed)+len(ids)); p++ {
				lost = append(lost, p)
			}
			repairAndReplay(t, o, c, lost, keep)
		})
	}
}

func firstOfSecondSegment(frames []liveFrame) int {
	for i, f := range frames {
		if f.seg != frames[0].seg {
			return i
		}
	}
	return 0
}

// TestMissingSegmentIsReported: a segment file that vanished from the
// middle of the log leaves a gap in the positions, which is corruption.
func TestMissingSegmentIsReported(t *testing.T) {
	template, ids := segmentLogTemplate(t, 30)
	o, dir := copyLog(t, template)
	frames := liveFrames(t, dir)
	k := firstOfSecondSegment(frames)
	gone := frames[k].seg
	if err := os.Remove(filepath.Join(dir, gone)); err != nil {
		t.Fatal(err)
	}
	c := claimCorrupt(t, o)
	if c.Position != frames[k].pos {
		t.Fatalf("corruption %+v, want position %d", c, frames[k].pos)
	}
	var lost []uint64
	for i := k; i < len(frames); i++ {
		if frames[i].seg != gone {
			lost = append(lost, frames[i].pos)
		}
	}
	repairAndReplay(t, o, c, lost, ids[:k])
}

// TestObjectLogDamage damages one entry of an object log (seeded: which,
// and how: cut short, deleted, or replaced by another position's entry).
// Object puts are atomic, so any damaged entry is corruption; only a
// deleted last entry is indistinguishable from one never written.
func TestObjectLogDamage(t *testing.T) {
	const n = 8
	ctx := context.Background()
	for seed := uint64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			store := objstore.NewMemory()
			o := opts(store)
			w := claim(t, o)
			var ids []string
			for i := range n {
				ids = append(ids, fmt.Sprintf("obj-%02d", i))
				if err := appendIDs(t, w, ids[i]); err != nil {
					t.Fatal(err)
				}
			}
			w.Abandon()
			rng := rand.New(rand.NewPCG(seed, 14))
			k := rng.IntN(n)
			pos := uint64(k + 1)
			key := entryKey("s1", pos)
			b, err := store.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			kind := []string{"cut", "delete", "foreign"}[seed%3]
			switch kind {
			case "cut":
				err = store.Put(ctx, key, b[:rng.IntN(len(b)-1)+1])
			case "delete":
				err = store.Delete(ctx, key)
			case "foreign":
				var other []byte
				other, err = store.Get(ctx, entryKey("s1", uint64((k+1)%n+1)))
				if err == nil {
					err = store.Put(ctx, key, other)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("entry %d: %s", pos, kind)
			if kind == "delete" && k == n-1 {
				replayed(t, o, ids[:k]...)
				return
			}
			c := claimCorrupt(t, o)
			wantNext := pos + 1
			if k == n-1 {
				wantNext = 0
			}
			if c.Position != pos || c.Segment != filepath.Base(key) || c.Next != wantNext {
				t.Fatalf("corruption %+v, want position %d in %s, next %d", c, pos, filepath.Base(key), wantNext)
			}
			var lost []uint64
			for p := pos + 1; p <= n; p++ {
				lost = append(lost, p)
			}
			repairAndReplay(t, o, c, lost, ids[:k])
		})
	}
}

// TestCutEntryIsCorruption: an entry cut at a message boundary still
// decodes as an IPC stream (with fewer batches); the missing end-of-stream
// marker gives it away.
func TestCutEntryIsCorruption(t *testing.T) {
	if _, err := checkEntry("s1", 1, bytes.Repeat([]byte{0xff}, 16)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage entry: %v", err)
	}
	r := rows("a")
	defer r.Release()
	f, err := newEntryFormat(rowSchema, presentColumns(rowSchema, []arrow.RecordBatch{r}), "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	msg := &encoded{}
	if err := f.encode(msg, r); err != nil {
		t.Fatal(err)
	}
	defer msg.release()
	whole := f.header.assemble([]*encoded{msg, msg}, 1, 0, nil)
	e, err := checkEntry("s1", 1, whole)
	if err != nil {
		t.Fatal(err)
	}
	e.release()
	cut := whole[:len(whole)-len(endOfStream)-msg.size]
	if _, err := checkEntry("s1", 1, cut); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("entry cut after its first batch: %v, want corruption", err)
	}
}

// ipcMark starts every real frame's payload (an Arrow IPC stream).
const ipcMark = "\xff\xff\xff\xff"

// testFrame is a segment frame at pos holding payload.
func testFrame(pos uint64, payload string) []byte {
	b := make([]byte, frameHeaderSize+len(payload))
	copy(b[frameHeaderSize:], payload)
	binary.LittleEndian.PutUint64(b[0:8], pos)
	binary.LittleEndian.PutUint32(b[8:12], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(b[0:12], castagnoli), castagnoli, b[frameHeaderSize:])
	binary.LittleEndian.PutUint32(b[12:16], crc)
	return b
}

// TestRegression_FindInStaleDataIsLinear: a restarted worker's replay took
// minutes over a reused 64 MiB segment, because the search after the last
// frame read and checksummed every stale word that looked like a position
// and a length (Arrow data is full of small integers). Only candidates
// whose payload starts as an entry does are read now; the frame after the
// stale data is still found.
func TestRegression_FindInStaleDataIsLinear(t *testing.T) {
	var data []byte
	for i := 0; i < 1<<16; i++ { // 1 MiB of words that pass the position and length checks
		data = binary.LittleEndian.AppendUint64(data, uint64(10+i%50))
		data = binary.LittleEndian.AppendUint64(data, 64)
	}
	want := int64(len(data))
	data = append(data, testFrame(20, ipcMark+"live")...)
	data = append(data, make([]byte, 4096)...)
	p := filepath.Join(t.TempDir(), "stale.seg")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := openSegment(vfs.Default, p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	off, pos, payload, found, err := r.find(0, 20, 1<<20)
	if err != nil || !found || off != want || pos != 20 || string(payload) != ipcMark+"live" {
		t.Fatalf("found=%v at %d pos %d %q (%v), want the frame at %d", found, off, pos, payload, err, want)
	}
	if r.checked > 1 {
		t.Fatalf("the search read and checksummed %d candidates in stale data, want only the real frame", r.checked)
	}
}

// TestFindAfterZeros: the search for a frame after damage skips zeros a
// word at a time; a frame at any offset after any run of zeros (or at a
// chunk boundary) is still found, and a frame below the wanted positions
// is not.
func TestFindAfterZeros(t *testing.T) {
	frame := func(pos uint64, payload string) []byte {
		b := make([]byte, frameHeaderSize+len(payload))
		copy(b[frameHeaderSize:], payload)
		binary.LittleEndian.PutUint64(b[0:8], pos)
		binary.LittleEndian.PutUint32(b[8:12], uint32(len(payload)))
		crc := crc32.Update(crc32.Checksum(b[0:12], castagnoli), castagnoli, b[frameHeaderSize:])
		binary.LittleEndian.PutUint32(b[12:16], crc)
		return b
	}
	dir := t.TempDir()
	for _, at := range []int64{0, 1, 7, 8, 9, 15, 16, 17, 1000, 1<<20 - 5, 1 << 20, 1<<20 + 3} {
		p := filepath.Join(dir, fmt.Sprintf("z%d.seg", at))
		data := make([]byte, at)
		data = append(data, frame(3, ipcMark+"stale")...) // below lo: skipped
		want := int64(len(data))
		data = append(data, frame(9, ipcMark+"live")...)
		data = append(data, make([]byte, 100)...)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := openSegment(vfs.Default, p)
		if err != nil {
			t.Fatal(err)
		}
		off, pos, payload, found, err := r.find(0, 5, 100)
		r.close()
		if err != nil || !found || off != want || pos != 9 || string(payload) != ipcMark+"live" {
			t.Fatalf("frame after %d zeros: found=%v at %d pos %d %q (%v), want at %d", at, found, off, pos, payload, err, want)
		}
	}
}
