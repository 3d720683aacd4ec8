package table

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/objstore"
)

// CompactOptions tunes Compact.
type CompactOptions struct {
	// TargetRows is the live row count a compacted fragment aims for;
	// fragments already this large and without deletions are left alone.
	// Default 1<<20.
	TargetRows int64
	// Config keys to set in the same commit (e.g. a last-compaction mark).
	Config map[string]string
	// KeepDeletions leaves fragments of TargetRows or more alone even when
	// they have deleted rows (only small fragments are rewritten).
	KeepDeletions bool
}

// CompactResult reports what Compact did.
type CompactResult struct {
	Removed, Added           int // fragments
	FilesRemoved, FilesAdded int // data and deletion files
	Dataset                  *Dataset
}

// Compact bin-packs small fragments and fragments with deletions into new
// fragments of about TargetRows live rows, materializing deletions, in one
// Rewrite commit. Commits by others that touch none of the rewritten
// fragments are rebased over; one that changed a rewritten fragment (a new
// deletion, or its removal) makes Compact fail with ErrConflict, and
// nothing changes (the next compaction starts over).
func Compact(ctx context.Context, store objstore.Store, opts CompactOptions) (*CompactResult, error) {
	if opts.TargetRows <= 0 {
		opts.TargetRows = 1 << 20
	}
	d, err := Open(ctx, store)
	if err != nil {
		return nil, err
	}
	var old []*pb.DataFragment
	for _, f := range d.Fragments() {
		if liveRows(f) < opts.TargetRows || (f.GetDeletionFile() != nil && !opts.KeepDeletions) {
			old = append(old, f)
		}
	}
	if len(old) < 2 && !(len(old) == 1 && old[0].GetDeletionFile() != nil) {
		return &CompactResult{Dataset: d}, nil
	}
	var (
		added []*pb.DataFragment
		fw    *FragmentWriter
	)
	abort := func() {
		if fw != nil {
			_ = fw.Abort()
		}
	}
	for _, f := range old {
		view := *d
		view.manifest = &pb.Manifest{Fragments: []*pb.DataFragment{f}}
		// Plain: a dictionary column's values are re-encoded per page by the
		// writer, with no bound on the distinct values of one batch.
		err := view.Scan(ctx, ScanOptions{PlainDictionaries: true}, func(rec arrow.RecordBatch) error {
			if fw == nil {
				var err error
				if fw, err = NewFragmentWriter(ctx, store, d.schema, rec.Schema(), file.WriterOptions{}); err != nil {
					return err
				}
			}
			if err := fw.Write(rec); err != nil {
				return err
			}
			if fw.Rows() >= opts.TargetRows {
				nf, err := fw.Finish()
				fw = nil
				if err != nil {
					return err
				}
				added = append(added, nf)
			}
			return nil
		})
		if err != nil {
			abort()
			return nil, fmt.Errorf("lance/table: compact fragment %d: %w", f.GetId(), err)
		}
	}
	if fw != nil && fw.Rows() > 0 {
		nf, err := fw.Finish()
		if err != nil {
			return nil, err
		}
		added = append(added, nf)
	} else {
		abort()
	}
	removed := make([]uint64, len(old))
	for i, f := range old {
		removed[i] = f.GetId()
	}
	nd, err := Commit(ctx, store, func(_ context.Context, latest *Dataset) (*Change, error) {
		cur := map[uint64]*pb.DataFragment{}
		for _, f := range latest.Fragments() {
			cur[f.GetId()] = f
		}
		for _, f := range old {
			if c, ok := cur[f.GetId()]; !ok || !proto.Equal(c.GetDeletionFile(), f.GetDeletionFile()) {
				return nil, fmt.Errorf("%w: fragment %d changed during compaction", ErrConflict, f.GetId())
			}
		}
		return &Change{Kind: KindRewrite, New: added, Removed: removed, ConfigUpsert: opts.Config}, nil
	})
	if err != nil {
		return nil, err
	}
	res := &CompactResult{Removed: len(old), Added: len(added), Dataset: nd}
	for _, f := range old {
		res.FilesRemoved += len(f.GetFiles())
		if f.GetDeletionFile() != nil {
			res.FilesRemoved++
		}
	}
	for _, f := range added {
		res.FilesAdded += len(f.GetFiles())
	}
	return res, nil
}
