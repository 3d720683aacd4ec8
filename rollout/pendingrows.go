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
	if len(ranges) == 1 {
		return rec.NewSlice(ranges[0][0], ranges[0][1]), nil
	}
	var n int64
	for _, rg := range ranges {
		n += rg[1] - rg[0]
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(ranges))
	for i, c := range rec.Columns() {
		for j, rg := range ranges {
			parts[j] = array.NewSlice(c, rg[0], rg[1])
		}
		var err error
		cols[i], err = array.Concatenate(parts, memory.DefaultAllocator)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("rollout: concatenate %s: %w", rec.ColumnName(i), err)
		}
	}
	return array.NewRecordBatch(rec.Schema(), cols, n), nil
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
// them) into one.
func concatSchemaBatches(cols []string, parts []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	if len(parts) == 0 {
		return assemble(cols, 0)
	}
	arrs := make([]arrow.Array, len(cols))
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
	for i := range cols {
		for j, p := range parts {
			in[j] = p.Column(i)
		}
		var err error
		if arrs[i], err = array.Concatenate(in, memory.DefaultAllocator); err != nil {
			return nil, fmt.Errorf("rollout: concatenate %s: %w", cols[i], err)
		}
	}
	return array.NewRecordBatch(parts[0].Schema(), arrs, n), nil
}

// takeRows returns the rows idx of rec, in that order.
func takeRows(ctx context.Context, rec arrow.RecordBatch, idx []int64) (arrow.RecordBatch, error) {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(idx, nil)
	ia := b.NewInt64Array()
	defer ia.Release()
	arrs := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, c := range rec.Columns() {
		out, err := compute.TakeArray(ctx, c, ia)
		if err != nil {
			return nil, fmt.Errorf("rollout: take %s: %w", rec.ColumnName(i), err)
		}
		arrs[i] = out
	}
	return array.NewRecordBatch(rec.Schema(), arrs, int64(len(idx))), nil
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
