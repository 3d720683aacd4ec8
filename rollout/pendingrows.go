package rollout

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/rollout/row"
	"github.com/lance-context/lance-context/wal"
)

// The generation cache keeps only the narrow columns of a large
// generation (cachedColumns). What follows gives reads the rows they
// return with every column they ask for: the cached columns from memory,
// the others read from the generation's file for those rows alone.

// pendingBatch returns the rows of generation g in ranges (ascending,
// disjoint [start, end) row ranges), one range after another, as a batch
// of cols with Schema's types. Columns the cache keeps come from g.Rec;
// the genColumns it left out (the wide ones) are read from g's file, one
// read for all the ranges; any other column (the payload, lc_shard) reads
// as null, as it always has from the cache. Release the batch.
func (s *Store) pendingBatch(ctx context.Context, g *wal.LoadedGeneration, ranges [][2]int64, cols []string) (arrow.RecordBatch, error) {
	cachedPart, err := sliceRanges(g.Rec, ranges)
	if err != nil {
		return nil, err
	}
	defer cachedPart.Release()
	var missing []string
	for _, c := range cols {
		if !g.Rec.Schema().HasField(c) && slices.Contains(genColumns, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return assemble(cols, cachedPart.NumRows(), cachedPart)
	}
	r, err := s.opts.Cache.reader(ctx, s.root, g)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, c := range missing {
		if f := r.Schema().Field(c); f != nil {
			ids = append(ids, f.ID)
		}
	}
	if len(ids) == 0 {
		return assemble(cols, cachedPart.NumRows(), cachedPart)
	}
	filePart, err := r.ReadRanges(ctx, ids, ranges, file.ReadOptions{PlainDictionaries: true})
	if err != nil {
		return nil, fmt.Errorf("rollout: read generation %s: %w", g.Ref.Key(), err)
	}
	defer filePart.Release()
	if filePart.NumRows() != cachedPart.NumRows() {
		return nil, fmt.Errorf("rollout: generation %s: %d rows read, %d cached", g.Ref.Key(), filePart.NumRows(), cachedPart.NumRows())
	}
	return assemble(cols, cachedPart.NumRows(), cachedPart, filePart)
}

// sliceRanges returns ranges of rec, one after another.
func sliceRanges(rec arrow.RecordBatch, ranges [][2]int64) (arrow.RecordBatch, error) {
	parts := make([]arrow.RecordBatch, len(ranges))
	for i, rg := range ranges {
		parts[i] = rec.NewSlice(rg[0], rg[1])
	}
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	return concatRecords(parts)
}

// concatRecords concatenates batches of one schema, at least one.
func concatRecords(parts []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	arrs := make([]arrow.Array, parts[0].NumCols())
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	var n int64
	for _, p := range parts {
		n += p.NumRows()
	}
	in := make([]arrow.Array, len(parts))
	for i := range arrs {
		for j, p := range parts {
			in[j] = p.Column(i)
		}
		var err error
		if arrs[i], err = array.Concatenate(in, memory.DefaultAllocator); err != nil {
			return nil, fmt.Errorf("rollout: concatenate %s: %w", parts[0].ColumnName(i), err)
		}
	}
	return array.NewRecordBatch(parts[0].Schema(), arrs, n), nil
}

// assemble returns a batch of cols with Schema's types, each column taken
// from the first part that has it (all parts hold the same n rows), null
// where none does.
func assemble(cols []string, n int64, parts ...arrow.RecordBatch) (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, name := range cols {
		idx := Schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("rollout: no column %q", name)
		}
		fields[i] = Schema.Field(idx[0])
		for _, p := range parts {
			if j := p.Schema().FieldIndices(name); len(j) == 1 {
				arrs[i] = row.AsSchemaType(name, p.Column(j[0]))
				break
			}
		}
		if arrs[i] == nil {
			arrs[i] = array.MakeArrayOfNull(memory.DefaultAllocator, fields[i].Type, int(n))
		}
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, n), nil
}

