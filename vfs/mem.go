package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// MemFS is an in-memory file system that simulates power cuts. Writes
// change a file's contents at once, but only a flush (Sync, Datasync)
// makes them durable; creations, renames and removals change a directory
// at once, but only SyncDir makes them durable. Cut drops everything that
// was not durable and fails every later operation (ErrCut); Restart brings
// the file system back with what survived. CutAfter cuts at the n-th
// mutating operation, and Faults makes operations fail at random, both
// seeded, so a failing run is replayed by its seed.
type MemFS struct {
	mu      sync.Mutex
	root    *memDir
	gen     int  // bumped by Restart: files opened before fail
	cut     bool // power is off
	ops     int64
	cutAt   int64 // cut at this mutating operation (0: never)
	rng     *rand.Rand
	failP   float64
	failed  int64
	cutHook func()
}

type memDir struct {
	children map[string]any // *memFile or *memDir, as the directory is now
	durable  map[string]any // as of the last SyncDir
}

type memFile struct {
	data    []byte  // as written
	synced  []byte  // as of the last flush
	pending []memOp // changes since the last flush, which it applies to synced
}

// memOp is a write (data at off) or, with data nil, a change of length.
type memOp struct {
	off  int64
	data []byte
}

func (f *memFile) apply(buf []byte, o memOp) []byte {
	if o.data == nil {
		if o.off <= int64(len(buf)) {
			return buf[:o.off:o.off]
		}
		return append(buf, make([]byte, o.off-int64(len(buf)))...)
	}
	if end := o.off + int64(len(o.data)); end > int64(len(buf)) {
		buf = append(buf, make([]byte, end-int64(len(buf)))...)
	}
	copy(buf[o.off:], o.data)
	return buf
}

func newMemDir() *memDir { return &memDir{children: map[string]any{}, durable: map[string]any{}} }

// NewMem returns an empty MemFS.
func NewMem() *MemFS { return &MemFS{root: newMemDir()} }

// CutAfter makes the n-th mutating operation from now (a write, flush,
// creation, rename, removal, truncation, directory creation or directory
// flush) cut the power instead of happening. n <= 0 disarms it.
func (m *MemFS) CutAfter(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops = 0
	m.cutAt = n
}

// OnCut calls fn (without the lock) when the power is cut by CutAfter.
func (m *MemFS) OnCut(fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cutHook = fn
}

// Faults makes each mutating operation fail with probability p (an error
// that is not ErrCut, the operation not done), drawn from seed.
func (m *MemFS) Faults(seed uint64, p float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rng = rand.New(rand.NewPCG(seed, 0x5eed))
	m.failP = p
}

// Ops returns how many mutating operations ran since CutAfter (or the
// start); a workload run once uncut tells how many points there are to
// cut at.
func (m *MemFS) Ops() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// Cut cuts the power now.
func (m *MemFS) Cut() {
	m.mu.Lock()
	m.cut = true
	m.mu.Unlock()
}

// IsCut reports whether the power is off.
func (m *MemFS) IsCut() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cut
}

// Restart turns the power back on: the file system holds what was durable
// at the cut (or now, if there was none), files opened before fail, and
// CutAfter and Faults are disarmed.
func (m *MemFS) Restart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memFile]*memFile{}
	var rebuild func(d *memDir) *memDir
	rebuild = func(d *memDir) *memDir {
		nd := newMemDir()
		for name, c := range d.durable {
			var n any
			switch c := c.(type) {
			case *memFile:
				nf, ok := seen[c]
				if !ok {
					nf = &memFile{data: slices.Clone(c.synced), synced: slices.Clone(c.synced)}
					seen[c] = nf
				}
				n = nf
			case *memDir:
				n = rebuild(c)
			}
			nd.children[name] = n
			nd.durable[name] = n
		}
		return nd
	}
	m.root = rebuild(m.root)
	m.gen++
	m.cut = false
	m.cutAt, m.ops = 0, 0
	m.failP = 0
}

// mutate accounts for one mutating operation: it fails when the power is
// off, cuts it when CutAfter says so, and injects faults.
func (m *MemFS) mutate(op string) error {
	if m.cut {
		return ErrCut
	}
	m.ops++
	if m.cutAt > 0 && m.ops >= m.cutAt {
		m.cut = true
		if m.cutHook != nil {
			go m.cutHook()
		}
		return ErrCut
	}
	if m.failP > 0 && m.rng.Float64() < m.failP {
		m.failed++
		return fmt.Errorf("vfs: injected fault in %s", op)
	}
	return nil
}

func splitPath(name string) []string {
	name = path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

// dir returns the directory at parts.
func (m *MemFS) dir(parts []string) (*memDir, error) {
	d := m.root
	for _, p := range parts {
		c, ok := d.children[p].(*memDir)
		if !ok {
			return nil, fs.ErrNotExist
		}
		d = c
	}
	return d, nil
}

// parent returns the directory holding name and name's base.
func (m *MemFS) parent(name string) (*memDir, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", fs.ErrInvalid
	}
	d, err := m.dir(parts[:len(parts)-1])
	return d, parts[len(parts)-1], err
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate("create"); err != nil {
		return nil, pathErr("create", name, err)
	}
	d, base, err := m.parent(name)
	if err != nil {
		return nil, pathErr("create", name, err)
	}
	if _, ok := d.children[base]; ok {
		return nil, pathErr("create", name, fs.ErrExist)
	}
	f := &memFile{}
	d.children[base] = f
	return &memHandle{fs: m, f: f, gen: m.gen, write: true, name: name}, nil
}

