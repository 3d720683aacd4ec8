package file

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ReadRanges returns the rows of several row ranges of the given top-level
// fields, concatenated in one record batch: ranges[i] = {start, end} reads
// rows [start, end); ranges must be ascending and disjoint. It is Read for
// scattered rows (a late-materializing scan takes the rows a filter kept):
// one call decodes only those rows, and the byte ranges they need are
// coalesced into a few reads, where a Read per range would pay a decode
// setup and a read per range and field.
func (r *Reader) ReadRanges(ctx context.Context, fieldIDs []int32, ranges [][2]int64, opts ReadOptions) (arrow.RecordBatch, error) {
	rgs := make([]rowRange, 0, len(ranges))
	var rows, prev int64
	for i, rg := range ranges {
		if rg[0] < 0 || rg[1] < rg[0] || rg[1] > r.numRows || (i > 0 && rg[0] < prev) {
			return nil, fmt.Errorf("lance/file: row ranges must be ascending, disjoint and within [0, %d); range %d is [%d, %d)", r.numRows, i, rg[0], rg[1])
		}
		prev = rg[1]
		if rg[1] > rg[0] {
			rgs = append(rgs, rowRange{rg[0], rg[1]})
			rows += rg[1] - rg[0]
		}
	}
	rc := &readCtx{ctx: ctx, r: r, limit: max(decodeLimitFloor, 16*r.size), plainDicts: opts.PlainDictionaries}
	fields := make([]arrow.Field, len(fieldIDs))
	cols := make([]arrow.Array, 0, len(fieldIDs))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	// Sequential: the rows are few, and a caller reading many fragments
	// brings its own parallelism.
	for i, id := range fieldIDs {
		n, ok := r.top[id]
		if !ok {
			return nil, fmt.Errorf("lance/file: no top-level field with id %d", id)
		}
		d, err := rc.decode(n, rgs)
		if err != nil {
			return nil, err
		}
		fields[i] = n.f.ArrowField()
		fields[i].Type = d.DataType() // a plain dictionary's value type
		cols = append(cols, array.MakeFromData(d))
		d.Release()
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rows), nil
}
