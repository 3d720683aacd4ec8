// Package bgwork counts the work a package starts in the background on its
// own (reads ahead of need: lance/index's prewarm, lance/file's offsets
// reads), so that benchmarks and tests can wait for it to finish before
// they time or count what comes next.
package bgwork

import (
	"context"
	"sync"
)

// Group counts goroutines started by Go. The zero value is ready to use.
type Group struct{ wg sync.WaitGroup }

// Go runs fn in a new goroutine counted until fn returns.
func (g *Group) Go(fn func()) { g.wg.Go(fn) }

// Wait returns once no goroutine started by Go is running, or ctx's error
// when ctx ends first.
func (g *Group) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
