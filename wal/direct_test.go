package wal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lance-context/lance-context/vfs"
)

// writeFrames appends frames of the given payload sizes to a segment log
// of size bytes in dir and returns the bytes they make (headers filled),
// in order, and whether the first segment wrote by direct IO.
func writeFrames(t *testing.T, fsys vfs.FS, dir string, size int64, buffered bool, sizes []int) ([]byte, bool) {
	t.Helper()
	l := newSegmentLog(fsys, dir, "s1", 1, size)
	l.buffered = buffered
	if err := l.start(); err != nil {
		t.Fatal(err)
	}
	defer l.close()
	var want []byte
	for i, n := range sizes {
		frame := make([]byte, frameHeaderSize+n)
		for j := frameHeaderSize; j < len(frame); j++ {
			frame[j] = byte(i*7 + j)
		}
		if err := l.append(uint64(i+1), frame); err != nil {
			t.Fatal(err)
		}
		want = append(want, frame...)
	}
	return want, l.cur.direct
}

// readSegment returns the first n bytes of dir's first segment of epoch 1.
func readSegment(t *testing.T, dir string, n int) []byte {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, segmentName(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < n {
		t.Fatalf("segment of %d bytes, want at least %d", len(got), n)
	}
	return got[:n]
}

// TestDirectSegmentHoldsTheFramesByteForByte: frames of sizes that end
// inside blocks, span several and fill one exactly, written by direct IO
// (each write repeats the last partial block), leave the segment holding
// exactly the frames, as the page cache's writes do.
func TestDirectSegmentHoldsTheFramesByteForByte(t *testing.T) {
	sizes := []int{1, 100, 4096 - 2*frameHeaderSize - 101, 4096, 5000, 3, 70_000, 2, 4096 - frameHeaderSize}
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			dir := t.TempDir()
			want, direct := writeFrames(t, vfs.Default, dir, 1<<20, buffered, sizes)
			if direct == buffered {
				if !buffered && !directPossible(t) {
					t.Skip("the temp directory's file system refuses O_DIRECT")
				}
				t.Fatalf("segment direct=%v with buffered=%v", direct, buffered)
			}
			if got := readSegment(t, dir, len(want)); !bytes.Equal(got, want) {
				t.Fatalf("the segment's %d bytes differ from the frames written", len(want))
			}
		})
	}
}

// TestDirectSegmentOnMemFS: on a MemFS (which refuses misaligned direct
// writes, as Linux does) the log writes by direct IO, and the segment holds
// exactly the frames: the power-cut suites run over this path.
func TestDirectSegmentOnMemFS(t *testing.T) {
	fsys := vfs.NewMem()
	sizes := []int{1, 100, 4096 - 2*frameHeaderSize - 101, 4096, 5000, 3, 70_000, 2, 4096 - frameHeaderSize}
	want, direct := writeFrames(t, fsys, "/log", 1<<20, false, sizes)
	if !direct {
		t.Fatal("the segment does not write by direct IO on a MemFS")
	}
	f, err := fsys.Open("/log/" + segmentName(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the segment's %d bytes differ from the frames written", len(want))
	}
}

// directPossible says whether the temp directory's file system takes
// O_DIRECT (tmpfs before Linux 6.6 does not).
func directPossible(t *testing.T) bool {
	f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return setDirect(f)
}

// TestSegmentLogsDirectWhereTheFileSystemAllows: a claimed writer on local
// disk writes its segments by direct IO, and with BufferedLog through the
// page cache; either way its acknowledged rows come back after a crash.
func TestSegmentLogsDirectWhereTheFileSystemAllows(t *testing.T) {
	if !directPossible(t) {
		t.Skip("the temp directory's file system refuses O_DIRECT")
	}
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			o, _ := localOpts(t)
			o.SegmentBytes = 64 << 10
			o.BufferedLog = buffered
			w := claim(t, o)
			var ids []string
			for i := range 60 {
				id := fmt.Sprintf("row-%03d-%0*d", i, 50+i*37, i) // frames end anywhere in a block
				ids = append(ids, id)
				if err := appendIDs(t, w, id); err != nil {
					t.Fatal(err)
				}
			}
			if w.seg.cur.direct == buffered {
				t.Fatalf("segment direct=%v with BufferedLog=%v", w.seg.cur.direct, buffered)
			}
			// By direct IO frames are assembled in the aligned buffer: no
			// second frame buffer is kept beside it.
			if kept := cap(w.seg.buf); !buffered && kept != 0 {
				t.Fatalf("a direct segment log keeps a frame buffer of %d bytes beside its aligned one", kept)
			}
			w.Abandon() // a crash: nothing sealed
			replayed(t, o, ids...)
		})
	}
}

// einvalFS gives files that take O_DIRECT but refuse its writes, as a
// file system wanting a larger alignment does.
type einvalFS struct{ vfs.FS }

type einvalFile struct {
	vfs.File
	direct   bool
	refusals int
}

func (f einvalFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	return &einvalFile{File: file}, err
}

func (f *einvalFile) SetDirect(on bool) error { f.direct = on; return nil }

func (f *einvalFile) WriteAt(p []byte, off int64) (int, error) {
	if f.direct {
		f.refusals++
		return 0, &os.PathError{Op: "write", Path: "segment", Err: syscall.EINVAL}
	}
	return f.File.WriteAt(p, off)
}

// TestRegression_DirectWriteRefusedFallsBackToThePageCache: a file system
// that accepts O_DIRECT but refuses the writes (EINVAL) must not fail the
// log: the frame is written through the page cache, and so are the next.
func TestRegression_DirectWriteRefusedFallsBackToThePageCache(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{10, 5000, 20}
	want, direct := writeFrames(t, einvalFS{vfs.Default}, dir, 1<<20, false, sizes)
	if direct {
		t.Fatal("the segment still writes by direct IO after its writes were refused")
	}
	if got := readSegment(t, dir, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("the segment's %d bytes differ from the frames written", len(want))
	}
}
