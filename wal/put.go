package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/objstore"
)

// writeEntry makes recs (encoded as msgs in format f) durable at the next
// free position and adds them to the memtable. A nil return is the
// acknowledgement.
func (w *Writer) writeEntry(ctx context.Context, f *entryFormat, recs []arrow.RecordBatch, msgs []*encoded) error {
	if w.err != nil {
		return w.err
	}
	if w.pending {
		if err := w.resolvePending(ctx); err != nil {
			return err
		}
	}
	size := len(f.header.msg) + len(endOfStream)
	for _, m := range msgs {
		size += m.size
	}
	if err := w.log.put(ctx, w.nextPos, f, msgs, recs); err != nil {
		if errors.Is(err, ErrLogFailed) {
			return w.halt(err)
		}
		return err
	}
	// The entry is durable. Count it in the memtable whatever happens next:
	// it is in the log and will be sealed by us or replayed by a successor.
	var rows int64
	w.tailMu.Lock()
	for _, r := range recs {
		w.mem.add(r, Seq(w.nextPos, rows))
		rows += r.NumRows()
	}
	w.nextPos++
	w.tailMu.Unlock()
	w.publishUnsealed()
	w.opts.Metrics.EntryBytes.Observe(float64(size))
	w.opts.Metrics.EntryRows.Observe(float64(rows))
	w.opts.Metrics.RowsTotal.Add(float64(rows))
	if w.segDir == "" && !w.reused {
		// The object log: a claim after our last manifest commit put its
		// fence entry at or below this position, so the put itself was
		// the check (doc.go, "Fencing").
		return nil
	}
	if err := w.checkFence(ctx); err != nil {
		return err
	}
	w.reused = false
	return nil
}

// putEntry writes msgs as an object entry at nextPos, put-if-absent,
// adopting entries other writers left at the positions it finds taken.
func (w *Writer) putEntry(ctx context.Context, header *entryHeader, msgs []*encoded) error {
	for {
		pos := w.nextPos
		// A new buffer each time: a store may keep what it was given.
		data := header.assemble(msgs, pos, 0, nil)
		key := entryKey(w.opts.Shard, pos)
		err := retry(ctx, func() error { return w.opts.Store.PutIfAbsent(ctx, key, data) })
		if errors.Is(err, objstore.ErrExists) {
			got, gerr := w.opts.Store.Get(ctx, key)
			if gerr != nil {
				w.pending = true
				return fmt.Errorf("wal: read back position %d: %w", pos, gerr)
			}
			if !bytes.Equal(got, data) {
				// Another writer's entry: adopt it (it may have been
				// acknowledged), unless that writer is newer than us.
				if e, derr := decodeEntry(got); derr == nil {
					newer := e.epoch > w.epoch
					e.release()
					if newer {
						return w.fence(fmt.Errorf("%w: position %d holds an entry of epoch %d", ErrFenced, pos, e.epoch))
					}
				}
				if err := w.adopt(got); err != nil {
					return err
				}
				continue
			}
			err = nil // ours, with a lost acknowledgement
		}
		if err != nil {
			w.pending = true
			return fmt.Errorf("wal: write position %d (not acknowledged): %w", pos, err)
		}
		return nil
	}
}

// resolvePending settles an earlier ambiguous write at nextPos.
func (w *Writer) resolvePending(ctx context.Context) error {
	b, err := w.opts.Store.Get(ctx, entryKey(w.opts.Shard, w.nextPos))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		// The position is free, but a successor may have adopted, sealed
		// and collected our entry there: the put that reuses it is not
		// its own fence check (doc.go, "Fencing").
		w.pending = false
		w.reused = true
		return nil
	case err != nil:
		return fmt.Errorf("wal: resolve position %d: %w", w.nextPos, err)
	}
	w.pending = false
	// A newer writer's entry (a claim's fence entry) means we are deposed:
	// adopting it and writing on past it would put entries where that
	// writer may already have collected, unchecked.
	if e, derr := decodeEntry(b); derr == nil {
		newer := e.epoch > w.epoch
		e.release()
		if newer {
			return w.fence(fmt.Errorf("%w: position %d holds an entry of a newer epoch", ErrFenced, w.nextPos))
		}
	}
	return w.adopt(b)
}

// checkFence verifies no manifest version newer than ours exists (the
// next one would be a claim's, which is never collected), which is what
// entitles a writer of the segment log, or one reusing a position, to
// acknowledge (see doc.go).
func (w *Writer) checkFence(ctx context.Context) error {
	next := w.man.Version + 1
	_, err := w.opts.Store.Head(ctx, manifestKey(w.opts.Shard, next))
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: fence check (not acknowledged): %w", err)
	}
	return w.fence(fmt.Errorf("%w: shard %s manifest version %d exists", ErrFenced, w.opts.Shard, next))
}

func (w *Writer) fence(err error) error {
	if w.err == nil {
		w.opts.Logger.Warn("wal: writer fenced", "shard", w.opts.Shard, "epoch", w.epoch, "err", err)
		w.opts.Metrics.FencedWriters.Inc()
		w.err = err
		w.stopped.Store(true)
	}
	return w.err
}

// halt makes err (ErrLogFailed) sticky: the writer appends no more.
func (w *Writer) halt(err error) error {
	if w.err == nil {
		w.opts.Logger.Error("wal: writer stopped", "shard", w.opts.Shard, "epoch", w.epoch, "err", err)
		w.opts.Metrics.FailedWriters.Inc()
		w.err = err
		w.stopped.Store(true)
	}
	return w.err
}