func (m *MemFS) open(name string, write bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, pathErr("open", name, ErrCut)
	}
	d, base, err := m.parent(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	f, ok := d.children[base].(*memFile)
	if !ok {
		return nil, pathErr("open", name, fs.ErrNotExist)
	}
	return &memHandle{fs: m, f: f, gen: m.gen, write: write, name: name}, nil
}

func (m *MemFS) Open(name string) (File, error)          { return m.open(name, false) }
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open(name, true) }

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate("remove"); err != nil {
		return pathErr("remove", name, err)
	}
	d, base, err := m.parent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	if _, ok := d.children[base]; !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	delete(d.children, base)
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate("rename"); err != nil {
		return pathErr("rename", oldname, err)
	}
	od, ob, err := m.parent(oldname)
	if err != nil {
		return pathErr("rename", oldname, err)
	}
	nd, nb, err := m.parent(newname)
	if err != nil {
		return pathErr("rename", newname, err)
	}
	c, ok := od.children[ob]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	delete(od.children, ob)
	nd.children[nb] = c
	return nil
}

// Link gives the file oldname a second name, newname (which must not
// exist); the name is durable once its directory is flushed.
func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate("link"); err != nil {
		return pathErr("link", newname, err)
	}
	od, ob, err := m.parent(oldname)
	if err != nil {
		return pathErr("link", oldname, err)
	}
	nd, nb, err := m.parent(newname)
	if err != nil {
		return pathErr("link", newname, err)
	}
	f, ok := od.children[ob].(*memFile)
	if !ok {
		return pathErr("link", oldname, fs.ErrNotExist)
	}
	if _, taken := nd.children[nb]; taken {
		return pathErr("link", newname, fs.ErrExist)
	}
	nd.children[nb] = f
	return nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, pathErr("list", dir, ErrCut)
	}
	d, err := m.dir(splitPath(dir))
	if err != nil {
		return nil, pathErr("list", dir, err)
	}
	out := make([]string, 0, len(d.children))
	for name := range d.children {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, p := range splitPath(dir) {
		switch c := d.children[p].(type) {
		case *memDir:
			d = c
			continue
		case *memFile:
			return pathErr("mkdir", dir, fs.ErrExist)
		}
		if err := m.mutate("mkdir"); err != nil {
			return pathErr("mkdir", dir, err)
		}
		nd := newMemDir()
		d.children[p] = nd
		d = nd
	}
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate("syncdir"); err != nil {
		return pathErr("syncdir", dir, err)
	}
	d, err := m.dir(splitPath(dir))
	if err != nil {
		return pathErr("syncdir", dir, err)
	}
	d.durable = make(map[string]any, len(d.children))
	for k, v := range d.children {
		d.durable[k] = v
	}
	return nil
}

// memHandle is an open MemFS file.
type memHandle struct {
	fs     *MemFS
	f      *memFile
	gen    int
	write  bool
	closed bool
	name   string
	direct bool // SetDirect
}

var errClosed = errors.New("file already closed")

// check fails a handle that is closed, or of before a restart.
func (h *memHandle) check(op string, mutating bool) error {
	switch {
	case h.closed:
		return pathErr(op, h.name, errClosed)
	case h.gen != h.fs.gen || h.fs.cut:
		return pathErr(op, h.name, ErrCut)
	case mutating && !h.write:
		return pathErr(op, h.name, fs.ErrPermission)
	}
	if mutating {
		if err := h.fs.mutate(op); err != nil {
			return pathErr(op, h.name, err)
		}
	}
	return nil
}

func (h *memHandle) ReadAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("read", false); err != nil {
		return 0, err
	}
	if off >= int64(len(h.f.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *memHandle) WriteAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("write", true); err != nil {
		return 0, err
	}
	if h.direct && (off%DirectAlign != 0 || len(p)%DirectAlign != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%DirectAlign != 0) {
		return 0, pathErr("write", h.name, syscall.EINVAL) // as Linux answers a misaligned direct write
	}
	o := memOp{off: off, data: slices.Clone(p)}
	h.f.data = h.f.apply(h.f.data, o)
	h.f.pending = append(h.f.pending, o)
	return len(p), nil
}

// SetDirect turns direct IO on or off as an OS file's does. A MemFS file
// keeps its semantics (a write is durable at the next flush, as the
// device's cache makes a direct write), but while direct IO is on it
// refuses writes whose offset, length or buffer is not aligned to
// DirectAlign, so tests over it check that direct writes are.
func (h *memHandle) SetDirect(on bool) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("fcntl", false); err != nil {
		return err
	}
	h.direct = on
	return nil
}

func (h *memHandle) Close() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return pathErr("close", h.name, errClosed)
	}
	h.closed = true
	return nil
}

func (h *memHandle) Size() (int64, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("stat", false); err != nil {
		return 0, err
	}
	return int64(len(h.f.data)), nil
}

func (h *memHandle) sync(op string) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check(op, true); err != nil {
		return err
	}
	for _, o := range h.f.pending {
		h.f.synced = h.f.apply(h.f.synced, o)
	}
	h.f.pending = nil
	return nil
}

func (h *memHandle) Sync() error     { return h.sync("sync") }
func (h *memHandle) Datasync() error { return h.sync("datasync") }

func (h *memHandle) Truncate(size int64) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("truncate", true); err != nil {
		return err
	}
	return h.resize(size)
}

func (h *memHandle) resize(size int64) error {
	o := memOp{off: size}
	h.f.data = h.f.apply(h.f.data, o)
	h.f.pending = append(h.f.pending, o)
	return nil
}

// Allocate extends the file with zeros (durable at the next flush, as the
// size of a file a real fallocate extended).
func (h *memHandle) Allocate(from, size int64) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("allocate", true); err != nil {
		return err
	}
	if size > int64(len(h.f.data)) {
		return h.resize(size)
	}
	return nil
}