// pendingRows returns rows (pending rows, in any order) as one batch of
// cols, row i of it being rows[i]. Each generation's rows are read
// together (pendingBatch), the generations side by side.
func (s *Store) pendingRows(ctx context.Context, rows []walRow, cols []string) (arrow.RecordBatch, error) {
	type genRows struct {
		g     *wal.LoadedGeneration
		rows  []int // sorted, distinct
		batch arrow.RecordBatch
	}
	var order []*genRows
	byGen := map[*wal.LoadedGeneration]*genRows{}
	for _, w := range rows {
		gr := byGen[w.gen]
		if gr == nil {
			gr = &genRows{g: w.gen}
			byGen[w.gen] = gr
			order = append(order, gr)
		}
		gr.rows = append(gr.rows, w.row)
	}
	for _, gr := range order {
		slices.Sort(gr.rows)
		gr.rows = slices.Compact(gr.rows)
	}
	defer func() {
		for _, gr := range order {
			if gr.batch != nil {
				gr.batch.Release()
			}
		}
	}()
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(pendingReads)
	for _, gr := range order {
		eg.Go(func() error {
			var err error
			gr.batch, err = s.pendingBatch(ectx, gr.g, rowRanges(gr.rows), cols)
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	// Where each generation's rows start in their concatenation, then each
	// input row's place in it.
	start := map[*wal.LoadedGeneration]int64{}
	var parts []arrow.RecordBatch
	var at int64
	for _, gr := range order {
		start[gr.g] = at
		parts = append(parts, gr.batch)
		at += gr.batch.NumRows()
	}
	idx := make([]int64, len(rows))
	inOrder := true
	for i, w := range rows {
		gr := byGen[w.gen]
		j, _ := slices.BinarySearch(gr.rows, w.row)
		idx[i] = start[w.gen] + int64(j)
		inOrder = inOrder && idx[i] == int64(i)
	}
	all, err := concatSchemaBatches(cols, parts)
	if err != nil {
		return nil, err
	}
	if inOrder && all.NumRows() == int64(len(rows)) {
		return all, nil
	}
	defer all.Release()
	return takeRows(ctx, all, idx)
}

// rowRanges turns sorted, distinct rows into ascending [start, end)
// ranges, consecutive rows in one.
func rowRanges(rows []int) [][2]int64 {
	var out [][2]int64
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j] == rows[j-1]+1 {
			j++
		}
		out = append(out, [2]int64{int64(rows[i]), int64(rows[j-1]) + 1})
		i = j
	}
	return out
}

// concatSchemaBatches concatenates batches of cols (as assemble makes
// them) into one; none makes an empty batch of cols.
func concatSchemaBatches(cols []string, parts []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(parts) == 0 {
		return assemble(cols, 0)
	}
	return concatRecords(parts)
}

// takeRows returns the rows idx of rec, in that order.
func takeRows(ctx context.Context, rec arrow.RecordBatch, idx []int64) (arrow.RecordBatch, error) {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	ib.AppendValues(idx, nil)
	ia := ib.NewArray()
	defer ia.Release()
	values, indices := compute.NewDatum(rec), compute.NewDatum(ia)
	defer values.Release()
	defer indices.Release()
	out, err := compute.Take(ctx, *compute.DefaultTakeOptions(), values, indices)
	if err != nil {
		return nil, fmt.Errorf("rollout: take rows: %w", err)
	}
	return out.(*compute.RecordDatum).Value, nil
}

// pendingRead is pendingRecords run beside a read's base reads.
type pendingRead struct {
	done   chan struct{}
	cancel context.CancelFunc
	recs   []Record
	err    error
}

// startPendingRecords starts reading rows as records (pendingRecords).
// Defer stop.
func (s *Store) startPendingRecords(ctx context.Context, rows []walRow) *pendingRead {
	ctx, cancel := context.WithCancel(ctx)
	p := &pendingRead{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		p.recs, p.err = s.pendingRecords(ctx, rows)
	}()
	return p
}

// wait returns the records.
func (p *pendingRead) wait() ([]Record, error) {
	<-p.done
	return p.recs, p.err
}

// stop ends the read and waits for it: no read of a call outlives it.
func (p *pendingRead) stop() {
	p.cancel()
	<-p.done
}

// pendingRecords returns rows as records, record i being rows[i].
func (s *Store) pendingRecords(ctx context.Context, rows []walRow) ([]Record, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	b, err := s.pendingRows(ctx, rows, listColumns)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return recordsFromBatch(b)
}
