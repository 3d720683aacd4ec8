package wal

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/vfs"
)

// sealJob is a memtable being written as a generation in the background.
type sealJob struct {
	cause   string    // why it was started (SealFull, ...)
	start   time.Time // when
	mem     memtable
	gen     uint64       // its generation number
	place   *inPlace     // the segment it is sealed into, or nil: a file of its own
	lastPos uint64       // the last WAL position whose rows it holds
	waiters []chan error // Seal calls answered when it commits
}

type sealResult struct {
	job *sealJob
	gen Generation
	err error
}

// startSeal moves the memtable into a background seal, after waiting for
// the one in flight (so at most two memtables are held: the bound on a
// writer's memory). The waiters are answered when it commits. The
// loop keeps appending meanwhile: sealing a full memtable (128 MiB) takes
// far longer than a group commit, and appends must not wait for it.
func (w *Writer) startSeal(ctx context.Context, cause string, waiters ...chan error) {
	for w.sealing != nil { // finishing one may start the next (sealNext)
		w.finishSeal(ctx, <-w.sealDone)
	}
	if w.err != nil || w.mem.rows == 0 {
		for _, d := range waiters {
			d <- w.err
		}
		return
	}
	job := &sealJob{cause: cause, start: time.Now(), mem: w.mem, gen: w.man.NextGeneration, lastPos: w.nextPos - 1, waiters: waiters}
	if w.seg != nil {
		job.place = w.seg.cut()
	}
	w.tailMu.Lock()
	w.mem = memtable{}
	w.tailSealing = &job.mem
	w.tailMu.Unlock()
	w.sealing = job
	w.publishUnsealed()
	store, shard, cols := w.opts.Store, w.opts.Shard, w.genColumns()
	go func() {
		g, err := writeGeneration(ctx, store, shard, job.gen, cols, job.mem, job.place)
		w.sealDone <- sealResult{job: job, gen: g, err: err}
	}()
}

// finishSeal commits a finished background seal to the manifest and
// answers its waiters. On failure its rows go back in front of the
// memtable: they are acknowledged, and the next seal retries them.
func (w *Writer) finishSeal(ctx context.Context, res sealResult) {
	job := res.job
	w.sealing = nil
	err := res.err
	if err == nil {
		err = w.commitSeal(ctx, res.gen, job.lastPos)
	}
	if err == nil {
		w.opts.Metrics.Seals.WithLabelValues(job.cause).Inc()
		w.opts.Metrics.SealSeconds.Observe(since(job.start))
	}
	if err != nil {
		if w.err == nil {
			w.opts.Logger.Warn("wal: seal failed; its rows stay buffered", "shard", w.opts.Shard, "generation", job.gen, "err", err)
		}
		if vfs.IsNoSpace(err) {
			w.opts.Metrics.NoSpace.Inc()
		}
		if errors.Is(err, errNotShared) && w.seg != nil {
			w.opts.Logger.Error("wal: sealing in place stops: the store does not read the log's directory", "shard", w.opts.Shard, "err", err)
			w.seg.genRoot = ""
		}
		w.tailMu.Lock()
		w.mem.prepend(job.mem)
		w.tailSealing = nil
		w.tailMu.Unlock()
	} else {
		// After commitSeal published the manifest: until then the tail
		// still serves these rows (seq.go, "Tail").
		w.tailMu.Lock()
		w.tailSealing = nil
		w.tailMu.Unlock()
		job.mem.release()
	}
	w.publishUnsealed()
	for _, d := range job.waiters {
		d <- err
	}
	if next := w.sealNext; len(next) > 0 {
		w.sealNext = nil
		w.startSeal(ctx, SealFlush, next...)
	}
}

// abandonSeal waits for a seal in flight when the loop stops, and drops it
// uncommitted (its rows are in the WAL; a successor replays them).
func (w *Writer) abandonSeal() {
	for _, d := range w.sealNext {
		d <- ErrClosed
	}
	w.sealNext = nil
	if w.sealing == nil {
		return
	}
	res := <-w.sealDone
	w.sealing = nil
	w.tailMu.Lock()
	w.tailSealing = nil
	w.tailMu.Unlock()
	res.job.mem.release()
	w.sweep.Store(true)
	for _, d := range res.job.waiters {
		d <- ErrClosed
	}
}

func (w *Writer) publishUnsealed() {
	n, b := w.mem.rows, w.mem.bytes
	if w.sealing != nil {
		n += w.sealing.mem.rows
		b += w.sealing.mem.bytes
	}
	w.unsealed.Store(n)
	w.unsealedBytes.Store(b)
	w.opts.Metrics.UnsealedRows.Add(float64(n - w.gaugedUnsealed))
	w.gaugedUnsealed = n
}

// ungauge takes this writer's share out of the gauges: it has stopped.
func (w *Writer) ungauge() {
	w.opts.Metrics.PendingGens.Sub(float64(w.gaugedGens))
	w.opts.Metrics.UnsealedRows.Sub(float64(w.gaugedUnsealed))
	w.gaugedGens, w.gaugedUnsealed = 0, 0
}

