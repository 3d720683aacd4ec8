package vfs

import (
	"path/filepath"
	"sync"
)

// Quota wraps a file system with a byte budget, as a full disk or an
// exhausted quota would: a write, allocation or truncation that would grow
// the files beyond the bytes left fails with an error wrapping ErrNoSpace
// and the operating system's ENOSPC, without doing anything, and so does
// creating a file when nothing is left. Removing and shrinking files
// gives their bytes back; SetFree changes what is left, so a test fills
// the disk and frees it again. Files it did not create count from the
// size they had when it opened them.
type Quota struct {
	inner FS

	mu     sync.Mutex
	free   int64
	files  map[string]*quotaFile // by cleaned name
	failed int
}

// quotaFile is the bytes charged for one file; handles share it, and a
// rename moves it to the new name.
type quotaFile struct{ size int64 }

// NewQuota returns inner with free bytes left.
func NewQuota(inner FS, free int64) *Quota {
	return &Quota{inner: inner, free: free, files: map[string]*quotaFile{}}
}

// SetFree sets how many bytes are left.
func (q *Quota) SetFree(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.free = n
}

// Free returns how many bytes are left.
func (q *Quota) Free() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.free
}

// Failed returns how many operations failed for lack of space.
func (q *Quota) Failed() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failed
}

func (q *Quota) noSpace(op, name string) error {
	q.failed++
	return NoSpace(pathErr(op, name, errNoSpaceOS))
}

// grow charges f for growing to size, or fails (q.mu held).
func (q *Quota) grow(f *quotaFile, size int64, op, name string) (charged int64, err error) {
	if d := size - f.size; d > 0 {
		if d > q.free {
			return 0, q.noSpace(op, name)
		}
		q.free -= d
		f.size = size
		return d, nil
	}
	return 0, nil
}

// refund gives back what grow charged when the operation then failed.
func (q *Quota) refund(f *quotaFile, charged int64) {
	if charged == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.free += charged
	f.size -= charged
}

func (q *Quota) Create(name string) (File, error) {
	q.mu.Lock()
	if q.free <= 0 {
		err := q.noSpace("create", name)
		q.mu.Unlock()
		return nil, err
	}
	q.mu.Unlock()
	fl, err := q.inner.Create(name)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	qf := &quotaFile{}
	q.files[filepath.Clean(name)] = qf
	return &quotaHandle{File: fl, q: q, f: qf, name: name}, nil
}

func (q *Quota) Open(name string) (File, error) { return q.inner.Open(name) }

func (q *Quota) OpenReadWrite(name string) (File, error) {
	fl, err := q.inner.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	qf, ok := q.files[filepath.Clean(name)]
	if !ok {
		size, err := fl.Size()
		if err != nil {
			fl.Close()
			return nil, err
		}
		qf = &quotaFile{size: size}
		q.files[filepath.Clean(name)] = qf
	}
	return &quotaHandle{File: fl, q: q, f: qf, name: name}, nil
}

func (q *Quota) Remove(name string) error {
	if err := q.inner.Remove(name); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if qf, ok := q.files[filepath.Clean(name)]; ok {
		q.free += qf.size
		delete(q.files, filepath.Clean(name))
	}
	return nil
}

func (q *Quota) Rename(oldname, newname string) error {
	if err := q.inner.Rename(oldname, newname); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	if prev, ok := q.files[newname]; ok && oldname != newname {
		q.free += prev.size // replaced
		delete(q.files, newname)
	}
	if qf, ok := q.files[oldname]; ok {
		delete(q.files, oldname)
		q.files[newname] = qf
	}
	return nil
}

func (q *Quota) List(dir string) ([]string, error) { return q.inner.List(dir) }
func (q *Quota) MkdirAll(dir string) error         { return q.inner.MkdirAll(dir) }
func (q *Quota) SyncDir(dir string) error          { return q.inner.SyncDir(dir) }

type quotaHandle struct {
	File
	q    *Quota
	f    *quotaFile
	name string
}

func (h *quotaHandle) WriteAt(p []byte, off int64) (int, error) {
	h.q.mu.Lock()
	charged, err := h.q.grow(h.f, off+int64(len(p)), "write", h.name)
	h.q.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, err := h.File.WriteAt(p, off)
	if err != nil {
		h.q.refund(h.f, charged)
	}
	return n, err
}

func (h *quotaHandle) Allocate(from, size int64) error {
	h.q.mu.Lock()
	charged, err := h.q.grow(h.f, size, "allocate", h.name)
	h.q.mu.Unlock()
	if err != nil {
		return err
	}
	err = h.File.Allocate(from, size)
	if err != nil {
		// Unsupported too: the caller zero-fills, and its writes pay.
		h.q.refund(h.f, charged)
	}
	return err
}

func (h *quotaHandle) Truncate(size int64) error {
	h.q.mu.Lock()
	charged, err := h.q.grow(h.f, size, "truncate", h.name)
	if err == nil && size < h.f.size {
		h.q.free += h.f.size - size
		h.f.size = size
	}
	h.q.mu.Unlock()
	if err != nil {
		return err
	}
	if err := h.File.Truncate(size); err != nil {
		h.q.refund(h.f, charged)
		return err
	}
	return nil
}

var _ FS = (*Quota)(nil)
