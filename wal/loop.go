package wal

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/vfs"
)

func (w *Writer) do(ctx context.Context, o *op) error {
	o.done = make(chan error, 1)
	select {
	case w.ops <- o:
	case <-w.done:
		o.release()
		return ErrClosed
	case <-ctx.Done():
		o.release()
		return ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-w.done:
		// The loop has stopped. The send above may have won the race with
		// its exit (the channel is buffered), and then nobody will answer;
		// or the loop answered o before it stopped (done is closed after
		// the last answer).
		select {
		case err := <-o.done:
			return err
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		// The operation may still complete; it is simply not acknowledged.
		return ctx.Err()
	}
}

func (w *Writer) loop() {
	defer close(w.done)
	defer w.stopHeartbeat() // after the final seal of a Close, which releases it
	defer w.ungauge()
	hintStop, hintStopped := make(chan struct{}), make(chan struct{})
	go w.writeHints(hintStop, hintStopped)
	defer func() {
		close(hintStop)
		<-hintStopped
	}()
	defer func() {
		w.tailMu.Lock()
		w.mem.release()
		w.tailMu.Unlock()
	}()
	defer w.log.close()
	defer w.abandonSeal()
	ctx := context.Background()
	w.passRowless(ctx)
	var queue []*op
	for {
		if len(queue) == 0 {
			select {
			case o := <-w.ops:
				queue = append(queue, o)
			case res := <-w.sealDone:
				w.finishSeal(ctx, res)
				continue
			case <-w.stop:
				w.failAll(ErrClosed)
				return
			}
		}
		// A background seal that has finished is committed first, so that
		// its rows become readable as soon as possible.
		select {
		case res := <-w.sealDone:
			w.finishSeal(ctx, res)
		default:
		}
		// Take everything already waiting: whatever arrived while the last
		// entry was written goes into the next one. The loop never waits
		// for more: callers that want a window form their groups before
		// they call (rollout's append queue; see doc.go, "Group commit").
	drain:
		for {
			select {
			case o := <-w.ops:
				queue = append(queue, o)
			default:
				break drain
			}
		}
		// Consecutive appends of one column set form one entry, up to
		// MaxEntryBytes.
		n, size, rows := 0, int64(0), int64(0)
		for n < len(queue) && queue[n].kind == opAppend && queue[n].format == queue[0].format {
			var r int64
			for _, rec := range queue[n].recs {
				r += rec.NumRows()
			}
			if n > 0 && rows+r > MaxEntryRows {
				break // sequence numbers count at most MaxEntryRows rows per entry
			}
			for _, r := range queue[n].recs {
				size += recordBytes(r)
			}
			rows += r
			n++
			if size >= w.opts.MaxEntryBytes {
				break
			}
		}
		if n > 0 {
			w.appendGroup(ctx, queue[:n])
			queue = queue[n:]
			continue
		}
		o := queue[0]
		queue = queue[1:]
		if w.err != nil {
			o.done <- w.err
			if o.kind == opClose {
				w.failQueued(queue, ErrClosed)
				return
			}
			continue
		}
		switch o.kind {
		case opSeal:
			// Answered once every row acknowledged so far is in a
			// committed generation.
			switch {
			case w.mem.rows > 0 && w.sealing != nil:
				// Sealed right after the one in flight, without holding
				// up appends until then (finishSeal starts it).
				w.sealNext = append(w.sealNext, o.done)
			case w.mem.rows > 0:
				w.startSeal(ctx, SealFlush, o.done)
			case w.sealing != nil:
				w.sealing.waiters = append(w.sealing.waiters, o.done)
			default:
				o.done <- nil
			}
		case opDrop:
			o.done <- w.drop(ctx, o.upTo)
		case opClose:
			_, err := w.seal(ctx, SealClose)
			if err == nil {
				err = ErrClosed
			}
			if w.hb != nil {
				w.hb.release.Store(true) // this process stops: nobody need wait for it
			}
			w.err = ErrClosed
			o.done <- err
			w.failQueued(queue, ErrClosed)
			w.failAll(ErrClosed)
			return
		}
	}
}

func (o *op) release() {
	for _, r := range o.recs {
		r.Release()
	}
	if o.enc != nil {
		o.enc.release()
	}
}

func (w *Writer) failQueued(queue []*op, err error) {
	for _, o := range queue {
		o.release()
		o.done <- err
	}
}

// failAll answers every operation still in the channel.
func (w *Writer) failAll(err error) {
	for {
		select {
		case o := <-w.ops:
			w.failQueued([]*op{o}, err)
		default:
			return
		}
	}
}

func (w *Writer) appendGroup(ctx context.Context, group []*op) {
	var recs []arrow.RecordBatch
	var msgs []*encoded
	appends := 0
	for _, o := range group {
		recs = append(recs, o.recs...)
		msgs = append(msgs, o.enc)
		appends += o.appends
	}
	err := w.writeEntry(ctx, group[0].format, recs, msgs)
	// Counted before the callers are answered: an append that returned is
	// in the metric (it lagged it).
	if err == nil {
		w.opts.Metrics.EntryAppends.Observe(float64(appends))
	} else if vfs.IsNoSpace(err) {
		w.opts.Metrics.NoSpace.Inc()
	}
	for _, o := range group {
		o.release()
		o.done <- err
	}
	if err == nil && w.mem.full(&w.opts) {
		w.startSeal(ctx, SealFull)
	}
}
