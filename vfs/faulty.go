package vfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
)

// Faulty wraps a file system and fails its mutating operations (writes,
// flushes, creations, renames, removals, truncations, allocations,
// directory creations and flushes) at random, drawn from a seed, without
// doing them: the seeded faults of MemFS on any file system, the
// operating system's included.
type Faulty struct {
	inner FS
	mu    sync.Mutex
	rng   *rand.Rand
	p     float64
	n     int
}

// NewFaulty returns inner failing each mutating operation with
// probability p.
func NewFaulty(inner FS, seed uint64, p float64) *Faulty {
	return &Faulty{inner: inner, rng: rand.New(rand.NewPCG(seed, 0x5eed)), p: p}
}

// Injected returns how many faults were injected.
func (f *Faulty) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *Faulty) fail(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.Float64() >= f.p {
		return nil
	}
	f.n++
	return pathErr(op, name, fmt.Errorf("vfs: injected fault in %s", op))
}

func (f *Faulty) Create(name string) (File, error) {
	if err := f.fail("create", name); err != nil {
		return nil, err
	}
	fl, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: fl, fs: f, name: name}, nil
}

func (f *Faulty) Open(name string) (File, error) { return f.inner.Open(name) }

func (f *Faulty) OpenReadWrite(name string) (File, error) {
	fl, err := f.inner.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: fl, fs: f, name: name}, nil
}

func (f *Faulty) Remove(name string) error {
	if err := f.fail("remove", name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *Faulty) Rename(oldname, newname string) error {
	if err := f.fail("rename", oldname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// Link links through to the inner file system, where it links
// (errors.ErrUnsupported where it does not).
func (f *Faulty) Link(oldname, newname string) error {
	l, ok := f.inner.(interface{ Link(o, n string) error })
	if !ok {
		return errors.ErrUnsupported
	}
	if err := f.fail("link", newname); err != nil {
		return err
	}
	return l.Link(oldname, newname)
}

func (f *Faulty) List(dir string) ([]string, error) { return f.inner.List(dir) }

func (f *Faulty) MkdirAll(dir string) error {
	if err := f.fail("mkdir", dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

func (f *Faulty) SyncDir(dir string) error {
	if err := f.fail("syncdir", dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

type faultyFile struct {
	File
	fs   *Faulty
	name string
}

// SetDirect passes direct IO through to the file under it, where it can.
func (f *faultyFile) SetDirect(on bool) error {
	if d, ok := f.File.(interface{ SetDirect(bool) error }); ok {
		return d.SetDirect(on)
	}
	return errors.ErrUnsupported
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail("write", f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultyFile) Sync() error {
	if err := f.fs.fail("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultyFile) Datasync() error {
	if err := f.fs.fail("datasync", f.name); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.fail("truncate", f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultyFile) Allocate(from, size int64) error {
	if err := f.fs.fail("allocate", f.name); err != nil {
		return err
	}
	return f.File.Allocate(from, size)
}
