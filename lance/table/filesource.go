package table

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/objstore"
)

// heldSource is a file.Source over an immutable object of a store that can
// hold files open (objstore.FileOpener): the file is opened on the first
// read and then read with pread, so a read costs one system call instead
// of an open, a stat, a read and a close. A point read touches one range
// per column, so this is most of its cost on local disk. At most
// maxHeldFiles files are held open at once (the least recently opened is
// closed, and reopened on its next read), so files a compaction removed do
// not keep their disk space for long.
type heldSource struct {
	objectSource
	opener objstore.FileOpener

	mu   sync.RWMutex // read-held during a read, write-held to open or close
	f    *os.File
	size int64
	off  bool          // the store cannot hold this file: use GetRange
	elem *list.Element // in held.lru while f is open
}

// maxHeldFiles bounds the files held open by every heldSource together.
const maxHeldFiles = 512

// unlinkedSweepEvery is how often held files are checked for having been
// deleted (closeUnlinked).
const unlinkedSweepEvery = 15 * time.Second

var startSweeps sync.Once

var held = struct {
	sync.Mutex
	lru *list.List // of *heldSource, most recently opened first
}{lru: list.New()}

// HeldSource returns a file.Source for an object that is never rewritten
// in place (data and index files): one open file when the store can hold
// files open, the store's range reads otherwise.
func HeldSource(store objstore.Store, key string) file.Source {
	// A wrapper is a FileOpener whatever it wraps (objstore.SmallFiles
	// over S3): only a store whose objects are files holds one open. A
	// heldSource over an object store reported itself local until its
	// first read failed to open the file, so a cold index lookup on S3 read
	// its columns one after another and whole offsets buffers, as on disk.
	if o, ok := store.(objstore.FileOpener); ok {
		if _, local := objstore.LocalPath(store, key); local {
			return &heldSource{objectSource: objectSource{store, key}, opener: o}
		}
	}
	return sourceFor(store, key)
}

// Local reports whether h reads a local file (file.LocalSource): true
// unless the store turned out unable to hold it open.
func (h *heldSource) Local() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return !h.off
}

// with runs fn with the open file (nil when the store cannot hold it),
// opening it first if needed; the file stays open while fn runs.
func (h *heldSource) with(ctx context.Context, fn func(f *os.File, size int64) error) error {
	for {
		h.mu.RLock()
		if h.f != nil || h.off {
			err := fn(h.f, h.size)
			h.mu.RUnlock()
			return err
		}
		h.mu.RUnlock()
		if err := h.open(ctx); err != nil {
			return err
		}
	}
}

func (h *heldSource) open(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil || h.off {
		return nil
	}
	f, err := h.opener.OpenFile(ctx, h.key)
	if errors.Is(err, errors.ErrUnsupported) {
		h.off = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", h.key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat %s: %w", h.key, err)
	}
	h.f, h.size = f, fi.Size()
	startSweeps.Do(func() {
		go func() {
			for range time.Tick(unlinkedSweepEvery) {
				closeUnlinked()
			}
		}()
	})
	held.Lock()
	h.elem = held.lru.PushFront(h)
	var evict *heldSource
	if held.lru.Len() > maxHeldFiles {
		e := held.lru.Back()
		evict = e.Value.(*heldSource)
		held.lru.Remove(e)
		evict.elem = nil
	}
	held.Unlock()
	if evict != nil {
		go evict.release() // it may be mid-read, or be h: not under h.mu
	}
	return nil
}

// release closes h's file once no read uses it; the next read reopens it.
func (h *heldSource) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	held.Lock()
	evicted := h.elem == nil
	held.Unlock()
	if h.f != nil && evicted {
		h.f.Close()
		h.f = nil
	}
}

// closeUnlinked closes the held files that were deleted (a cleanup of
// this process or another one removed them) and returns how many. An open
// file keeps its disk space, and a process with fewer than maxHeldFiles
// files held never closed one: a worker kept every file its stores'
// compactions superseded, gigabytes, until it restarted. A read that
// needs such a file again fails to reopen it, as it would after an
// eviction.
func closeUnlinked() int {
	held.Lock()
	hs := make([]*heldSource, 0, held.lru.Len())
	for e := held.lru.Front(); e != nil; e = e.Next() {
		hs = append(hs, e.Value.(*heldSource))
	}
	held.Unlock()
	n := 0
	for _, h := range hs {
		h.mu.RLock()
		gone := h.f != nil && unlinked(h.f)
		h.mu.RUnlock()
		if !gone {
			continue
		}
		held.Lock()
		if h.elem != nil {
			held.lru.Remove(h.elem)
			h.elem = nil
		}
		held.Unlock()
		h.release()
		n++
	}
	return n
}

func (h *heldSource) ReadRange(ctx context.Context, off, n int64) ([]byte, error) {
	var out []byte
	err := h.with(ctx, func(f *os.File, size int64) error {
		if f == nil {
			var err error
			out, err = h.objectSource.ReadRange(ctx, off, n)
			return err
		}
		if off < 0 || n < 0 || off > size {
			return fmt.Errorf("read %s [%d,+%d): %w (%d bytes)", h.key, off, n, objstore.ErrInvalidRange, size)
		}
		out = make([]byte, min(n, size-off))
		return h.readAt(ctx, f, off, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (h *heldSource) ReadRangeInto(ctx context.Context, off int64, dst []byte) error {
	return h.with(ctx, func(f *os.File, size int64) error {
		if f == nil {
			b, err := h.objectSource.ReadRange(ctx, off, int64(len(dst)))
			if err != nil {
				return err
			}
			if len(b) != len(dst) {
				return fmt.Errorf("read %s [%d,+%d): %w: got %d bytes", h.key, off, len(dst), objstore.ErrInvalidRange, len(b))
			}
			copy(dst, b)
			return nil
		}
		if off < 0 || off+int64(len(dst)) > size {
			return fmt.Errorf("read %s [%d,+%d): %w: runs past the end (%d bytes)", h.key, off, len(dst), objstore.ErrInvalidRange, size)
		}
		return h.readAt(ctx, f, off, dst)
	})
}

func (h *heldSource) readAt(ctx context.Context, f *os.File, off int64, dst []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n, err := f.ReadAt(dst, off)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(dst)) {
		return fmt.Errorf("read %s [%d,+%d): %w", h.key, off, len(dst), err)
	}
	return nil
}
