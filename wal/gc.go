package wal

import (
	"context"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// keepManifests is how many manifest versions stay behind the latest.
const keepManifests = 16

// collect deletes, in the background, WAL entries [from, to], manifest
// versions older than keepManifests behind version, and the given
// generation files. When sweepUpTo > 0 it also sweeps the generation
// directory (see sweepGenerations), skipping the paths in listed. Failures
// only leave garbage; a failed generation delete schedules a sweep.
func (w *Writer) collect(from, to, version uint64, gens []string, sweepUpTo uint64, listed map[string]bool) {
	store, shard := w.opts.Store, w.opts.Shard
	fences, claims := keepSet(w.man.Fences), keepSet(w.man.Claims)
	w.inBackground(func(ctx context.Context) {
		// Garbage only: a file a crash brings back is found again by the
		// sweeps, so no directory sync is paid for (see objstore.Discard),
		// and all of it goes in one batch (one request on S3 for up to
		// 1000 keys).
		var keys []string
		for p := from; p <= to && p > 0; p++ {
			if !fences[p] {
				keys = append(keys, entryKey(shard, p))
			}
		}
		// Versions at or above the hint stay, so that readers probing up
		// from it never meet a gap.
		if upTo := min(version, w.hinted.Load()); upTo > keepManifests {
			for v := w.manifestsCollected + 1; v <= upTo-keepManifests; v++ {
				if !claims[v] {
					keys = append(keys, manifestKey(shard, v))
				}
			}
			w.manifestsCollected = max(w.manifestsCollected, upTo-keepManifests)
		}
		genKeys := make(map[string]bool, len(gens))
		for _, g := range gens {
			genKeys[shardDir(shard)+g] = true
			keys = append(keys, shardDir(shard)+g)
		}
		clean := true
		for _, k := range objstore.NotDeleted(objstore.DiscardKeys(ctx, store, keys), keys) {
			if genKeys[k] {
				clean = false
			}
		}
		if sweepUpTo > 0 && !sweepGenerations(ctx, store, shard, sweepUpTo, listed) {
			clean = false
		}
		if !clean {
			w.sweep.Store(true)
		}
	})
}

// sweepGenerations deletes the generation files of shard numbered <= upTo
// that listed does not hold: files a crash or a failed delete left behind
// after a merge drained them, and files of seals whose manifest commit
// failed. upTo is a merge watermark, so every committed generation <= upTo
// is in the base table and readers skip it; the others were never visible.
// It reports whether everything went well.
func sweepGenerations(ctx context.Context, store objstore.Store, shard string, upTo uint64, listed map[string]bool) bool {
	dir := shardDir(shard)
	objs, err := store.List(ctx, dir+"gen/")
	if err != nil {
		return false
	}
	var keys []string
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, dir)
		num, _, _ := strings.Cut(path.Base(rel), "-")
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n > upTo || listed[rel] {
			continue
		}
		keys = append(keys, o.Key)
	}
	return objstore.DiscardKeys(ctx, store, keys) == nil
}

// sweepLog deletes, in the background, what a predecessor that crashed
// before its own collection left behind: WAL entries at or below
// replayAfter (sealed; safe to delete by the argument in doc.go), manifest
// versions more than keepManifests behind version,
// and the segment files of earlier epochs (dead once the claim committed
// LogEpoch).
func (w *Writer) sweepLog(replayAfter, version uint64) {
	store, shard, segDir, logFS, epoch, hinted := w.opts.Store, w.opts.Shard, w.segDir, w.logFS, w.epoch, w.hinted.Load()
	fences, claims := keepSet(w.man.Fences), keepSet(w.man.Claims)
	w.inBackground(func(ctx context.Context) {
		var keys []string
		if objs, err := store.List(ctx, shardDir(shard)+"wal/"); err == nil {
			for _, o := range objs {
				num, _, _ := strings.Cut(path.Base(o.Key), ".")
				if p, err := strconv.ParseUint(num, 10, 64); err == nil && p <= replayAfter && !fences[p] {
					keys = append(keys, o.Key)
				}
			}
		}
		if objs, err := store.List(ctx, shardDir(shard)+"manifest/"); err == nil {
			for _, o := range objs {
				if v, ok := parseManifestKey(o.Key); ok && v+keepManifests < min(version, hinted) && !claims[v] {
					keys = append(keys, o.Key)
				}
			}
		}
		_ = objstore.DiscardKeys(ctx, store, keys)
		if segDir != "" {
			sweepSegments(logFS, segDir, epoch)
		}
	})
}

// keepSet returns the set of xs: claim versions and fence positions,
// which collection never deletes.
func keepSet(xs []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// inBackground runs fn off the loop, one collection at a time, with a
// bound on how long it may take; WaitCollect waits for it.
func (w *Writer) inBackground(fn func(ctx context.Context)) {
	w.gcWG.Add(1)
	go func() {
		defer w.gcWG.Done()
		w.gcMu.Lock()
		defer w.gcMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fn(ctx)
	}()
}

// WaitCollect waits for background garbage collection (tests).
func (w *Writer) WaitCollect() { w.gcWG.Wait() }
