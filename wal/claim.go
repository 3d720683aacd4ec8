package wal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/lance-context/lance-context/vfs"
)

// Claim takes ownership of a shard: it writes a manifest version with a new
// epoch (fencing any previous writer), replays the WAL after the replay
// position, seals what it replayed, and starts the writer.
func Claim(ctx context.Context, opts Options) (*Writer, error) {
	opts.setDefaults()
	// The shard's registration goes out beside the manifest's read. A new
	// shard's lands before its first manifest, so that every shard with a
	// manifest is listed; an existing one's (it heals a missing marker)
	// before the claim's seal.
	registered := make(chan error, 1)
	go func() { registered <- opts.Store.Put(ctx, shardsDir+opts.Shard, nil) }()
	regWaited := false
	waitRegistered := func() error {
		if regWaited {
			return nil
		}
		regWaited = true
		if err := <-registered; err != nil {
			return fmt.Errorf("wal: register shard %s: %w", opts.Shard, err)
		}
		return nil
	}
	var known *Manifest
	if opts.Holder != nil {
		known = opts.Holder.manifest
	}
	var nm *Manifest
	for attempt := 0; ; attempt++ {
		m, err := known, error(nil)
		if known = nil; m == nil {
			m, err = loadListedManifest(ctx, opts.Store, opts.Shard)
		}
		if errors.Is(err, ErrNoShard) {
			m, err = &Manifest{NextGeneration: 1}, nil
			if rerr := waitRegistered(); rerr != nil {
				return nil, rerr
			}
		}
		if err != nil {
			return nil, err
		}
		nm = m.clone()
		nm.Version++
		nm.Epoch++
		// A claim version is never collected: it is the version a writer
		// deposed by this claim finds in its fence check (doc.go).
		nm.Claims = append(nm.Claims, nm.Version)
		nm.Owner = nil
		if opts.Owner != nil {
			o := *opts.Owner
			nm.Owner = &o
		}
		nm.UpdatedAt = opts.Clock.Now().UTC()
		err = commitManifest(ctx, opts.Store, opts.Shard, nm)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrFenced) || attempt >= 20 {
			return nil, fmt.Errorf("wal: claim shard %s: %w", opts.Shard, err)
		}
	}
	w := &Writer{
		opts: opts, epoch: nm.Epoch, man: nm, nextPos: nm.ReplayAfter + 1,
		ops: make(chan *op, 1024), stop: make(chan struct{}), done: make(chan struct{}),
		sealDone: make(chan sealResult, 1), hintKick: make(chan struct{}, 1),
	}
	w.log = objectLog{w} // until a segment log starts
	// The hint and the first heartbeat go out beside the replay (side),
	// which does not read them; they land before the claim's seal.
	var side sync.WaitGroup
	side.Go(func() {
		if writeHint(ctx, opts.Store, opts.Shard, nm.Version) == nil {
			w.hinted.Store(nm.Version)
		}
	})
	w.manifestsCollected = nm.Version
	w.sweep.Store(true)
	// From the claim on the heartbeat says this owner is alive, through a
	// replay that may take long; a claim that fails releases it.
	w.startHeartbeat(ctx, &side)
	started := false
	defer func() {
		if !started {
			if w.hb != nil {
				w.hb.release.Store(true)
			}
			w.stopHeartbeat()
			w.ungauge()
		}
	}()
	defer side.Wait() // before the deferred release above, on a failure
	w.publish()
	w.segDir, w.logFS = logPlace(&opts)
	if err := w.replay(ctx); err != nil {
		w.mem.release()
		return nil, err
	}
	if w.segDir == "" && nm.Epoch > 1 {
		// The object log: fence the deposed writer at its next position
		// (the first epoch has no one to fence).
		if err := w.putFence(ctx); err != nil {
			w.mem.release()
			return nil, fmt.Errorf("wal: claim shard %s: fence entry: %w", opts.Shard, err)
		}
	}
	side.Wait()
	if err := waitRegistered(); err != nil {
		w.mem.release()
		return nil, err
	}
	if _, err := w.seal(ctx, SealClaim); err != nil {
		w.mem.release()
		return nil, err
	}
	if w.segDir != "" {
		// Everything in older epochs' segments that anyone acknowledged is
		// now sealed: from here on only this epoch's segments are the log.
		if err := w.commitLogEpoch(ctx); err != nil {
			return nil, err
		}
		if !opts.ObjectLog {
			size := opts.SegmentBytes
			_, canLink := w.logFS.(linker)
			inPlace := opts.Log.Objects && canLink
			if inPlace && size <= 0 {
				// Room for a full memtable's frames, which are about its
				// in-memory bytes: the segment becomes its generation.
				size = opts.MaxMemtableBytes + opts.MaxMemtableBytes/4
			}
			w.seg = newSegmentLog(w.logFS, w.segDir, opts.Shard, w.epoch, size)
			w.seg.metrics = opts.Metrics
			w.seg.buffered = opts.BufferedLog
			if inPlace {
				w.seg.genRoot = opts.Log.Dir
				w.seg.placeMin, w.seg.minInPlace = opts.placeMin, opts.minInPlace
			}
			w.log = w.seg
			if err := w.seg.start(); err != nil {
				return nil, err
			}
		}
	}
	opts.Logger.Info("wal: shard claimed", "shard", opts.Shard, "epoch", w.epoch, "manifest_version", w.man.Version, "next_position", w.nextPos)
	w.sweepLog(w.man.ReplayAfter, w.man.Version)
	started = true
	go w.loop()
	return w, nil
}

