package rollout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lance-context/lance-context/internal/bgwork"
	"github.com/lance-context/lance-context/internal/multierr"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// warmColumns are the indexes Warm prewarms: the ones the point reads look
// up (gets and pages id, trajectories rollout_id). A filtered page's other
// index is left to the first read that uses it, as openBase leaves it.
var warmColumns = []string{ColID, ColRolloutID}

// warmMaxFragments bounds the fragments whose files Warm opens and reads
// ahead (the newest first): a table left uncompacted can have thousands,
// and the metadata cache would only churn.
const warmMaxFragments = 256

// WarmStats says what a Warm read ahead.
type WarmStats struct {
	BaseVersion uint64        // the base table version warmed
	Fragments   int           // fragments whose data files were opened and read ahead
	Indexes     []string      // columns whose indexes were opened and prewarmed
	Generations int           // pending generations decoded into the generation cache
	Elapsed     time.Duration // how long it took
}

// Warm reads ahead, into the caches reads use and within their budgets,
// what this process's reads of the store need first, so that a worker
// that has just started serves its first reads as it serves them after
// thousands: the latest base version and the shard manifests (a snapshot),
// the newest fragments' data files (footers, column metadata, deletion
// files, and the offsets buffers point reads of each column need, started
// by reading a row every warmStride rows of each), the pages of the id and
// rollout_id indexes (as far as the index cache's prewarm share allows:
// lance/index's prewarm), and the pending generations (newest first, as
// many as the generation cache holds). Without it those came in with the
// reads themselves: on a 10M-row store the first 1,000 gets over HTTP
// took ~1.3 ms at p50 and ~50 ms at p99 where later ones took 0.7 and 4.
//
// It returns once all of it is in (the index prewarms and the offsets
// reads it started included), or when ctx ends. An error leaves the rest
// to the reads, which load what they need as they would without it.
func (s *Store) Warm(ctx context.Context) (WarmStats, error) {
	return s.warm(ctx, true)
}

// WarmOpen is the part of Warm that opens what every read needs first
// (snapshot, data files' metadata and deletion files, the indexes' lookup
// tables and pending generations) without reading the data ahead (the
// offsets buffers and index pages). Its download is bounded by the
// store's metadata, not its rows: on S3 a 10M-row store's whole warm
// downloaded 584 MB, its open part a few MB. A Warm after it reads only
// what it left.
func (s *Store) WarmOpen(ctx context.Context) (WarmStats, error) {
	return s.warm(ctx, false)
}

// Local reports whether the store's objects are files on this machine,
// where reading its data ahead costs page-cache reads, not a download.
func (s *Store) Local() bool { return local(s.root) }

// Local reports whether the catalog's stores are on a local file system.
func (c *Catalog) Local() bool { return local(c.root) }

func local(root objstore.Store) bool {
	_, ok := objstore.LocalPath(root, "_versions")
	return ok
}

func (s *Store) warm(ctx context.Context, deep bool) (WarmStats, error) {
	start := time.Now()
	var st WarmStats
	cols := s.warmIndexes()
	snap, err := s.snapshot(ctx, true, readPlan{files: true, indexes: cols, fresh: true})
	if err != nil {
		return st, fmt.Errorf("rollout: warm store %s: %w", s.name, err)
	}
	base := snap.base
	st.BaseVersion = base.Version()
	var (
		wg                      sync.WaitGroup
		filesErr, genErr, ixErr error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		st.Fragments, filesErr = s.warmFiles(ctx, base, deep)
	}()
	go func() {
		defer wg.Done()
		st.Generations, genErr = s.warmPending(ctx, snap)
	}()
	if f := s.opts.Indexes; deep && s.finder() != nil && len(cols) > 0 {
		// After the files: the prewarm reads one index at a time at half a
		// CPU, and the files are what every read needs first.
		wg.Wait()
		ixErr = f.Prewarm(ctx, base, cols...)
		st.Indexes = cols
	}
	wg.Wait()
	st.Elapsed = time.Since(start)
	if err := multierr.Join(filesErr, genErr, ixErr); err != nil {
		return st, fmt.Errorf("rollout: warm store %s: %w", s.name, err)
	}
	return st, nil
}

// warmIndexes are the columns of warmColumns this store indexes.
func (s *Store) warmIndexes() []string {
	var cols []string
	for _, c := range warmColumns {
		if slices.Contains(s.indexColumns(), c) {
			cols = append(cols, c)
		}
	}
	return cols
}

