// Package sleep is the one wait on a context that objstore and its cloud
// drivers share (backoffs of retries, the latencies of the test wrappers).
package sleep

import (
	"context"
	"time"
)

// Ctx sleeps for d, or until ctx ends and then returns its error.
func Ctx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
