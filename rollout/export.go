package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// ExportOptions selects what Export streams.
type ExportOptions struct {
	// Source is the tier: fragments (the base table), wal (the pending
	// generations, newest write per id) or all (both, as the records
	// listing reads them). "" means all, or fragments with Version.
	Source Source
	// Version, when not 0, reads that base version alone (a snapshot's; see
	// ResolveVersion): Source must then be fragments or "".
	Version uint64
	// Filters are the records listing's equality filters (ParseFilters).
	Filters []Filter
	// Columns are a subset of ScanColumns, in the order wanted; empty
	// means every one. The payload is not exported (Blob reads it by id).
	Columns []string
	// BatchRows is the rows per batch read from the base table; default
	// 65536.
	BatchRows int
}

// CheckExport validates o and fills its defaults, so that a caller can
// answer a bad request before it streams a byte.
func CheckExport(o *ExportOptions) error {
	switch {
	case o.Version != 0 && o.Source == "":
		o.Source = SourceFragments
	case o.Source == "":
		o.Source = SourceAll
	}
	if _, err := ParseSource(string(o.Source)); err != nil {
		return err
	}
	if o.Version != 0 && o.Source != SourceFragments {
		return invalid("a snapshot is a base version: export it with source fragments (or no source), not %s", o.Source)
	}
	if len(o.Columns) == 0 {
		o.Columns = ScanColumns()
	}
	seen := map[string]bool{}
	for _, c := range o.Columns {
		if c == ColPayload {
			return invalid("column %s is not exported: fetch payloads by id (GET .../records/{id}/blob)", ColPayload)
		}
		if !slices.Contains(listColumns, c) {
			return invalid("no column %q to export; columns: %v", c, listColumns)
		}
		if seen[c] {
			return invalid("column %q named twice", c)
		}
		seen[c] = true
	}
	for _, f := range o.Filters {
		if !slices.Contains(FilterColumns, f.Column) {
			return invalid("cannot filter on %q; filters: %v", f.Column, FilterColumns)
		}
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 1 << 16
	}
	return nil
}

// ExportSchema is the schema of every batch Export streams with these
// columns (after CheckExport): Schema's fields, in the order asked.
func ExportSchema(cols []string) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = Schema.Field(Schema.FieldIndices(c)[0])
	}
	return arrow.NewSchema(fields, nil)
}

// ResolveVersion reads a snapshot reference: a base version number, or the
// name of a tag (a snapshot's, or any other).
func (s *Store) ResolveVersion(ctx context.Context, ref string) (uint64, error) {
	if v, err := strconv.ParseUint(ref, 10, 64); err == nil {
		if v == 0 {
			return 0, invalid("version 0 does not exist: versions start at 1")
		}
		return v, s.versionExists(ctx, v)
	}
	t, err := s.Tag(ctx, ref)
	if err != nil {
		return 0, err
	}
	return t.Version, nil
}

// Export streams the rows o selects to fn, batch by batch, with the columns
// of ExportSchema(o.Columns): memory holds a batch of the base table and,
// for wal and all, the pending generations (as every read of them does),
// never the store. The order is Scan's: pending rows first, then base rows
// whose id has no pending write. It validates o first (CheckExport); an
// error before fn's first call means nothing was streamed.
//
// The base version read is kept from this process's cleanups while the
// export runs; other processes' cleanups keep it for their read grace. An
// export longer than that reads a snapshot, whose lease keeps it.
func (s *Store) Export(ctx context.Context, o ExportOptions, fn func(arrow.RecordBatch) error) error {
	if err := CheckExport(&o); err != nil {
		return err
	}
	emitted := false
	emit := func(b arrow.RecordBatch) error {
		emitted = true
		return fn(b)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var snap *snapshot
		if snap, err = s.exportSnapshot(ctx, o, attempt > 0); err != nil {
			return err
		}
		release := s.hold(snap.base.Version())
		err = s.export(ctx, snap, o, emit)
		release()
		if !errors.Is(err, objstore.ErrNotFound) || emitted {
			break
		}
	}
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("rollout: store %s changed during the export; retry it, or export a snapshot: %w", s.name, err)
	}
	return err
}

func (s *Store) exportSnapshot(ctx context.Context, o ExportOptions, fresh bool) (*snapshot, error) {
	if o.Version == 0 {
		return s.snapshot(ctx, o.Source != SourceFragments, readPlan{files: true, fresh: fresh})
	}
	base, err := table.Checkout(ctx, s.root, o.Version)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: version %d of store %s (cleaned up, or never committed)", ErrNotFound, o.Version, s.name)
	}
	if err != nil {
		return nil, err
	}
	return &snapshot{base: base}, nil
}