// Log is where a writer keeps its shard's segment log: under Dir on FS,
// in Dir/_lc_wal/{shard}/log, one directory per shard. The zero Log keeps
// none: every entry is an object in the store (the log of object stores).
// As with pebble's wal.Dir, the caller decides: rollout's catalog puts it
// beside a store's data when the data directory is on local disk, and
// tests put it on a crash-simulating vfs.MemFS.
type Log struct {
	FS  vfs.FS
	Dir string
	// Objects says the store's objects are the files under Dir on FS
	// (rollout's WALLog: the log beside a store's data on local disk). A
	// full memtable is then sealed in place: its segment becomes the
	// generation's file (doc.go, "Seal in place").
	Objects bool
}

// segmentDir returns the directory of shard's segment log on l.FS, or ""
// for none.
func (l Log) segmentDir(shard string) string {
	if l.FS == nil {
		return ""
	}
	return filepath.Join(l.Dir, filepath.FromSlash(segmentDir(shard)))
}

// logPlace returns where the shard's segment log lives: its directory
// ("" for none) and file system.
func logPlace(o *Options) (string, vfs.FS) {
	return o.Log.segmentDir(o.Shard), o.Log.FS
}

// replay reads entries after the replay position into the memtable,
// sealing whenever it fills: object entries first, then, on a local
// filesystem, the frames of the segments of epochs from the manifest's
// LogEpoch on.
func (w *Writer) replay(ctx context.Context) error {
	shard := w.opts.Shard
	var err error
	w.nextPos, err = replayObjects(ctx, w.opts.Store, shard, w.nextPos, func(pos uint64, b []byte) error {
		return w.adoptReplayed(ctx, b)
	})
	if err != nil {
		return w.replayFailed(err)
	}
	w.objectsUpTo = w.nextPos - 1
	if w.segDir == "" {
		return nil
	}
	segs, err := listSegments(w.logFS, w.segDir, w.man.LogEpoch)
	if err != nil {
		return err
	}
	_, err = replaySegments(w.logFS, shard, segs, w.nextPos, func(seg string, off int64, pos uint64, payload []byte) error {
		return placeCorruption(w.adoptReplayed(ctx, payload), seg, off)
	})
	if err != nil {
		return w.replayFailed(fmt.Errorf("wal: replay shard %s: %w", shard, err))
	}
	return nil
}

// replayFailed logs and counts a corrupt log (see CorruptionError) and
// returns err.
func (w *Writer) replayFailed(err error) error {
	var c *CorruptionError
	if errors.As(err, &c) {
		w.opts.Metrics.ReplayCorrupt.Inc()
		w.opts.Logger.Error("wal: log corrupt; the shard is refused until it is repaired", "shard", c.Shard,
			"segment", c.Segment, "offset", c.Offset, "position", c.Position, "next_valid", c.Next, "reason", c.Reason)
	}
	return err
}

func (w *Writer) adoptReplayed(ctx context.Context, b []byte) error {
	if err := w.adopt(b); err != nil {
		return err
	}
	if w.mem.full(&w.opts) {
		if _, err := w.seal(ctx, SealFull); err != nil {
			return err
		}
	}
	return nil
}

// commitLogEpoch records in the manifest that segments of epochs below
// this writer's are dead (see doc.go, "Segment log").
func (w *Writer) commitLogEpoch(ctx context.Context) error {
	if w.man.LogEpoch == w.epoch {
		return nil
	}
	nm := w.man.clone()
	nm.Version++
	nm.LogEpoch = w.epoch
	nm.UpdatedAt = w.opts.Clock.Now().UTC()
	if err := commitManifest(ctx, w.opts.Store, w.opts.Shard, nm); err != nil {
		return fmt.Errorf("wal: claim shard %s: %w", w.opts.Shard, err)
	}
	w.man = nm
	w.publish()
	return nil
}

// putFence puts this claim's fence entry, an entry without rows, at the
// first free position of the object log, and records it in the manifest
// (kept from collection from the next commit on). A deposed writer whose
// next put lands on it finds an entry of a newer epoch and stops; one
// whose put landed first is adopted (see doc.go, "Fencing").
func (w *Writer) putFence(ctx context.Context) error {
	set := make([]byte, w.opts.Schema.NumFields())
	for i := range set {
		set[i] = 1
	}
	f, err := w.format(columnSet(set))
	if err != nil {
		return err
	}
	if err := w.putEntry(ctx, f.header, nil); err != nil {
		return err
	}
	w.man.Fences = append(w.man.Fences, w.nextPos)
	w.nextPos++
	return nil
}

// adopt adds the entry at nextPos (already durable) to the memtable. An
// entry without batches is a claim's fence: its position is recorded so
// that it is never collected.
func (w *Writer) adopt(b []byte) error {
	e, err := checkEntry(w.opts.Shard, w.nextPos, b)
	if err != nil {
		return err
	}
	defer e.release()
	if len(e.batches) == 0 && !slices.Contains(w.man.Fences, w.nextPos) {
		w.man.Fences = append(w.man.Fences, w.nextPos)
	}
	var row int64
	for _, rec := range e.batches {
		c, ok := widen(rec, w.opts.Schema)
		if !ok {
			c, err = w.opts.Conform(rec)
		}
		if err != nil {
			return fmt.Errorf("wal: shard %s position %d: %w", w.opts.Shard, w.nextPos, err)
		}
		w.tailMu.Lock()
		w.mem.add(c, Seq(w.nextPos, row))
		w.tailMu.Unlock()
		row += c.NumRows()
		w.opts.Metrics.AdoptedRows.Add(float64(c.NumRows()))
		c.Release()
	}
	w.nextPos++
	w.publishUnsealed()
	return nil
}
