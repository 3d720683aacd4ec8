package table

import (
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

// LateScan is a late-materializing scan: the Filter columns of every live
// row are read first and handed to Keep; the Columns are then read only for
// the rows Keep returns. A selective filter over wide columns (strings,
// token lists) decodes the wide columns of the kept rows only.
type LateScan struct {
	Filter  []string // columns Keep sees; at least one
	Columns []string // columns returned, in this order (may repeat Filter columns)
	// Keep returns the rows of a batch of Filter columns to return, as
	// ascending row indices of the batch. An error ends the scan.
	Keep func(arrow.RecordBatch) ([]int, error)
	// BatchRows is the rows of each Filter batch; default 65536.
	BatchRows int
	// PlainDictionaries as in ScanOptions, for both column sets.
	PlainDictionaries bool
	// Fragments, when set, limits the scan to these fragment ids.
	Fragments *roaring.Bitmap
	// WithRowAddr appends a RowAddrColumn to the Filter batches Keep sees
	// and to the batches returned.
	WithRowAddr bool
}

// lateGap is the most unkept rows between two kept rows that are still
// read as one range (and dropped after): a range costs a decode setup, a
// row in a gap only its bytes.
const lateGap = 32

// ScanLate streams the kept rows, fragment by fragment in manifest order,
// as batches of o.Columns (one batch per Filter batch that kept a row).
// Deleted rows never reach Keep. Memory is bounded by one Filter batch and
// its kept rows.
func (d *Dataset) ScanLate(ctx context.Context, o LateScan, fn func(arrow.RecordBatch) error) error {
	if len(o.Filter) == 0 || o.Keep == nil {
		return fmt.Errorf("lance/table: a late scan needs filter columns and a Keep function")
	}
	fproj, fout, err := d.project(o.Filter, o.PlainDictionaries, o.WithRowAddr)
	if err != nil {
		return err
	}
	cols := o.Columns
	if cols == nil {
		cols = []string{} // no columns, not every column
	}
	proj, rowsOut, err := d.project(cols, o.PlainDictionaries, false)
	if err != nil {
		return err
	}
	out := rowsOut // the batches fn gets
	if o.WithRowAddr {
		if _, out, err = d.project(cols, o.PlainDictionaries, true); err != nil {
			return err
		}
	}
	batch := o.BatchRows
	if batch <= 0 {
		batch = defaultBatchRows
	}
	for _, frag := range d.Fragments() {
		if o.Fragments != nil && !o.Fragments.Contains(uint32(frag.GetId())) {
			continue
		}
		del, err := d.deletedRows(ctx, frag)
		if err != nil {
			return err
		}
		n := int64(frag.GetPhysicalRows())
		for s := int64(0); s < n; s += int64(batch) {
			if err := ctx.Err(); err != nil {
				return err
			}
			e := min(s+int64(batch), n)
			offs, err := d.lateKeep(ctx, frag, fproj, fout, del, s, e, o)
			if err != nil {
				return err
			}
			if len(offs) == 0 {
				continue
			}
			rec, err := d.readRows(ctx, frag, proj, rowsOut, offs, o.PlainDictionaries)
			if err != nil {
				return err
			}
			if o.WithRowAddr {
				rec = appendRowAddrs(rec, out, frag.GetId(), offs)
			}
			err = fn(rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// lateKeep reads the Filter columns of rows [s, e) of a fragment, drops
// deleted rows, and returns the fragment offsets of the rows Keep keeps.
func (d *Dataset) lateKeep(ctx context.Context, frag *pb.DataFragment, fproj *schema.Schema, fout *arrow.Schema,
	del *roaring.Bitmap, s, e int64, o LateScan) ([]int64, error) {
	arrs, err := d.readFragmentWith(ctx, frag, fproj.Fields, s, e, o.PlainDictionaries)
	if err != nil {
		return nil, err
	}
	if o.WithRowAddr {
		offs := make([]int64, e-s)
		for i := range offs {
			offs[i] = s + int64(i)
		}
		arrs = append(arrs, rowAddrArray(frag.GetId(), offs))
	}
	rec := array.NewRecordBatch(fout, arrs, e-s)
	releaseAll(arrs)
	defer rec.Release()
	// live[i] is the fragment offset of row i of the batch Keep sees.
	var live []int64
	if del != nil {
		mask := make([]bool, e-s)
		for i := range mask {
			mask[i] = !del.Contains(uint32(s) + uint32(i))
			if mask[i] {
				live = append(live, s+int64(i))
			}
		}
		if len(live) < len(mask) {
			mb := array.NewBooleanBuilder(memory.DefaultAllocator)
			mb.AppendValues(mask, nil)
			m := mb.NewArray()
			filtered, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
			m.Release()
			if err != nil {
				return nil, fmt.Errorf("lance/table: filter deleted rows: %w", err)
			}
			defer filtered.Release()
			rec = filtered
		} else {
			live = nil
		}
	}
	idx, err := o.Keep(rec)
	if err != nil {
		return nil, err
	}
	offs := make([]int64, len(idx))
	for k, i := range idx {
		if i < 0 || int64(i) >= rec.NumRows() || (k > 0 && i <= idx[k-1]) {
			return nil, fmt.Errorf("lance/table: late scan: Keep returned row %d (of %d) out of order", i, rec.NumRows())
		}
		if live != nil {
			offs[k] = live[i]
		} else {
			offs[k] = s + int64(i)
		}
	}
	return offs, nil
}

// readRows reads the given fragment offsets (ascending, distinct) of
// proj's fields with one ReadRanges per data file (nulls for a field no
// file holds: added after the fragment was written). Runs of offsets less
// than lateGap apart are read as one range, and the rows between them
// dropped.
func (d *Dataset) readRows(ctx context.Context, frag *pb.DataFragment, proj *schema.Schema, out *arrow.Schema,
	offs []int64, plain bool) (arrow.RecordBatch, error) {
	var ranges [][2]int64
	for _, o := range offs {
		if k := len(ranges); k > 0 && o-ranges[k-1][1] <= lateGap {
			ranges[k-1][1] = o + 1
			continue
		}
		ranges = append(ranges, [2]int64{o, o + 1})
	}
	var rows int64
	for _, r := range ranges {
		rows += r[1] - r[0]
	}
	cols := make([]arrow.Array, len(proj.Fields))
	defer func() { releaseAll(cols) }()
	type want struct {
		ids []int32
		pos []int
	}
	perFile := make([]want, len(frag.GetFiles()))
	for i, f := range proj.Fields {
		fi := slices.IndexFunc(frag.GetFiles(), func(df *pb.DataFile) bool { return slices.Contains(df.GetFields(), f.ID) })
		if fi < 0 {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, outputType(f.Type, plain), int(rows))
			continue
		}
		perFile[fi].ids = append(perFile[fi].ids, f.ID)
		perFile[fi].pos = append(perFile[fi].pos, i)
	}
	for fi, w := range perFile {
		if len(w.ids) == 0 {
			continue
		}
		r, err := d.openFile(ctx, frag.GetFiles()[fi])
		if err != nil {
			return nil, err
		}
		rec, err := r.ReadRanges(ctx, w.ids, ranges, file.ReadOptions{PlainDictionaries: plain})
		if err != nil {
			return nil, fmt.Errorf("lance/table: fragment %d file %s: %w", frag.GetId(), frag.GetFiles()[fi].GetPath(), err)
		}
		for j, p := range w.pos {
			cols[p] = rec.Column(j)
			cols[p].Retain()
		}
		rec.Release()
	}
	rec := array.NewRecordBatch(out, cols, rows)
	if rows == int64(len(offs)) {
		return rec, nil
	}
	defer rec.Release()
	mask := make([]bool, 0, rows)
	k := 0
	for _, r := range ranges {
		for o := r[0]; o < r[1]; o++ {
			hit := k < len(offs) && offs[k] == o
			if hit {
				k++
			}
			mask = append(mask, hit)
		}
	}
	mb := array.NewBooleanBuilder(memory.DefaultAllocator)
	mb.AppendValues(mask, nil)
	m := mb.NewArray()
	defer m.Release()
	filtered, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("lance/table: late scan: %w", err)
	}
	return filtered, nil
}

// rowAddrArray holds the addresses of the given offsets of a fragment.
func rowAddrArray(frag uint64, offs []int64) arrow.Array {
	b := array.NewUint64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(len(offs))
	for _, o := range offs {
		b.UnsafeAppend(frag<<32 | uint64(o))
	}
	return b.NewArray()
}

// appendRowAddrs returns rec (of out's fields but the last) with the
// addresses of offs as out's last column, releasing rec.
func appendRowAddrs(rec arrow.RecordBatch, out *arrow.Schema, frag uint64, offs []int64) arrow.RecordBatch {
	a := rowAddrArray(frag, offs)
	defer a.Release()
	defer rec.Release()
	return array.NewRecordBatch(out, append(slices.Clone(rec.Columns()), a), rec.NumRows())
}
