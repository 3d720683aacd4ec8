package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
	return headTail(ctx, r, key, n)
}

// headTail is GetTail with a Head and a GetRange.
func headTail(ctx context.Context, r Reader, key string, n int64) ([]byte, ObjectInfo, error) {
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

// tailOf checks that data ends an object of size bytes and returns its
// last min(n, size) bytes.
func tailOf(key string, data []byte, size, n int64) ([]byte, error) {
	want := min(n, size)
	if int64(len(data)) < want || int64(len(data)) > size {
		return nil, fmt.Errorf("objstore: get tail %s: %d bytes for the last %d of %d", key, len(data), want, size)
	}
	return data[int64(len(data))-want:], nil
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
	_ TailReader = (*S3)(nil)
	_ TailReader = (*GCS)(nil)
	_ TailReader = (*Local)(nil)
	_ TailReader = (*Memory)(nil)
	_ TailReader = (*subStore)(nil)
	_ TailReader = (*Counting)(nil)
	_ TailReader = (*Faulty)(nil)
	_ TailReader = (*SmallFiles)(nil)
)

// contentRange parses a Content-Range header ("bytes 0-99/1234"): the
// first byte and the complete length; ok is false when it is malformed or
// the length unknown ("*").
func contentRange(cr string) (start, total int64, ok bool) {
	rng, tot, found := strings.Cut(strings.TrimPrefix(cr, "bytes "), "/")
	first, _, dash := strings.Cut(rng, "-")
	if !found || !dash || !strings.HasPrefix(cr, "bytes ") {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	total, err2 := strconv.ParseInt(tot, 10, 64)
	return start, total, err1 == nil && err2 == nil && start >= 0 && total >= 0
}

// GetTail implements TailReader: one GetObject with "Range: bytes=-n"; the
// size is the complete length in its Content-Range. A body cut short is
// resumed from the byte it reached (readResuming).
func (s *S3) GetTail(ctx context.Context, key string, n int64) ([]byte, ObjectInfo, error) {
	k, err := s.objKey(key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	if n <= 0 {
		return headTail(ctx, s, key, 0) // "bytes=-0" is unsatisfiable
	}
	var (
		etag     *string
		start    int64 // of the first answer's bytes in the object
		size     int64 = -1
		modified time.Time
	)
	data, err := readResuming(ctx, resumableRead{key: key, limit: -1, retryable: s3Retryable,
		open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			rng := fmt.Sprintf("bytes=-%d", n)
			if got > 0 {
				rng = httpRange(start+got, -1)
			}
			out, err := s.getObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k, Range: &rng}, got, etag)
			if err != nil {
				return nil, 0, err
			}
			if got == 0 {
				etag, modified = out.ETag, aws.ToTime(out.LastModified)
				// A server that ignores Range answers 200 with the whole
				// object: its size is then what arrives.
				if out.ContentRange != nil {
					var ok bool
					if start, size, ok = contentRange(*out.ContentRange); !ok {
						out.Body.Close()
						return nil, 0, permanent{fmt.Errorf("bad Content-Range %q", *out.ContentRange)}
					}
				}
			}
			return out.Body, bodySize(out.ContentLength), nil
		}})
	if err != nil {
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable || errorCode(err) == "InvalidRange" {
			// An empty object has no satisfiable suffix range.
			return headTail(ctx, s, key, n)
		}
		return nil, ObjectInfo{}, s.wrap("get tail", key, err)
	}
	if size < 0 {
		size = int64(len(data))
	}
	if data, err = tailOf(key, data, size, n); err != nil {
		return nil, ObjectInfo{}, err
	}
	return data, ObjectInfo{Key: key, Size: size, ModTime: modified}, nil
}

// GetTail implements TailReader: one read with a negative offset (a suffix
// range); the reader's attributes carry the object's size. A body cut
// short is resumed (readResuming).
func (g *GCS) GetTail(ctx context.Context, key string, n int64) ([]byte, ObjectInfo, error) {
	o, err := g.obj(key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	if n <= 0 {
		return headTail(ctx, g, key, 0)
	}
	var attrs storage.ReaderObjectAttrs // the first answer's
	data, err := readResuming(ctx, resumableRead{key: key, limit: -1, retryable: gcsRetryable,
		open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			if got == 0 {
				r, err := g.reader(o, 0).NewRangeReader(ctx, -n, -1)
				if err != nil {
					return nil, 0, err
				}
				attrs = r.Attrs
				return r, r.Remain(), nil
			}
			r, err := g.reader(o, attrs.Generation).NewRangeReader(ctx, attrs.StartOffset+got, -1)
			if err != nil {
				return nil, 0, err
			}
			return r, r.Remain(), nil
		}})
	if err != nil {
		if gcsStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			return headTail(ctx, g, key, n) // an empty object
		}
		return nil, ObjectInfo{}, g.wrap("get tail", key, err)
	}
	if data, err = tailOf(key, data, attrs.Size, n); err != nil {
		return nil, ObjectInfo{}, err
	}
	return data, ObjectInfo{Key: key, Size: attrs.Size, ModTime: attrs.LastModified}, nil
}

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
		return headTail(ctx, c, key, n)
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
		return headTail(ctx, f, key, n)
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
	if !s.match(key) {
		return GetTail(ctx, s.inner, key, n)
	}
	if !oneRequestTail(s.inner) {
		// s.Head caches a small object whole; s.GetRange then serves it.
		return headTail(ctx, s, key, n)
	}
	b, info, err := GetTail(ctx, s.inner, key, max(n, s.max))
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	if info.Size <= s.max && int64(len(b)) == info.Size {
		s.cache.Put(smallKey{s, key}, &smallObject{b, info}, info.Size+128)
		return lastBytes(b, n), info, nil
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return b, info, nil
}
