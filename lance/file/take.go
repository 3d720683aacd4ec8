package file

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ReadRanges returns the rows of several row ranges [lo, hi) of the given
// top-level fields, concatenated in order, as one record batch: a take of
// scattered rows decodes each field once for all of them (one decode and
// one set of coalesced reads per field) instead of once per row. Ranges
// must be ascending and disjoint.
func (r *Reader) ReadRanges(ctx context.Context, fieldIDs []int32, ranges [][2]int64, opts ReadOptions) (arrow.RecordBatch, error) {
	rgs := make([]rowRange, len(ranges))
	var rows int64
	for i, rg := range ranges {
		if rg[0] < 0 || rg[1] < rg[0] || rg[1] > r.numRows || (i > 0 && rg[0] < ranges[i-1][1]) {
			return nil, fmt.Errorf("lance/file: row ranges must be ascending, disjoint and within [0, %d): %v", r.numRows, ranges)
		}
		rgs[i] = rowRange{rg[0], rg[1]}
		rows += rg[1] - rg[0]
	}
	nodes := make([]*node, len(fieldIDs))
	for i, id := range fieldIDs {
		n, ok := r.top[id]
		if !ok {
			return nil, fmt.Errorf("lance/file: no top-level field with id %d", id)
		}
		nodes[i] = n
	}
	rc := &readCtx{ctx: ctx, r: r, limit: max(decodeLimitFloor, 16*r.size), plainDicts: opts.PlainDictionaries}
	datas := make([]arrow.ArrayData, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			datas[i], errs[i] = rc.decode(n, rgs)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, d := range datas {
			if d != nil {
				d.Release()
			}
		}
		return nil, err
	}
	fields := make([]arrow.Field, len(nodes))
	cols := make([]arrow.Array, len(nodes))
	for i, d := range datas {
		fields[i] = nodes[i].f.ArrowField()
		fields[i].Type = d.DataType()
		cols[i] = array.MakeFromData(d)
		d.Release()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}