// seal writes the memtable as a generation and commits it to the manifest,
// waiting for it (and for any seal in flight first).
func (w *Writer) seal(ctx context.Context, cause string) (bool, error) {
	start := time.Now()
	for w.sealing != nil { // finishing one may start the next (sealNext)
		w.finishSeal(ctx, <-w.sealDone)
	}
	if w.err != nil {
		return false, w.err
	}
	if w.mem.rows == 0 {
		return false, nil
	}
	if w.seg != nil {
		w.seg.forget() // the memtable is sealed into a file of its own
	}
	gen, err := writeGeneration(ctx, w.opts.Store, w.opts.Shard, w.man.NextGeneration, w.genColumns(), w.mem, nil)
	if err != nil {
		if vfs.IsNoSpace(err) {
			w.opts.Metrics.NoSpace.Inc()
		}
		return false, err
	}
	if err := w.commitSeal(ctx, gen, w.nextPos-1); err != nil {
		return false, err
	}
	w.opts.Metrics.Seals.WithLabelValues(cause).Inc()
	w.opts.Metrics.SealSeconds.Observe(since(start))
	w.tailMu.Lock()
	w.mem.release()
	w.mem = memtable{}
	w.tailMu.Unlock()
	w.publishUnsealed()
	return true, nil
}

// commitSeal adds a written generation holding the rows of WAL positions
// up to lastPos to the manifest, then collects those positions.
func (w *Writer) commitSeal(ctx context.Context, gen Generation, lastPos uint64) error {
	if w.err != nil {
		w.sweep.Store(true) // the file will never be committed
		return w.err
	}
	nm := w.man.clone()
	nm.Version++
	nm.NextGeneration++
	prevReplay := nm.ReplayAfter
	nm.ReplayAfter = lastPos
	nm.Generations = append(nm.Generations, gen)
	nm.UpdatedAt = w.opts.Clock.Now().UTC()
	if err := w.commitNext(ctx, nm); err != nil {
		// The generation file stays: the manifest may have landed. If it
		// did not, the file is garbage; a later drop sweeps it.
		w.sweep.Store(true)
		return err
	}
	to := nm.ReplayAfter
	if w.seg != nil {
		to = min(to, w.objectsUpTo)
	}
	w.collect(prevReplay+1, to, nm.Version, nil, 0, nil)
	if n := len(nm.Generations); n >= pendingWarn && n%pendingWarn == 0 {
		w.opts.Logger.Warn("wal: many pending generations; merge this shard", "shard", w.opts.Shard, "pending", n)
	}
	return nil
}

const pendingWarn = 256

// passRowless commits replay_after past the positions after it when the
// memtable is empty: they hold no rows (the claim sealed any it replayed),
// only fence entries. A claim whose replay found nothing else (a store
// restarted while idle) seals nothing, so without this each claim replayed
// the fences of every claim since the store's last seal, one more at each
// restart. It runs as the writer's loop starts, off the claim's path.
// Fence entries are never collected (doc.go, "Garbage collection"), so
// passing them keeps every fence in place.
func (w *Writer) passRowless(ctx context.Context) {
	if w.err != nil || w.mem.rows != 0 || w.nextPos-1 <= w.man.ReplayAfter {
		return
	}
	nm := w.man.clone()
	nm.Version++
	nm.ReplayAfter = w.nextPos - 1
	nm.UpdatedAt = w.opts.Clock.Now().UTC()
	if err := w.commitNext(ctx, nm); err != nil && !errors.Is(err, ErrFenced) {
		// The next seal passes them instead.
		w.opts.Logger.Warn("wal: committing replay_after past fence entries failed", "shard", w.opts.Shard, "err", err)
	}
}

// commitNext commits nm, the manifest version after the writer's, and
// makes it the writer's; a writer that finds the version taken is fenced.
// The log learns its replay_after.
func (w *Writer) commitNext(ctx context.Context, nm *Manifest) error {
	if err := commitManifest(ctx, w.opts.Store, w.opts.Shard, nm); err != nil {
		if errors.Is(err, ErrFenced) {
			return w.fence(err)
		}
		return err
	}
	w.man = nm
	w.publish()
	w.log.sealed(nm.ReplayAfter)
	return nil
}

// memtable holds acknowledged rows not yet sealed.
type memtable struct {
	batches []arrow.RecordBatch
	seq0    []int64 // per batch: the sequence number of its first row (seq.go)
	rows    int64
	bytes   int64
}

func (m *memtable) add(rec arrow.RecordBatch, seq0 int64) {
	rec.Retain()
	m.batches = append(m.batches, rec)
	m.seq0 = append(m.seq0, seq0)
	m.rows += rec.NumRows()
	m.bytes += recordBytes(rec)
}

// prepend puts the rows of an earlier memtable (a failed seal's) in front.
func (m *memtable) prepend(earlier memtable) {
	m.batches = append(earlier.batches, m.batches...)
	m.seq0 = append(earlier.seq0, m.seq0...)
	m.rows += earlier.rows
	m.bytes += earlier.bytes
}

func (m *memtable) full(o *Options) bool {
	return m.rows >= o.MaxMemtableRows || m.bytes >= o.MaxMemtableBytes
}

func (m *memtable) release() {
	for _, b := range m.batches {
		b.Release()
	}
	m.batches, m.seq0, m.rows, m.bytes = nil, nil, 0, 0
}
