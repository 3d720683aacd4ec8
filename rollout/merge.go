package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/wal"
)

// MergeResult reports one merge pass.
type MergeResult = api.MergeResult

// errStale means the base already holds this merge (a crashed earlier pass
// committed it); only the drain is left.
var errStale = errors.New("rollout: merge already committed")

// Merge seals this process's buffered rows and folds the oldest pending
// generations of its shard into the base table (one capped pass).
func (s *Store) Merge(ctx context.Context) (*MergeResult, error) {
	w, err := s.walWriter(ctx)
	if err != nil {
		return nil, err
	}
	if err := w.Seal(ctx); err != nil {
		s.forgetDead(w, err)
		return nil, s.noteSpace(err)
	}
	res, err := s.mergeWith(ctx, w)
	return res, s.noteSpace(err)
}

// MergeShard merges another shard whose owner is gone: it claims the shard
// (fencing any stalled owner by epoch), replays and seals its WAL, merges
// one pass, and releases it.
func (s *Store) MergeShard(ctx context.Context, shard string) (*MergeResult, error) {
	if shard == s.shard {
		return s.Merge(ctx)
	}
	w, err := wal.Claim(ctx, wal.Options{
		Store: s.root, Shard: shard, Schema: Schema, KeyColumn: ColID, SeqColumn: ColSeq, Conform: conform,
		Logger: s.opts.Logger.With("store", s.name, "orphan_merge", true), Metrics: s.opts.metrics.wal,
		Log: s.log,
		// Marked a merge: the shard's owner takes it back when it writes.
		Owner: s.owner(true),
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Close(context.WithoutCancel(ctx)) }()
	return s.mergeWith(ctx, w)
}

func (s *Store) mergeWith(ctx context.Context, w *wal.Writer) (*MergeResult, error) {
	// Whatever it committed (base, drain, indexes) ends snapshot reuse.
	defer s.noteCommit()
	res, err := s.mergePass(ctx, w)
	if err != nil {
		s.opts.metrics.ops.mergeFailures.Inc()
	}
	return res, err
}

func (s *Store) mergePass(ctx context.Context, w *wal.Writer) (*MergeResult, error) {
	s.mergeMu.Lock()
	defer s.mergeMu.Unlock()
	start := time.Now()
	shard := w.Manifest()
	id := w.ShardID()
	// The pass's one table open: the watermark, the schema of the new
	// fragment and the first commit attempt all use this version.
	base, err := table.Open(ctx, s.root)
	if err != nil {
		return nil, err
	}
	wm := Watermark(base, id)
	res := &MergeResult{Shard: id, Watermark: wm, BaseVersion: base.Version()}
	pending := shard.Pending(wm)
	// Reconcile: generations the base already holds (a crash after the base
	// commit) are only drained. With nothing to merge, the drop still runs:
	// it sweeps generation files that a crash or a failed delete left behind.
	if wm > 0 && (len(pending) == 0 || shard.Generations[0].Generation <= wm) {
		if err := w.DropGenerations(ctx, wm); err != nil {
			return nil, err
		}
	}
	if len(pending) == 0 {
		return res, nil
	}
	if !s.evolved.Load() {
		// The store's first merge adds Schema's new columns to an older
		// base (a commit), and goes on from the evolved version.
		if err := s.evolve(ctx); err != nil {
			return nil, err
		}
		if base, err = table.Open(ctx, s.root); err != nil {
			return nil, err
		}
	}
	pick := s.pickGenerations(pending)
	res.Generations = len(pick)
	res.Remaining = len(pending) - len(pick)
	target := pick[len(pick)-1].Generation

	frag, ids, rows, err := s.writeMerged(ctx, base, id, pick)
	if err != nil {
		return nil, err
	}
	res.Rows = rows
	change := func(ctx context.Context, latest *table.Dataset) (*table.Change, error) {
		if Watermark(latest, id) >= target {
			return nil, errStale
		}
		// Newest wins: base rows with the ids being merged are deleted in
		// the same commit (a retried append, merged earlier).
		var addrs []table.RowAddr
		err := latest.Scan(ctx, table.ScanOptions{Columns: []string{ColID}, In: []table.In{{Column: ColID, Values: ids}}, WithRowAddr: true, Index: s.finder()}, func(b arrow.RecordBatch) error {
			a := b.Column(1).(*array.Uint64)
			for i := 0; i < a.Len(); i++ {
				addrs = append(addrs, table.RowAddr{Fragment: a.Value(i) >> 32, Offset: uint32(a.Value(i))})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		res.Replaced = int64(len(addrs))
		updated, removed, err := latest.PlanDeletes(ctx, addrs)
		if err != nil {
			return nil, err
		}
		var add []*pb.DataFragment
		if frag != nil {
			add = []*pb.DataFragment{frag}
		}
		return &table.Change{Kind: table.KindUpdate, New: add, Updated: updated, Removed: removed,
			ConfigUpsert: map[string]string{watermarkKey(id): strconv.FormatUint(target, 10)}}, nil
	}
	// The first attempt's change, with the index segments over the new
	// fragment built against the version it makes: data and index in one
	// commit. A commit that lands on another version (another writer went
	// first: the fragment's id, which the index's row addresses hold,
	// changes) goes without them, and the index follows in a commit of its
	// own, as it did before. Lance allows it so far: a transaction has one
	// operation (Transaction.operation is a oneof in Lance's
	// protos/transaction.proto, and Update has no index fields), so the
	// transaction records the Update, while the manifest's index section,
	// which readers and Lance's own commits carry as they find it, holds
	// the new segments (LanceDB 0.31 uses them:
	// TestLanceDBUsesRolloutStoreIndexes).
	first, firstErr := change(ctx, base)
	var idx *index.Prepared
	if firstErr == nil && frag != nil {
		idx = s.prepareIndexes(ctx, base, first)
	}
	withIndex := false
	nd, err := table.CommitFrom(ctx, s.root, base, func(ctx context.Context, latest *table.Dataset) (*table.Change, error) {
		if latest != base {
			withIndex = false
			return change(ctx, latest)
		}
		if firstErr != nil {
			return nil, firstErr
		}
		ch := *first
		if idx != nil {
			ch.IndexAdd, ch.IndexRemove, withIndex = idx.Add, idx.Remove, true
		}
		return &ch, nil
	})
	if idx != nil && !withIndex && (err == nil || errors.Is(err, errStale) || errors.Is(err, table.ErrConflict)) {
		// Built for a version that was not committed with them (on another
		// commit error the manifest may hold them: they stay).
		idx.Discard(context.WithoutCancel(ctx), base)
	}
	switch {
	case errors.Is(err, errStale):
		res.Rows, res.Replaced = 0, 0
	case err != nil:
		return nil, fmt.Errorf("rollout: merge commit: %w", err)
	default:
		res.BaseVersion = nd.Version()
		s.sawVersion(nd.Version())
		if withIndex {
			s.warmMerged(base, nd) // before the readers meet the new segment
		}
	}
	res.Watermark = target
	// Only after the base commit: drop the generations, then their files.
	if err := w.DropGenerations(ctx, target); err != nil {
		return res, fmt.Errorf("rollout: merged, but draining the shard failed (the next merge finishes it): %w", err)
	}
	if res.Rows > 0 && !withIndex {
		s.indexAfter(ctx, "merge", true)
	}
	s.opts.metrics.ops.merged(start, res)
	s.opts.Logger.Info("rollout: merged", "store", s.name, "shard", id, "generations", res.Generations, "rows", res.Rows, "replaced", res.Replaced, "watermark", target, "remaining", res.Remaining)
	return res, nil
}

// prepareIndexes builds the index segments of every indexed column over
// the version that ch on base makes (table.Dataset.Apply): the new
// fragment, with the id the commit gives it when base is still the
// latest. nil when there is nothing to index or the build failed (the
// merge then indexes after its commit, as an index commit of its own).
func (s *Store) prepareIndexes(ctx context.Context, base *table.Dataset, ch *table.Change) *index.Prepared {
	var cols []string
	for _, col := range s.indexColumns() {
		if base.Schema().Field(col) != nil {
			cols = append(cols, col)
		}
	}
	if len(cols) == 0 {
		return nil
	}
	next, err := base.Apply(ch)
	if err != nil {
		return nil
	}
	// The build reads base's fragments too (a consolidation of segments).
	defer s.hold(base.Version())()
	p, err := index.PrepareColumns(ctx, next, cols, index.BuildOptions{Delta: true, MaxSegments: s.opts.IndexMaxSegments, TempDir: s.opts.IndexTempDir, BatchSize: indexBatchSize, KeyColumns: []string{ColID}, Cache: s.opts.IndexCache})
	if err != nil {
		s.opts.Logger.Warn("rollout: index of a merge's fragment failed; indexing after the commit", "store", s.name, "err", err)
		return nil
	}
	if len(p.Add) == 0 {
		return nil
	}
	return p
}

// DefaultMergeMaxGenerations caps the generations of a merge pass. A pass
// streams its generations one at a time, so the byte cap (MergeMaxBytes)
// is what bounds it; this cap only keeps one pass's manifest drain and id
// set finite when generations are tiny.
const DefaultMergeMaxGenerations = 1024

// pickGenerations takes the oldest generations up to the caps; the one that
// crosses the byte cap is included (a generation is never split).
func (s *Store) pickGenerations(pending []wal.Generation) []wal.Generation {
	var bytes int64
	for i, g := range pending {
		bytes += g.Bytes
		n := i + 1
		if (s.opts.MergeMaxGenerations > 0 && n >= s.opts.MergeMaxGenerations) || (s.opts.MergeMaxBytes > 0 && bytes >= s.opts.MergeMaxBytes) {
			return pending[:n]
		}
	}
	return pending
}

// writeMerged writes the newest row of every id in gens as one base data
// file (a table of base's schema) and returns it with the set of its ids.
// Each generation is read once, whole, newest first (wal.StreamNewest), and
// its winning rows go straight into the file: memory holds the generations
// read ahead and the id set, not the pass. So the file holds the newest
// generation's rows first.
func (s *Store) writeMerged(ctx context.Context, base *table.Dataset, shard string, gens []wal.Generation) (*pb.DataFragment, map[string]struct{}, int64, error) {
	refs := make([]wal.GenRef, len(gens))
	for i, g := range gens {
		refs[i] = wal.GenRef{Shard: shard, Gen: g}
	}
	names := schemaNames()
	key := ShardKey(shard)
	load := func(ctx context.Context, ref wal.GenRef) (*wal.LoadedGeneration, error) {
		return wal.LoadGeneration(ctx, s.root, ref, wal.ReadOptions{
			KeyColumn: ColID, Whole: true, NoIndex: true,
			Project: func(rec arrow.RecordBatch) (arrow.RecordBatch, error) { return project(rec, names) },
		})
	}
	var fw *table.FragmentWriter
	var rows int64
	ids, err := wal.StreamNewest(ctx, refs, load, func(g *wal.LoadedGeneration, keep []bool) error {
		defer g.Rec.Release()
		out := g.Rec
		if keep != nil {
			mb := array.NewBooleanBuilder(memory.DefaultAllocator)
			mb.AppendValues(keep, nil)
			mask := mb.NewArray()
			mb.Release()
			var err error
			out, err = compute.FilterRecordBatch(ctx, g.Rec, mask, compute.DefaultFilterOptions())
			mask.Release()
			if err != nil {
				return err
			}
			defer out.Release()
		}
		if out.NumRows() == 0 {
			return nil
		}
		stamped, err := stampShard(out, key)
		if err != nil {
			return err
		}
		defer stamped.Release()
		out = stamped
		if fw == nil {
			var err error
			if fw, err = table.NewFragmentWriter(ctx, s.root, base.Schema(), Schema, file.WriterOptions{}); err != nil {
				return err
			}
		}
		rows += out.NumRows()
		return fw.Write(out)
	})
	if err != nil {
		if fw != nil {
			_ = fw.Abort()
		}
		return nil, nil, 0, err
	}
	if fw == nil {
		return nil, ids, 0, nil
	}
	frag, err := fw.Finish()
	return frag, ids, rows, err
}

func schemaNames() []string {
	out := make([]string, len(Schema.Fields()))
	for i, f := range Schema.Fields() {
		out[i] = f.Name
	}
	return out
}

// CompactOptions tunes one compaction; zero values take the store's
// defaults.
type CompactOptions struct {
	TargetRows    int64 // rows per compacted fragment; default Options.CompactTargetRows
	KeepDeletions bool  // leave large fragments with deletions alone
}

// CompactResult reports a compaction.
type CompactResult = table.CompactResult

// Compact bin-packs small base fragments and materializes deletions. One
// compaction runs at a time per store and process; another call meanwhile
// fails with ErrCompacting.
func (s *Store) Compact(ctx context.Context, o CompactOptions) (*CompactResult, error) {
	if !s.compactMu.TryLock() {
		return nil, fmt.Errorf("%w: store %s", ErrCompacting, s.name)
	}
	defer s.compactMu.Unlock()
	defer s.noteCommit() // ends snapshot reuse (snapshot.go)
	start := time.Now()
	if o.TargetRows <= 0 {
		o.TargetRows = s.opts.CompactTargetRows
	}
	if err := s.evolve(ctx); err != nil {
		return nil, err
	}
	// The compaction reads the latest version's fragments, which a newer
	// version can drop before it commits: keep them from cleanup.
	defer s.hold(s.Version())()
	res, err := table.Compact(ctx, s.root, table.CompactOptions{
		TargetRows:    o.TargetRows,
		KeepDeletions: o.KeepDeletions,
		Config:        map[string]string{lastCompactionKey: time.Now().UTC().Format(time.RFC3339Nano)},
	})
	s.cmu.Lock()
	if err != nil {
		s.opts.metrics.ops.compactFailures.Inc()
		msg := err.Error()
		s.compactErr = &msg
		s.cmu.Unlock()
		return nil, err
	}
	s.compactErr = nil
	if res.Removed > 0 {
		s.compactions++
	}
	s.cmu.Unlock()
	s.sawVersion(res.Dataset.Version())
	if res.Removed > 0 {
		// Rebuild the indexes over the rewritten fragments (the commit
		// already stopped them claiming the removed ones).
		s.indexAfter(ctx, "compaction", false)
		s.opts.metrics.ops.compacted(start, res)
	}
	return res, nil
}

// compacting reports whether a compaction of the store runs here now.
func (s *Store) compacting() bool {
	if !s.compactMu.TryLock() {
		return true
	}
	s.compactMu.Unlock()
	return false
}

// CompactionStats reports this process's compactions of the store.
func (s *Store) CompactionStats(ctx context.Context) (*api.CompactStatsResponse, error) {
	running := s.compacting()
	snap, err := s.snapshotLimit(ctx, false, 0, readPlan{})
	if err != nil {
		return nil, err
	}
	out := &api.CompactStatsResponse{TotalFragments: len(snap.base.Fragments()), IsCompacting: running}
	if t, err := time.Parse(time.RFC3339Nano, snap.base.Config()[lastCompactionKey]); err == nil {
		out.LastCompaction = &t
	}
	s.cmu.Lock()
	out.LastError, out.TotalCompactions = s.compactErr, s.compactions
	s.cmu.Unlock()
	return out, nil
}
