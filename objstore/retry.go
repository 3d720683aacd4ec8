package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// conditionalPut is one backend's put-if-absent, for putIfAbsentRetrying:
// put makes one attempt; taken reports that an error is the condition
// failing (the key exists); retryable that it is transient; get reads the
// key back; wrap names a final error.
type conditionalPut struct {
	put       func() error
	taken     func(error) bool
	retryable func(error) bool
	get       func() ([]byte, error)
	wrap      func(error) error
	backend   string
}

// putIfAbsentRetrying retries a conditional put on transient failures,
// with backoff. A retry can find the key taken by its own earlier attempt,
// whose acknowledgement was lost: when the object holds exactly data the
// put succeeded (the lost-acknowledgement case of Store.PutIfAbsent).
func putIfAbsentRetrying(ctx context.Context, key string, data []byte, c conditionalPut) error {
	ambiguous := false
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return c.wrap(err)
		}
		err := c.put()
		switch {
		case err == nil:
			return nil
		case c.taken(err):
			if ambiguous {
				if cur, gerr := c.get(); gerr == nil && bytes.Equal(cur, data) {
					return nil
				}
			}
			return fmt.Errorf("%w: %s (%s: %w)", ErrExists, key, c.backend, err)
		case ctx.Err() != nil || attempt >= putIfAbsentAttempts || !c.retryable(err):
			return c.wrap(err)
		}
		ambiguous = true
		if err := sleepCtx(ctx, delay); err != nil {
			return c.wrap(err)
		}
		delay *= 2
	}
}

// retryableStatus reports a transient HTTP failure: 408, 429, 5xx, or a
// transport error (no status) that is not the caller giving up.
func retryableStatus(status int, err error) bool {
	switch {
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return true
	case status != 0:
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// emptyRange answers a ranged read that the server refused as starting at
// or past the end: empty when offset is the object's size, an error past
// it (checkRange's), as Store.GetRange specifies.
func emptyRange(ctx context.Context, s interface {
	Head(context.Context, string) (ObjectInfo, error)
}, key string, offset int64) ([]byte, error) {
	info, err := s.Head(ctx, key)
	if err != nil {
		return nil, err
	}
	if _, err := checkRange(key, info.Size, offset, 0); err != nil {
		return nil, err
	}
	return []byte{}, nil
}

// A read's retries: at most readAttempts requests of one read fail (a
// torn body or a transient error), and none is retried once
// readRetryWindow has passed since its first failure; ctx ends it sooner.
// A torn body is one cut short by a connection reset mid-way, which a
// fault campaign on S3 met on about 1% of responses.
const (
	readAttempts    = 5
	readRetryWindow = 20 * time.Second
)

// resumableRead is one backend's read of an object, for readResuming.
type resumableRead struct {
	// open sends the read's request for its bytes from got on (got of
	// them have arrived: 0 on the first request) and returns the body
	// and how many bytes it should carry (its Content-Length; -1 if
	// unknown). A request for the rest must read the same object as the
	// first (conditional on its ETag or generation).
	open func(ctx context.Context, got int64) (body io.ReadCloser, size int64, err error)
	// retryable reports that an error of open is transient.
	retryable func(error) bool
	// limit is the most bytes the read returns; -1: all the bodies carry.
	limit int64
	key   string // for the log
}

// permanent marks an error of resumableRead.open that no retry mends (a
// server that ignored the Range header): readResuming returns it at once.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// readResuming reads with r, resuming a torn body: when a body breaks off
// before its end, the next request asks only for the bytes still missing,
// so that a retry neither restarts a large read nor returns its start
// twice. A request that fails with a transient error is retried as well.
// Both share one budget (readAttempts, readRetryWindow, ctx), so a read
// never hangs on a server that keeps failing.
func readResuming(ctx context.Context, r resumableRead) ([]byte, error) {
	var (
		data  []byte
		first time.Time
	)
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		got := int64(len(data))
		body, size, err := r.open(ctx, got)
		progress := false
		if err == nil {
			if data == nil && size >= 0 {
				data = make([]byte, 0, readCap(size, r.limit))
			}
			data, err = readBody(data, body, r.limit)
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
			var p permanent
			if errors.As(err, &p) {
				return nil, p.err
			}
			if ctx.Err() != nil || !r.retryable(err) {
				if attempt == 1 {
					return nil, err
				}
				return nil, fmt.Errorf("attempt %d, %d bytes read: %w", attempt, got, err)
			}
		}
		if first.IsZero() {
			first = time.Now()
		}
		if attempt >= readAttempts || time.Since(first) > readRetryWindow {
			return nil, fmt.Errorf("gave up after %d attempts, %d bytes read: %w", attempt, len(data), err)
		}
		slog.Debug("objstore: retrying a read", "key", r.key, "attempt", attempt, "read", len(data), "err", err)
		if progress {
			continue // a connection that broke off; the server answered
		}
		if err := sleepCtx(ctx, delay); err != nil {
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

// httpRange is the value of a Range header for the bytes [start, end);
// end < 0: to the end of the object.
func httpRange(start, end int64) string {
	if end < 0 {
		return fmt.Sprintf("bytes=%d-", start)
	}
	return fmt.Sprintf("bytes=%d-%d", start, end-1)
}
