// Package driver holds what the cloud drivers (objstore/s3, objstore/gcs,
// objstore/azure) share and nothing else needs: the retry of a conditional
// put whose acknowledgement may be lost, the resumption of a read whose
// body broke off, and the small parsers and checks around them. See the
// objstore package documentation for the retry budget.
package driver

import (
	"slices"
	"strings"
	"syscall"

	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/sleep"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// ErrWriterDone is what a writer answers after Close or Abort.
var ErrWriterDone = errors.New("objstore: writer already closed or aborted")

// PutIfAbsentAttempts bounds the attempts of one PutIfAbsent.
const PutIfAbsentAttempts = 5

// ConditionalPut is one backend's put-if-absent, for PutIfAbsentRetrying:
// Put makes one attempt; Taken reports that an error is the condition
// failing (the key exists); Retryable that it is transient; Get reads the
// key back; Wrap names a final error.
type ConditionalPut struct {
	Put       func() error
	Taken     func(error) bool
	Retryable func(error) bool
	Get       func() ([]byte, error)
	Wrap      func(error) error
	Backend   string
}

// PutIfAbsentRetrying retries a conditional put on transient failures,
// with backoff. A retry can find the key taken by its own earlier attempt,
// whose acknowledgement was lost: when the object holds exactly data the
// put succeeded (the lost-acknowledgement case of Store.PutIfAbsent).
func PutIfAbsentRetrying(ctx context.Context, key string, data []byte, c ConditionalPut) error {
	ambiguous := false
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return c.Wrap(err)
		}
		err := c.Put()
		switch {
		case err == nil:
			return nil
		case c.Taken(err):
			if ambiguous {
				if cur, gerr := c.Get(); gerr == nil && bytes.Equal(cur, data) {
					return nil
				}
			}
			return fmt.Errorf("%w: %s (%s: %w)", objstore.ErrExists, key, c.Backend, err)
		case ctx.Err() != nil || attempt >= PutIfAbsentAttempts || !c.Retryable(err):
			return c.Wrap(err)
		}
		ambiguous = true
		if err := sleep.Ctx(ctx, delay); err != nil {
			return c.Wrap(err)
		}
		delay *= 2
	}
}

