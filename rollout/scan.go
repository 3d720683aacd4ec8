package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// ScanColumns are the columns Scan can return: every column of Schema but
// the payload, which is read by id only (Blob).
func ScanColumns() []string { return slices.Clone(listColumns) }

// ScanOptions selects the rows and columns of a Scan.
type ScanOptions struct {
	Source    Source   // "" means SourceFragments
	Columns   []string // from ScanColumns, in any order; empty means every one
	BatchRows int      // rows per batch read from the base table; default 8192
	// Version, when not 0, reads that base version alone (as a checkout
	// of it does).
	Version uint64
}

// Scan streams every row of the chosen tier to fn, in the order List
// documents (wal rows first, newest write per id, then base rows whose id
// has no pending write), with exactly the requested columns in the
// requested order and Schema's types. A column a store's files lack reads
// as null. Only the requested columns are read from storage (plus id, when
// source is all, to drop the base rows a pending write replaces).
//
// Once a batch has reached fn a concurrent merge that deletes a generation
// ends the scan with an error rather than a retry, which would deliver
// rows twice.
func (s *Store) Scan(ctx context.Context, o ScanOptions, fn func(arrow.RecordBatch) error) error {
	if o.Source == "" {
		o.Source = SourceFragments
	}
	if _, err := ParseSource(string(o.Source)); err != nil {
		return err
	}
	cols := o.Columns
	if len(cols) == 0 {
		cols = listColumns
	}
	for _, c := range cols {
		if !slices.Contains(listColumns, c) {
			return invalid("no column %q to scan", c)
		}
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 8192
	}
	emitted := false
	emit := func(b arrow.RecordBatch) error {
		emitted = true
		return fn(b)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var snap *snapshot
		if snap, err = s.snapshot(ctx, o.Source != SourceFragments, readPlan{files: true, fresh: attempt > 0, version: o.Version}); err != nil {
			return err
		}
		err = s.scan(ctx, s.newView(snap), o.Source, cols, o.BatchRows, emit)
		if !errors.Is(err, objstore.ErrNotFound) || emitted {
			break
		}
	}
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("rollout: store %s changed during the scan; retry the request: %w", s.name, err)
	}
	return err
}

func (s *Store) scan(ctx context.Context, v *view, src Source, cols []string, batchRows int, fn func(arrow.RecordBatch) error) error {
	if src != SourceFragments {
		rows, err := v.pending(ctx)
		if err != nil {
			return err
		}
		// Runs of consecutive winning rows of one generation go out as
		// batches of their own.
		if err := s.emitRuns(ctx, rows, cols, fn); err != nil {
			return err
		}
	}
	if src == SourceWAL {
		return nil
	}
	// Columns the base table lacks read as null (see baseColumns).
	opts := table.ScanOptions{Columns: baseColumns(v.base(), cols), BatchRows: batchRows, PlainDictionaries: true}
	return v.scanBase(ctx, opts, func(b arrow.RecordBatch) error {
		out, err := project(b, cols)
		if err != nil {
			return err
		}
		defer out.Release()
		return fn(out)
	})
}

// emitRuns hands rows (pending rows in generation and row order) to fn as
// batches of cols, one per run of consecutive rows of one generation. The
// runs of one generation are read together (pendingBatch).
func (s *Store) emitRuns(ctx context.Context, rows []walRow, cols []string, fn func(arrow.RecordBatch) error) error {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].gen == rows[i].gen && rows[j].row > rows[j-1].row {
			j++
		}
		nums := make([]int, j-i)
		for k := range nums {
			nums[k] = rows[i+k].row
		}
		ranges := rowRanges(nums)
		b, err := s.pendingBatch(ctx, rows[i].gen, ranges, cols)
		if err != nil {
			return err
		}
		var at int64
		for _, rg := range ranges {
			n := rg[1] - rg[0]
			run := b.NewSlice(at, at+n)
			at += n
			err = fn(run)
			run.Release()
			if err != nil {
				break
			}
		}
		b.Release()
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}