func (s *Store) export(ctx context.Context, snap *snapshot, o ExportOptions, fn func(arrow.RecordBatch) error) error {
	// The view hides the base rows of pending ids, filtered or not; for
	// fragments it never reads the pending rows, so it hides nothing.
	v := s.newView(snap)
	if o.Source != SourceFragments {
		rows, err := v.pending(ctx)
		if err != nil {
			return err
		}
		// Runs of consecutive matching rows of one generation go out as
		// batches of their own (a row left out ends a run).
		if len(o.Filters) > 0 {
			kept := rows[:0:0]
			for _, r := range rows {
				if r.matches(o.Filters) {
					kept = append(kept, r)
				}
			}
			rows = kept
		}
		if err := s.emitRuns(ctx, rows, o.Columns, fn); err != nil {
			return err
		}
	}
	if o.Source == SourceWAL {
		return nil
	}
	opts := table.ScanOptions{Columns: baseColumns(snap.base, o.Columns), BatchRows: o.BatchRows, PlainDictionaries: true}
	if len(o.Filters) > 0 {
		opts.Where, opts.Index = tableFilters(o.Filters), s.finder()
	}
	return v.scanBase(ctx, opts, func(b arrow.RecordBatch) error {
		if b.NumRows() == 0 {
			return nil
		}
		out, err := project(b, o.Columns)
		if err != nil {
			return err
		}
		defer out.Release()
		return fn(out)
	})
}

// Export formats: an Arrow IPC stream, or one Parquet file.
const (
	FormatArrow   = "arrow"
	FormatParquet = "parquet"
)

// ParseFormat reads an export format; "" is FormatArrow.
func ParseFormat(s string) (string, error) {
	switch s {
	case "", FormatArrow:
		return FormatArrow, nil
	case FormatParquet:
		return FormatParquet, nil
	}
	return "", invalid("format %q: %s or %s", s, FormatArrow, FormatParquet)
}

// Parquet row groups of an export: at most this many rows, or about this
// many bytes buffered (the writer holds one row group in memory).
const (
	parquetGroupRows  = 1 << 17
	parquetGroupBytes = 128 << 20
)

// ParquetWriter writes exported batches as one Parquet file with arrow-go's
// pqarrow writer: zstd pages, dictionary encoding where it pays, row groups
// of at most parquetGroupRows rows (or about parquetGroupBytes), and the
// Arrow schema in the footer's metadata (ARROW:schema), so that Arrow
// readers get the export's types back (large strings, the UTC timestamp).
// A row group's bytes reach w when it is full; the footer at Close.
type ParquetWriter struct{ fw *pqarrow.FileWriter }

// NewParquetWriter starts a Parquet file of schema on w.
//
// Dictionary encoding is off where it cannot pay: the id column (the key:
// no value repeats) and floating-point columns (rewards, scores, logprobs:
// nearly every value distinct). There the writer hashed every value into a
// dictionary it then dropped or that outgrew the plain values; that was a
// fifth of the encoder's CPU on a 10M-row export.
func NewParquetWriter(w io.Writer, schema *arrow.Schema) (*ParquetWriter, error) {
	opts := []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithMaxRowGroupLength(parquetGroupRows), parquet.WithDictionaryDefault(true)}
	arrowProps := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
	pqs, err := pqarrow.ToParquet(schema, parquet.NewWriterProperties(opts...), arrowProps)
	if err != nil {
		return nil, fmt.Errorf("rollout: parquet schema: %w", err)
	}
	for i := range pqs.NumColumns() {
		col := pqs.Column(i)
		switch {
		case col.Path() == ColID, col.PhysicalType() == parquet.Types.Float, col.PhysicalType() == parquet.Types.Double:
			opts = append(opts, parquet.WithDictionaryPath(col.ColumnPath(), false))
		}
	}
	props := parquet.NewWriterProperties(opts...)
	fw, err := pqarrow.NewFileWriter(schema, w, props, arrowProps)
	if err != nil {
		return nil, fmt.Errorf("rollout: parquet writer: %w", err)
	}
	return &ParquetWriter{fw: fw}, nil
}

// Write adds b's rows.
func (p *ParquetWriter) Write(b arrow.RecordBatch) error {
	if err := p.fw.WriteBuffered(b); err != nil {
		return fmt.Errorf("rollout: parquet: %w", err)
	}
	if p.fw.RowGroupTotalBytesWritten() >= parquetGroupBytes {
		if err := p.fw.NewBufferedRowGroupChecked(); err != nil {
			return fmt.Errorf("rollout: parquet: %w", err)
		}
	}
	return nil
}

// Close writes the last row group and the footer (it does not close w).
func (p *ParquetWriter) Close() error {
	if err := p.fw.Close(); err != nil {
		return fmt.Errorf("rollout: parquet: %w", err)
	}
	return nil
}
