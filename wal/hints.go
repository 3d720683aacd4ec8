package wal

import (
	"context"
	"time"
)

// hintInterval is the least time between two hint writes of a writer.
const hintInterval = 250 * time.Millisecond

// writeHints writes the hint of the latest committed manifest version in
// the background: a seal or a drop should not wait for a file (on local
// disk an inode and two flushes) that only speeds up readers' search.
// It runs for the life of the loop, which stops it before closing done.
func (w *Writer) writeHints(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	written := w.hinted.Load() // the claim wrote its own
	for {
		select {
		case <-w.hintKick:
		case <-stop:
			return
		}
		if v := w.Manifest().Version; v > written {
			if writeHint(ctx, w.opts.Store, w.opts.Shard, v) == nil {
				w.hinted.Store(v)
			}
			written = v
			// At most a few hints a second: each is a durable file write
			// that the writer's own flushes would queue behind.
			select {
			case <-time.After(hintInterval):
			case <-stop:
				return
			}
		}
	}
}
