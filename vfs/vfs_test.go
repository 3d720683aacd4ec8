package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"unsafe"
)

func read(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(b)
}

// TestFSConformance runs one sequence on the operating system's file
// system and on MemFS: both must answer alike.
func TestFSConformance(t *testing.T) {
	for name, fsys := range map[string]FS{"os": Default, "mem": NewMem()} {
		t.Run(name, func(t *testing.T) {
			dir := "/d"
			if name == "os" {
				dir = t.TempDir()
			}
			sub := filepath.Join(dir, "a", "b")
			if err := fsys.MkdirAll(sub); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Create(filepath.Join(sub, "x"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Create(filepath.Join(sub, "x")); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("second create: %v", err)
			}
			if _, err := f.WriteAt([]byte("hello"), 3); err != nil {
				t.Fatal(err)
			}
			if err := f.Datasync(); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(6); err != nil {
				t.Fatal(err)
			}
			if err := f.Allocate(6, 10); err != nil && !errors.Is(err, errors.ErrUnsupported) {
				t.Fatal(err)
			}
			f.Close()
			if got := read(t, fsys, filepath.Join(sub, "x"))[:6]; got != "\x00\x00\x00hel" {
				t.Fatalf("contents %q", got)
			}
			if err := fsys.Rename(filepath.Join(sub, "x"), filepath.Join(sub, "y")); err != nil {
				t.Fatal(err)
			}
			names, err := fsys.List(sub)
			if err != nil || !slices.Equal(names, []string{"y"}) {
				t.Fatalf("list %v %v", names, err)
			}
			if err := fsys.SyncDir(sub); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(filepath.Join(sub, "y")); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Open(filepath.Join(sub, "y")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open removed: %v", err)
			}
			if _, err := fsys.List(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("list absent: %v", err)
			}
		})
	}
}

// TestMemFSCutKeepsOnlyWhatWasDurable: unflushed writes, unflushed
// directory entries and everything after the cut are gone after Restart.
func TestMemFSCutKeepsOnlyWhatWasDurable(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/log"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	durable, _ := m.Create("/log/durable")
	durable.WriteAt([]byte("synced"), 0)
	durable.Datasync()
	durable.WriteAt([]byte("-lost"), 6)
	if err := m.SyncDir("/log"); err != nil {
		t.Fatal(err)
	}
	lost, _ := m.Create("/log/unnamed") // its entry is never flushed
	lost.WriteAt([]byte("data"), 0)
	lost.Datasync()
	if err := m.Rename("/log/durable", "/log/renamed"); err != nil { // not flushed
		t.Fatal(err)
	}
	m.CutAfter(2)
	if _, err := durable.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("first op before the cut: %v", err)
	}
	if err := durable.Datasync(); !errors.Is(err, ErrCut) {
		t.Fatalf("the cut op: %v", err)
	}
	if _, err := m.Create("/log/after"); !errors.Is(err, ErrCut) {
		t.Fatalf("after the cut: %v", err)
	}
	m.Restart()
	if _, err := durable.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrCut) {
		t.Fatalf("a file opened before the restart: %v", err)
	}
	names, _ := m.List("/log")
	if !slices.Equal(names, []string{"durable"}) {
		t.Fatalf("entries after restart %v, want only the flushed one", names)
	}
	if got := read(t, m, "/log/durable"); got != "synced" {
		t.Fatalf("contents after restart %q, want the flushed %q", got, "synced")
	}
}

// TestMemFSFaultsAreSeeded: the same seed fails the same operations.
func TestMemFSFaultsAreSeeded(t *testing.T) {
	run := func() []bool {
		m := NewMem()
		f, _ := m.Create("/f")
		m.Faults(7, 0.3)
		var out []bool
		for range 50 {
			_, err := f.WriteAt([]byte("x"), 0)
			out = append(out, err != nil)
		}
		return out
	}
	a, b := run(), run()
	if !slices.Equal(a, b) || !slices.Contains(a, true) || !slices.Contains(a, false) {
		t.Fatalf("faults %v and %v", a, b)
	}
}

