package table

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

// TakeRows is TakePlain for rows scattered over a table (a page of a
// listing in key order): each fragment's rows are read with one read per
// data file, every column decoded once for all of them, then put in the
// order given. Take reads one range per run of nearby rows instead, which
// costs a decode per row and column when rows are far apart.
func (d *Dataset) TakeRows(ctx context.Context, addrs []RowAddr, columns []string) (arrow.RecordBatch, error) {
	proj := d.schema
	if columns != nil {
		var err error
		if proj, err = d.schema.Project(columns); err != nil {
			return nil, err
		}
	}
	out := outputSchema(proj, true)
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
	// Read each fragment's rows; base[id] is where they start in the
	// concatenation of the fragments' parts.
	parts := make([][]arrow.Array, len(proj.Fields))
	defer func() {
		for _, p := range parts {
			releaseAll(p)
		}
	}()
	base := map[uint64]int{}
	n := 0
	for _, id := range order {
		offs := byFrag[id]
		base[id] = n
		arrs, err := d.readRows(ctx, d.Fragments()[frags[id]].GetFiles(), id, proj.Fields, offs)
		if err != nil {
			return nil, err
		}
		for c, a := range arrs {
			parts[c] = append(parts[c], a)
		}
		n += len(offs)
	}
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	ib.Reserve(len(addrs))
	for _, a := range addrs {
		pos, _ := slices.BinarySearch(byFrag[a.Fragment], a.Offset)
		ib.UnsafeAppend(int64(base[a.Fragment] + pos))
	}
	idx := ib.NewArray()
	defer idx.Release()
	cols := make([]arrow.Array, len(proj.Fields))
	for c := range parts {
		all := parts[c][0]
		if len(parts[c]) > 1 {
			var err error
			if all, err = array.Concatenate(parts[c], memory.DefaultAllocator); err != nil {
				releaseAll(cols)
				return nil, fmt.Errorf("lance/table: take: %w", err)
			}
		} else {
			all.Retain()
		}
		taken, err := compute.TakeArray(ctx, all, idx)
		all.Release()
		if err != nil {
			releaseAll(cols)
			return nil, fmt.Errorf("lance/table: take: %w", err)
		}
		cols[c] = taken
	}
	rec := array.NewRecordBatch(out, cols, int64(len(addrs)))
	releaseAll(cols)
	return rec, nil
}

// readRows reads the given row offsets (ascending, distinct) of a fragment
// whose data files are files: one ReadRanges per data file, nulls for a
// field no file holds (added after the fragment was written).
func (d *Dataset) readRows(ctx context.Context, files []*pb.DataFile, frag uint64, fields []*schema.Field, offs []uint32) ([]arrow.Array, error) {
	var ranges [][2]int64
	for i := 0; i < len(offs); {
		j := i + 1
		for j < len(offs) && offs[j] == offs[j-1]+1 {
			j++
		}
		ranges = append(ranges, [2]int64{int64(offs[i]), int64(offs[j-1]) + 1})
		i = j
	}
	out := make([]arrow.Array, len(fields))
	type want struct {
		ids []int32
		pos []int
	}
	perFile := make([]want, len(files))
	for i, f := range fields {
		fi := slices.IndexFunc(files, func(df *pb.DataFile) bool { return slices.Contains(df.GetFields(), f.ID) })
		if fi < 0 {
			out[i] = array.MakeArrayOfNull(memory.DefaultAllocator, outputType(f.Type, true), len(offs))
			continue
		}
		perFile[fi].ids = append(perFile[fi].ids, f.ID)
		perFile[fi].pos = append(perFile[fi].pos, i)
	}
	for fi, w := range perFile {
		if len(w.ids) == 0 {
			continue
		}
		r, err := d.openFile(ctx, files[fi])
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		rec, err := r.ReadRanges(ctx, w.ids, ranges, file.ReadOptions{PlainDictionaries: true})
		if err != nil {
			releaseAll(out)
			return nil, fmt.Errorf("lance/table: fragment %d file %s: %w", frag, files[fi].GetPath(), err)
		}
		for j, p := range w.pos {
			col := rec.Column(j)
			col.Retain()
			out[p] = col
		}
		rec.Release()
	}
	return out, nil
}
