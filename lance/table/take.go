package table

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/internal/multierr"
)

// takeFragments bounds the fragments TakeRows reads at once.
const takeFragments = 16

// TakeRows is TakePlain for rows scattered over a table (a page of a
// listing in key order): each fragment's rows are read with one read per
// data file, every column decoded once for all of them, then put in the
// order given. Take reads one range per run of nearby rows instead, which
// costs a decode per row and column when rows are far apart. Rows given in
// address order come back without a reordering pass (cheapest for a
// caller that can put them in its own order).
func (d *Dataset) TakeRows(ctx context.Context, addrs []RowAddr, columns []string) (arrow.RecordBatch, error) {
	proj, out, err := d.project(columns, true, false)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		cols := make([]arrow.Array, len(proj.Fields))
		for i, f := range proj.Fields {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, outputType(f.Type, true), 0)
		}
		rec := array.NewRecordBatch(out, cols, 0)
		releaseAll(cols)
		return rec, nil
	}
	frags := make(map[uint64]int, len(d.Fragments()))
	for i, f := range d.Fragments() {
		frags[f.GetId()] = i
	}
	byFrag := map[uint64][]uint32{}
	for _, a := range addrs {
		i, ok := frags[a.Fragment]
		if !ok || uint64(a.Offset) >= d.Fragments()[i].GetPhysicalRows() {
			return nil, fmt.Errorf("lance/table: take: no row at fragment %d offset %d in version %d", a.Fragment, a.Offset, d.Version())
		}
		byFrag[a.Fragment] = append(byFrag[a.Fragment], a.Offset)
	}
	order := make([]uint64, 0, len(byFrag))
	for id, offs := range byFrag {
		slices.Sort(offs)
		byFrag[id] = slices.Compact(offs)
		order = append(order, id)
	}
	slices.Sort(order)
	// Read each fragment's rows, the fragments in parallel (on an object
	// store a page's rows cost one round of requests, not one per
	// fragment); base[id] is where they start in the concatenation of the
	// fragments' parts.
	parts := make([][]arrow.Array, len(proj.Fields))
	defer func() {
		for _, p := range parts {
			releaseAll(p)
		}
	}()
	base := map[uint64]int{}
	n := 0
	for _, id := range order {
		base[id] = n
		n += len(byFrag[id])
	}
	recs := make([]arrow.RecordBatch, len(order))
	errs := make([]error, len(order))
	read := func(k int) {
		offs := byFrag[order[k]]
		o64 := make([]int64, len(offs))
		for i, o := range offs {
			o64[i] = int64(o)
		}
		recs[k], errs[k] = d.readRows(ctx, d.Fragments()[frags[order[k]]], proj, out, o64, true)
	}
	if len(order) == 1 {
		read(0)
	} else {
		var wg sync.WaitGroup
		sem := make(chan struct{}, takeFragments)
		for k := range order {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				read(k)
			}()
		}
		wg.Wait()
	}
	defer func() {
		for _, r := range recs {
			if r != nil {
				r.Release()
			}
		}
	}()
	if err := multierr.Join(errs...); err != nil {
		return nil, err
	}
	for _, rec := range recs {
		for c := range parts {
			col := rec.Column(c)
			col.Retain()
			parts[c] = append(parts[c], col)
		}
	}
	// Rows asked for in address order (each once) are already in place
	// after the concatenation: no take, whose per-column setup cost more
	// than the reads of a page of rows.
	inOrder := true
	for i := 1; i < len(addrs) && inOrder; i++ {
		inOrder = addrs[i-1].Compare(addrs[i]) < 0
	}
	var idx arrow.Array
	if !inOrder {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		defer ib.Release()
		ib.Reserve(len(addrs))
		for _, a := range addrs {
			pos, _ := slices.BinarySearch(byFrag[a.Fragment], a.Offset)
			ib.UnsafeAppend(int64(base[a.Fragment] + pos))
		}
		idx = ib.NewArray()
		defer idx.Release()
	}
	cols := make([]arrow.Array, len(proj.Fields))
	for c := range parts {
		all, err := concat(parts[c])
		if err == nil && idx != nil {
			var taken arrow.Array
			taken, err = compute.TakeArray(ctx, all, idx)
			all.Release()
			all = taken
		}
		if err != nil {
			releaseAll(cols)
			return nil, fmt.Errorf("lance/table: take: %w", err)
		}
		cols[c] = all
	}
	rec := array.NewRecordBatch(out, cols, int64(len(addrs)))
	releaseAll(cols)
	return rec, nil
}

// concat returns the parts as one array (the caller releases it).
func concat(parts []arrow.Array) (arrow.Array, error) {
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	return array.Concatenate(parts, memory.DefaultAllocator)
}