// TestFaultyIsSeeded: Faulty over the operating system's file system
// fails the same operations for the same seed, does not do a failed
// write, and passes reads through.
func TestFaultyIsSeeded(t *testing.T) {
	run := func() ([]bool, string) {
		dir := t.TempDir()
		f := NewFaulty(Default, 11, 0.3)
		var out []bool
		var fl File
		for fl == nil {
			var err error
			fl, err = f.Create(filepath.Join(dir, "x"))
			out = append(out, err != nil)
		}
		defer fl.Close()
		for i := range 40 {
			_, err := fl.WriteAt([]byte{byte('a' + i%26)}, int64(i))
			if err != nil {
				fl.WriteAt([]byte{'-'}, int64(i)) // may fail too: then a zero
			}
			out = append(out, err != nil)
		}
		return out, read(t, f, filepath.Join(dir, "x"))
	}
	a, ca := run()
	b, cb := run()
	if !slices.Equal(a, b) || ca != cb || !slices.Contains(a, true) || !slices.Contains(a, false) {
		t.Fatalf("runs differ or are all alike: %v %q / %v %q", a, ca, b, cb)
	}
	for i, failed := range a[len(a)-40:] {
		if failed && ca[i] == byte('a'+i%26) {
			t.Fatalf("byte %d written although its write failed: %q", i, ca)
		}
	}
}

// TestMemFSLink: a link is a second name of the same file (a write through
// one is read through the other), refused over an existing name, and lost
// in a cut unless its directory was flushed; the file outlives the removal
// of its first name.
func TestMemFSLink(t *testing.T) {
	m := NewMem()
	for _, d := range []string{"/a", "/b"} {
		if err := m.MkdirAll(d); err != nil {
			t.Fatal(err)
		}
	}
	m.SyncDir("/")
	f, _ := m.Create("/a/f")
	f.WriteAt([]byte("one"), 0)
	f.Sync()
	m.SyncDir("/a")
	if err := m.Link("/a/f", "/b/g"); err != nil {
		t.Fatal(err)
	}
	if err := m.Link("/a/f", "/b/g"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("link over an existing name: %v", err)
	}
	f.WriteAt([]byte("two"), 0)
	f.Sync()
	if got := read(t, m, "/b/g"); got != "two" {
		t.Fatalf("through the link %q, want %q", got, "two")
	}
	if err := m.Link("/a/f", "/b/flushed"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/b")
	if err := m.Link("/a/f", "/b/lost"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/a/f"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/a")
	m.Cut()
	m.Restart()
	names, _ := m.List("/b")
	if !slices.Equal(names, []string{"flushed", "g"}) {
		t.Fatalf("names after the cut %v, want the flushed links", names)
	}
	if got := read(t, m, "/b/g"); got != "two" {
		t.Fatalf("after the cut %q, want %q", got, "two")
	}
}

// TestMemDirectWritesMustBeAligned: with direct IO on, a MemFS file refuses
// writes whose offset, length or buffer is not aligned (EINVAL, as Linux),
// and takes aligned ones; off, it takes any.
func TestMemDirectWritesMustBeAligned(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := f.(interface{ SetDirect(bool) error })
	if !ok {
		t.Fatal("a MemFS file has no SetDirect")
	}
	if err := d.SetDirect(true); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 3*DirectAlign)
	skew := int(uintptr(unsafe.Pointer(&raw[0])) % DirectAlign)
	aligned := raw[(DirectAlign-skew)%DirectAlign:][:DirectAlign]
	for name, w := range map[string]struct {
		p   []byte
		off int64
	}{"offset": {aligned, 100}, "length": {aligned[:100], 0}, "buffer": {raw[(DirectAlign-skew)%DirectAlign+1:][:DirectAlign], 0}} {
		if _, err := f.WriteAt(w.p, w.off); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("misaligned %s: %v; want EINVAL", name, err)
		}
	}
	if _, err := f.WriteAt(aligned, DirectAlign); err != nil {
		t.Fatalf("aligned direct write: %v", err)
	}
	if err := d.SetDirect(false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 3); err != nil {
		t.Fatalf("write with direct IO off: %v", err)
	}
}
