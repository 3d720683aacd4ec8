package table

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/objstore"
)

// heldSource is a file.Source over an immutable object of a store that can
// hold files open (objstore.FileOpener): the file is opened on the first
// read and then read with pread, so a read costs one system call instead
// of an open, a stat, a read and a close. A point read touches one range
// per column, so this is most of its cost on local disk. The handle is
// closed when the source (and the cached reader holding it) is collected.
type heldSource struct {
	objectSource
	opener objstore.FileOpener

	mu   sync.Mutex
	f    *os.File
	size int64
	off  bool // the store cannot hold this file: use GetRange
}

// HeldSource returns a file.Source for an object that is never rewritten
// in place (data and index files): one open file when the store can hold
// files open, the store's range reads otherwise.
func HeldSource(store objstore.Store, key string) file.Source {
	if o, ok := store.(objstore.FileOpener); ok {
		return &heldSource{objectSource: objectSource{store, key}, opener: o}
	}
	return sourceFor(store, key)
}

func (h *heldSource) file(ctx context.Context) (*os.File, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil || h.off {
		return h.f, h.size, nil
	}
	f, err := h.opener.OpenFile(ctx, h.key)
	if errors.Is(err, errors.ErrUnsupported) {
		h.off = true
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat %s: %w", h.key, err)
	}
	h.f, h.size = f, fi.Size()
	return h.f, h.size, nil
}

func (h *heldSource) ReadRange(ctx context.Context, off, n int64) ([]byte, error) {
	f, size, err := h.file(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s [%d,+%d): %w", h.key, off, n, err)
	}
	if f == nil {
		return h.objectSource.ReadRange(ctx, off, n)
	}
	if off < 0 || n < 0 || off > size {
		return nil, fmt.Errorf("read %s [%d,+%d): %w (%d bytes)", h.key, off, n, objstore.ErrInvalidRange, size)
	}
	b := make([]byte, min(n, size-off))
	if err := h.readAt(ctx, f, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (h *heldSource) ReadRangeInto(ctx context.Context, off int64, dst []byte) error {
	f, size, err := h.file(ctx)
	if err != nil {
		return fmt.Errorf("read %s [%d,+%d): %w", h.key, off, len(dst), err)
	}
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
