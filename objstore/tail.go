package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// TailReader is implemented by stores that can read the last n bytes of an
// object together with its size in one request (an HTTP suffix range,
// "Range: bytes=-n", on S3 and GCS; open, stat and pread on local disk).
// It is optional: GetTail falls back to Head, then GetRange. Azure Blob
// Storage takes no suffix range ("bytes=start-" and "bytes=start-end"
// only), so Azure does not implement it.
type TailReader interface {
	// GetTail returns the last min(n, size) bytes of the object and its
	// metadata (Size is the whole object's), or an error wrapping
	// ErrNotFound.
	GetTail(ctx context.Context, key string, n int64) (tail []byte, info ObjectInfo, err error)
}

// GetTail returns the last min(n, size) bytes of the object and its
// metadata. A reader of a file whose metadata is at its end (a Lance file:
// footer, column metadata and their offset tables) so learns the size and
// the metadata with one request where the store implements TailReader,
// instead of a Head and then a dependent read; elsewhere it costs those two.
func GetTail(ctx context.Context, r Reader, key string, n int64) ([]byte, ObjectInfo, error) {
	if n < 0 {
		return nil, ObjectInfo{}, fmt.Errorf("%w: %s: tail of %d bytes", ErrInvalidRange, key, n)
	}
	if tr, ok := r.(TailReader); ok {
		return tr.GetTail(ctx, key, n)
	}
	return HeadTail(ctx, r, key, n)
}

