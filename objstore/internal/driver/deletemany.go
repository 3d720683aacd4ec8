package driver

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/sleep"
)

// BatchDelete is one backend's request that deletes several keys, for
// DeleteMany.
type BatchDelete struct {
	Size     int // keys a request holds at most (S3: 1000, Azure: 256)
	Parallel int // requests in flight at once
	// Send sends one request deleting keys (valid, distinct). It returns
	// the request's error, or each key's (nil: deleted, or absent).
	Send func(ctx context.Context, keys []string) (perKey []error, err error)
	// Retryable reports a transient error, of a request or of a key.
	Retryable func(error) bool
}

// DeleteMany implements objstore.BatchDeleter with b: keys in requests of
// b.Size, b.Parallel at once. A request that fails transiently (or whose
// answer breaks off) is sent again, and so are the keys that failed
// transiently, within a read's retry budget (ReadAttempts,
// ReadRetryWindow): deleting is idempotent. An invalid key fails alone,
// without a request.
func DeleteMany(ctx context.Context, keys []string, b BatchDelete) error {
	errs := make([]error, len(keys))
	first := map[string]int{} // key -> its first index
	var send []string
	var at []int // index in keys of each key of send
	for i, k := range keys {
		if errs[i] = objstore.ValidateKey(k); errs[i] != nil {
			continue
		}
		if _, dup := first[k]; !dup {
			first[k] = i
			send, at = append(send, k), append(at, i)
		}
	}
	g := new(errgroup.Group)
	g.SetLimit(max(b.Parallel, 1))
	for lo := 0; lo < len(send); lo += b.Size {
		hi := min(lo+b.Size, len(send))
		g.Go(func() error {
			for j, err := range deleteBatch(ctx, send[lo:hi], b) {
				errs[at[lo+j]] = err
			}
			return nil
		})
	}
	_ = g.Wait()
	for i, k := range keys {
		if j := first[k]; errs[i] == nil && j != i {
			errs[i] = errs[j] // a key given twice fares as its first
		}
	}
	return objstore.KeyErrors(keys, errs)
}

// deleteBatch sends one request for keys, and again for what failed
// transiently; it returns each key's error.
func deleteBatch(ctx context.Context, keys []string, b BatchDelete) []error {
	errs := make([]error, len(keys))
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	var firstFail time.Time
	for attempt := 1; ; attempt++ {
		batch := make([]string, len(idx))
		for j, i := range idx {
			batch[j] = keys[i]
		}
		perKey, err := b.Send(ctx, batch)
		var again []int
		for j, i := range idx {
			e := err
			if e == nil && j < len(perKey) {
				e = perKey[j]
			}
			errs[i] = e
			if e != nil && (b.Retryable(e) || IsTornBody(e)) {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return errs
		}
		if firstFail.IsZero() {
			firstFail = time.Now()
		}
		if ctx.Err() != nil || attempt >= ReadAttempts || time.Since(firstFail) > ReadRetryWindow {
			return errs
		}
		if sleep.Ctx(ctx, time.Duration(attempt)*50*time.Millisecond) != nil {
			return errs
		}
		idx = again
	}
}