// warmFiles opens the data files of base's newest fragments (up to
// warmMaxFragments) and reads their deletion files, then, with deep, reads
// a row every warmStride rows of each with the columns a get returns:
// those point reads are what start lance/file's background reads of the
// offsets buffers a point read needs (each small buffer of a column once
// one of them is read, each large one, of a page of more than 131,072
// rows, when a row of its page is read), which later reads then find
// cached. It waits for those reads.
func (s *Store) warmFiles(ctx context.Context, base *table.Dataset, deep bool) (int, error) {
	base.WarmFiles(ctx, warmMaxFragments)
	frags := base.Fragments()
	frags = frags[len(frags)-min(warmMaxFragments, len(frags)):]
	var addrs []table.RowAddr
	for _, f := range frags {
		del, err := base.DeletedRows(ctx, f.GetId())
		if err != nil {
			return 0, err
		}
		n := f.GetPhysicalRows()
		if !deep {
			continue
		}
		for at := uint64(0); at < n; at += warmStride {
			// A live row at or after at: a deleted one may be in no
			// version's reads.
			for off := at; off < min(at+warmStride, n); off++ {
				if del == nil || !del.Contains(uint32(off)) {
					addrs = append(addrs, table.RowAddr{Fragment: f.GetId(), Offset: uint32(off)})
					break
				}
			}
		}
	}
	// A fragment at a time: one take of every fragment's rows had
	// hundreds of reads in flight at once, and on S3 a worker's first gets
	// after readiness (WarmOpen) waited behind them for 0.6 to 1.2 s.
	cols := baseColumns(base, listColumns)
	for len(addrs) > 0 {
		n := 1
		for n < len(addrs) && addrs[n].Fragment == addrs[0].Fragment {
			n++
		}
		rec, err := base.TakeRows(ctx, addrs[:n], cols)
		if err != nil {
			return 0, err
		}
		rec.Release()
		addrs = addrs[n:]
	}
	if err := waitFileReads(ctx); err != nil {
		return 0, err
	}
	return len(frags), nil
}

// warmStride is the rows between two rows warmFiles reads in a fragment:
// half the rows of the smallest page whose offsets buffer lance/file reads
// apart from its column's others (1 MiB of offsets, 131,072 rows), so
// that a row of every such page is read.
const warmStride = 1 << 16

// waitFileReads waits for lance/file's background offsets reads.
var waitFileReads = file.WaitPrefetches

// warmPending decodes the snapshot's pending generations into the
// generation cache, newest first, as many as its budget holds (by their
// file sizes: the decoded columns are smaller, the payload left out).
func (s *Store) warmPending(ctx context.Context, snap *snapshot) (int, error) {
	refs := snap.pendingRefs()
	if len(refs) == 0 || s.pendingCached(snap) {
		return 0, nil
	}
	refs = wal.NewestFirst(refs)
	var budget int64
	n := 0
	for ; n < len(refs); n++ {
		if budget += refs[n].Gen.Bytes; budget > s.opts.Cache.max {
			break
		}
	}
	refs = refs[:n]
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, pendingReads)
	// Oldest of them first: the cache drops its least recently used, so
	// the newest, which reads ask first, are the last it would drop.
	for i := len(refs) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = s.opts.Cache.get(ctx, s.root, refs[i])
		}()
	}
	wg.Wait()
	return len(refs), multierr.Join(errs...)
}

// warmMerged carries this process's warm state of the store over a merge
// that made next from prev, in the background and off the merge's answer:
// the new fragment's data file, and the index segments next holds (the
// new segment, or a consolidated one) for each column whose indexes this
// process's reads had prewarmed (index.Finder.PrewarmNext; a process that
// only merges prewarms nothing).
func (s *Store) warmMerged(prev, next *table.Dataset) {
	f := s.opts.Indexes
	cols := s.warmIndexes()
	if s.finder() == nil || len(cols) == 0 {
		return
	}
	mergeWarms.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), warmMergedTimeout)
		defer cancel()
		f.PrewarmNext(ctx, prev, next, cols...)
		next.WarmFiles(ctx, 1)
	})
}

// mergeWarms counts warmMerged's background work (tests wait for it).
var mergeWarms bgwork.Group

// warmMergedTimeout bounds warmMerged's opens (the prewarms have their
// own bound).
const warmMergedTimeout = time.Minute
