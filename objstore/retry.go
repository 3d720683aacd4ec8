package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
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