// RetryableStatus reports a transient HTTP failure: 408, 429, 5xx, or a
// transport error (no status) that is not the caller giving up.
func RetryableStatus(status int, err error) bool {
	switch {
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return true
	case status != 0:
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// EmptyRange answers a ranged read that the server refused as starting at
// or past the end: empty when offset is the object's size, an error past
// it (objstore.CheckRange's), as Store.GetRange specifies.
func EmptyRange(ctx context.Context, s interface {
	Head(context.Context, string) (objstore.ObjectInfo, error)
}, key string, offset int64) ([]byte, error) {
	info, err := s.Head(ctx, key)
	if err != nil {
		return nil, err
	}
	if _, err := objstore.CheckRange(key, info.Size, offset, 0); err != nil {
		return nil, err
	}
	return []byte{}, nil
}

// A read's retries: at most ReadAttempts requests of one read fail (a
// torn body or a transient error), and none is retried once
// ReadRetryWindow has passed since its first failure; ctx ends it sooner.
// A torn body is one cut short by a connection reset mid-way, which a
// fault campaign on S3 met on about 1% of responses.
const (
	ReadAttempts    = 5
	ReadRetryWindow = 20 * time.Second
)

// ResumableRead is one backend's read of an object, for ReadResuming.
type ResumableRead struct {
	// Open sends the read's request for its bytes from got on (got of
	// them have arrived: 0 on the first request) and returns the body
	// and how many bytes it should carry (its Content-Length; -1 if
	// unknown). A request for the rest must read the same object as the
	// first (conditional on its ETag or generation).
	Open func(ctx context.Context, got int64) (body io.ReadCloser, size int64, err error)
	// Retryable reports that an error of Open is transient.
	Retryable func(error) bool
	// Limit is the most bytes the read returns; -1: all the bodies carry.
	Limit int64
	Key   string // for the log
}

// Permanent marks an error of ResumableRead.Open that no retry mends (a
// server that ignored the Range header): ReadResuming returns it at once.
type Permanent struct{ Err error }

func (p Permanent) Error() string { return p.Err.Error() }
func (p Permanent) Unwrap() error { return p.Err }

// ReadResuming reads with r, resuming a torn body: when a body breaks off
// before its end, the next request asks only for the bytes still missing,
// so that a retry neither restarts a large read nor returns its start
// twice. A request that fails with a transient error is retried as well.
// Both share one budget (ReadAttempts, ReadRetryWindow, ctx), so a read
// never hangs on a server that keeps failing.
func ReadResuming(ctx context.Context, r ResumableRead) ([]byte, error) {
	var (
		data  []byte
		first time.Time
	)
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		got := int64(len(data))
		body, size, err := r.Open(ctx, got)
		progress := false
		if err == nil {
			if data == nil && size >= 0 {
				data = make([]byte, 0, readCap(size, r.Limit))
			}
			data, err = readBody(data, body, r.Limit)
			body.Close()
			if err == nil {
				return data, nil
			}
			n := int64(len(data)) - got
			if ctx.Err() != nil || (size >= 0 && n >= size) {
				// Not torn: the whole body arrived, and its reader then
				// failed (a checksum), or the caller gave up.
				return nil, err
			}
			err = fmt.Errorf("body cut after %d of %s bytes: %w", n, sizeString(size), err)
			progress = n > 0
		} else {
			var p Permanent
			if errors.As(err, &p) {
				return nil, p.Err
			}
			if ctx.Err() != nil || !r.Retryable(err) {
				if attempt == 1 {
					return nil, err
				}
				return nil, fmt.Errorf("attempt %d, %d bytes read: %w", attempt, got, err)
			}
		}
		if first.IsZero() {
			first = time.Now()
		}
		if attempt >= ReadAttempts || time.Since(first) > ReadRetryWindow {
			return nil, fmt.Errorf("gave up after %d attempts, %d bytes read: %w", attempt, len(data), err)
		}
		slog.Debug("objstore: retrying a read", "key", r.Key, "attempt", attempt, "read", len(data), "err", err)
		if progress {
			continue // a connection that broke off; the server answered
		}
		if err := sleep.Ctx(ctx, delay); err != nil {
			return nil, err
		}
		delay *= 2
	}
}

// readCap is the capacity for a read's buffer: the first body's size,
// capped by the read's limit, and by maxReadPrealloc so that a bogus
// Content-Length costs no more than that before bytes arrive.
func readCap(size, limit int64) int64 {
	if limit >= 0 {
		size = min(size, limit)
	}
	return min(size, maxReadPrealloc)
}

const maxReadPrealloc = 64 << 20

func sizeString(n int64) string {
	if n < 0 {
		return "?"
	}
	return strconv.FormatInt(n, 10)
}

// readBody appends r's bytes to dst until EOF, or until dst holds limit
// bytes (limit >= 0); it returns what arrived with any error but EOF.
func readBody(dst []byte, r io.Reader, limit int64) ([]byte, error) {
	if limit >= 0 {
		r = io.LimitReader(r, limit-int64(len(dst)))
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)] // grow, as io.ReadAll does
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// HTTPRange is the value of a Range header for the bytes [start, end);
// end < 0: to the end of the object.
func HTTPRange(start, end int64) string {
	if end < 0 {
		return fmt.Sprintf("bytes=%d-", start)
	}
	return fmt.Sprintf("bytes=%d-%d", start, end-1)
}

// IsTornBody reports an answer whose body broke off before its end.
func IsTornBody(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// FirstSorted sorts infos by key (the stores list in byte order already;
// sorting guards compatible servers) and keeps the first n (n < 0: all).
func FirstSorted(infos []objstore.ObjectInfo, n int) []objstore.ObjectInfo {
	slices.SortFunc(infos, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	if n >= 0 && len(infos) > n {
		infos = infos[:n]
	}
	return infos
}

// ContentRange parses a Content-Range header ("bytes 0-99/1234"): the
// first byte and the complete length; ok is false when it is malformed or
// the length unknown ("*").
func ContentRange(cr string) (start, total int64, ok bool) {
	rng, tot, found := strings.Cut(strings.TrimPrefix(cr, "bytes "), "/")
	first, _, dash := strings.Cut(rng, "-")
	if !found || !dash || !strings.HasPrefix(cr, "bytes ") {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	total, err2 := strconv.ParseInt(tot, 10, 64)
	return start, total, err1 == nil && err2 == nil && start >= 0 && total >= 0
}

// TailOf checks that data ends an object of size bytes and returns its
// last min(n, size) bytes.
func TailOf(key string, data []byte, size, n int64) ([]byte, error) {
	want := min(n, size)
	if int64(len(data)) < want || int64(len(data)) > size {
		return nil, fmt.Errorf("objstore: get tail %s: %d bytes for the last %d of %d", key, len(data), want, size)
	}
	return data[int64(len(data))-want:], nil
}

// StoreRoot validates a bucket prefix and returns it ending with '/', or "".
func StoreRoot(backend, prefix string) (string, error) {
	root := strings.Trim(prefix, "/")
	if root == "" {
		return "", nil
	}
	if err := objstore.ValidateKey(root); err != nil {
		return "", fmt.Errorf("objstore: %s prefix: %w", backend, err)
	}
	return root + "/", nil
}

// Deref is *p, or the zero value when p is nil.
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// BodySize is a response's Content-Length, or -1 if it has none.
func BodySize(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
}

// SplitURL splits "scheme://bucket/prefix" (the prefix optional) for a
// driver's Open; what names the bucket in the error ("bucket",
// "container").
func SplitURL(url, scheme, what string) (bucket, prefix string, err error) {
	bucket, prefix, _ = strings.Cut(strings.TrimPrefix(url, scheme+"://"), "/")
	if bucket == "" {
		return "", "", fmt.Errorf("objstore: open %q: missing %s", url, what)
	}
	return bucket, prefix, nil
}