// HeadTail is GetTail with a Head and a GetRange, whatever r implements:
// the fallback of GetTail, and of a driver's GetTail where its one request
// cannot answer (a suffix range of an empty object).
func HeadTail(ctx context.Context, r Reader, key string, n int64) ([]byte, ObjectInfo, error) {
	info, err := r.Head(ctx, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	off := info.Size - min(n, info.Size)
	if off == info.Size {
		return []byte{}, info, nil
	}
	b, err := r.GetRange(ctx, key, off, info.Size-off)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	if int64(len(b)) != info.Size-off {
		// Replaced between the two requests (callers read immutable files).
		return nil, ObjectInfo{}, fmt.Errorf("objstore: tail of %s: %d bytes at %d of %d: changed while read", key, len(b), off, info.Size)
	}
	return b, info, nil
}

// lastBytes returns a copy of the last min(n, len(b)) bytes of b.
func lastBytes(b []byte, n int64) []byte {
	k := min(max(n, 0), int64(len(b)))
	return append([]byte{}, b[int64(len(b))-k:]...)
}

// oneRequestTail reports whether GetTail on r costs one request: r is a
// TailReader, and a wrapper's inner store is one too (wrappers implement
// TailReader whatever they wrap, falling back as GetTail does).
func oneRequestTail(r Reader) bool {
	if w, ok := r.(interface{ oneRequestTail() bool }); ok {
		return w.oneRequestTail()
	}
	_, ok := r.(TailReader)
	return ok
}

func (s *subStore) oneRequestTail() bool   { return oneRequestTail(s.inner) }
func (c *Counting) oneRequestTail() bool   { return oneRequestTail(c.inner) }
func (f *Faulty) oneRequestTail() bool     { return oneRequestTail(f.inner) }
func (s *SmallFiles) oneRequestTail() bool { return oneRequestTail(s.inner) }

var (
	_ TailReader = (*Local)(nil)
	_ TailReader = (*Memory)(nil)
	_ TailReader = (*subStore)(nil)
	_ TailReader = (*Counting)(nil)
	_ TailReader = (*Faulty)(nil)
	_ TailReader = (*SmallFiles)(nil)
)

// GetTail implements TailReader with one open, stat and pread.
func (l *Local) GetTail(ctx context.Context, key string, n int64) ([]byte, ObjectInfo, error) {
	f, fi, err := l.open(ctx, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	defer f.Close()
	size := fi.Size()
	buf := make([]byte, min(max(n, 0), size))
	k, err := f.ReadAt(buf, size-int64(len(buf)))
	if err != nil && !(errors.Is(err, io.EOF) && k == len(buf)) {
		return nil, ObjectInfo{}, fmt.Errorf("objstore: local read %s: %w", key, err)
	}
	return buf, ObjectInfo{Key: key, Size: size, ModTime: fi.ModTime()}, nil
}

// GetTail implements TailReader.
func (m *Memory) GetTail(ctx context.Context, key string, n int64) ([]byte, ObjectInfo, error) {
	o, err := m.lookup(ctx, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return lastBytes(o.data, n), ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

// GetTail implements TailReader.
func (s *subStore) GetTail(ctx context.Context, key string, n int64) ([]byte, ObjectInfo, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	b, info, err := GetTail(ctx, s.inner, k, n)
	info.Key = strings.TrimPrefix(info.Key, s.prefix)
	return b, info, err
}

// GetTail implements TailReader, counted as one OpGetRange; over an inner
// store without a one-request tail it is counted as the Head and the
// GetRange it costs there.
func (c *Counting) GetTail(ctx context.Context, key string, n int64) ([]byte, ObjectInfo, error) {
	if !oneRequestTail(c.inner) {
		return HeadTail(ctx, c, key, n)
	}
	d := c.start(OpGetRange, 0)
	var (
		b    []byte
		info ObjectInfo
	)
	err := c.wait(ctx)
	if err == nil {
		b, info, err = GetTail(ctx, c.inner, key, n)
	}
	c.finish(d, len(b))
	return b, info, err
}

// GetTail implements TailReader; its faults are GetRange's (or, over a
// store without a one-request tail, Head's and GetRange's).
func (f *Faulty) GetTail(ctx context.Context, key string, n int64) (data []byte, info ObjectInfo, err error) {
	if !oneRequestTail(f.inner) {
		return HeadTail(ctx, f, key, n)
	}
	err = f.do(ctx, OpGetRange, key, func() error { data, info, err = GetTail(ctx, f.inner, key, n); return err })
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return data, info, nil
}

// GetTail implements TailReader. A selected object is read with a tail of
// at least the wrapper's maximum, so that a small one arrives whole with
// the one request and is cached. Over a store without one-request tails
// it is read as Head reads it (the object's start in parallel with the
// Head), then its tail if it was not small.
func (s *SmallFiles) GetTail(ctx context.Context, key string, n int64) ([]byte, ObjectInfo, error) {
	if o, ok := s.cached(key); ok {
		return lastBytes(o.data, n), o.info, nil
	}
	if o, ok := s.large(key); ok {
		if n <= int64(len(o.tail)) {
			return lastBytes(o.tail, n), o.info, nil
		}
		return GetTail(ctx, s.inner, key, n)
	}
	if !s.match(key) {
		return GetTail(ctx, s.inner, key, n)
	}
	if !oneRequestTail(s.inner) {
		// s.Head caches a small object whole; s.GetRange then serves it.
		return HeadTail(ctx, s, key, n)
	}
	return s.readTail(ctx, key, n, s.max)
}

// readTail reads the last max(n, spec) bytes of a selected object with its
// size, one request on a store with one-request tails: an object no larger
// than that (and than s.max) is kept whole, a larger one as a large object
// with the tail read (its opener's footer and metadata); it returns the
// last n bytes.
func (s *SmallFiles) readTail(ctx context.Context, key string, n, spec int64) ([]byte, ObjectInfo, error) {
	b, info, err := GetTail(ctx, s.inner, key, max(n, spec))
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	if info.Size <= s.max && int64(len(b)) == info.Size {
		s.cache.Put(smallKey{s, key}, &smallObject{b, info}, info.Size+128)
		return lastBytes(b, n), info, nil
	}
	if int64(len(b)) < info.Size || info.Size > s.max {
		// The tail read is kept: the object's opener reads its footer
		// and metadata from it next.
		s.putLarge(key, info, b)
		return lastBytes(b, n), info, nil // a copy: the cache keeps b
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return b, info, nil
}
