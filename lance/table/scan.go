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
	"github.com/lance-context/lance-context/objstore"
)

// RowAddrColumn is the name of the optional uint64 column holding each row's
// address: fragment id << 32 | offset, as Lance's _rowaddr.
const RowAddrColumn = "_rowaddr"

// Eq is an equality predicate on a string or bool column. Value is a string
// for utf8/large_utf8 columns and a bool for bool columns. Null never matches.
type Eq struct {
	Column string
	Value  any
}

// In is a set-membership predicate on a string column: the row's value is
// (or, with Negate, is not) in Values. Null is never in a set.
type In struct {
	Column string
	Values map[string]struct{}
	Negate bool
}

// ScanOptions selects what a scan returns.
type ScanOptions struct {
	Columns     []string // nil means every column
	Where       []Eq     // AND-ed
	In          []In     // AND-ed with Where
	Offset      int64    // matching rows to skip
	Limit       int64    // matching rows to return; <= 0 means all
	BatchRows   int      // rows read per step; default 65536
	WithRowAddr bool     // append a RowAddrColumn column
	// PlainDictionaries returns dictionary-typed columns as plain arrays of
	// their value type. Without it a batch's dictionary column holds at most
	// as many distinct values as its keys address (128 for int8), and a scan
	// of a table with more fails with file.ErrUnsupported.
	PlainDictionaries bool
	// Fragments, when non-nil, restricts the scan to these fragment ids (the
	// fragments an index does not cover, say).
	Fragments *roaring.Bitmap
	// Index, when non-nil, is asked for the rows of one key predicate (an Eq
	// on a string column or a non-negated In); in the fragments it covers
	// only those rows are read. Every predicate is still evaluated on the
	// rows read, so an index can narrow a scan but never add a wrong row.
	Index RowFinder
	// WithDeleted reads the rows that deletion files mark too: what any
	// version sharing these data files may hold (a collector of objects
	// rows refer to must see them all).
	WithDeleted bool
}

// RowFinder finds rows by key through an index. Find returns the fragments
// it covers in d and, for each covered fragment, the offsets (ascending) of
// the rows whose column holds one of values. Deleted rows may be included;
// the scan drops them.
type RowFinder interface {
	Find(ctx context.Context, d *Dataset, column string, values []string) (covered *roaring.Bitmap, rows map[uint64][]uint32, err error)
}

// keyLookup asks the finder for the rows of the first indexable predicate.
// ok is false when no predicate is indexable or the finder covers nothing.
func (d *Dataset) keyLookup(ctx context.Context, opts ScanOptions) (covered *roaring.Bitmap, rows map[uint64][]uint32, err error) {
	if opts.Index == nil {
		return nil, nil, nil
	}
	for _, w := range opts.Where {
		if v, ok := w.Value.(string); ok {
			if f := d.schema.Field(w.Column); f != nil && (f.Type.ID() == arrow.STRING || f.Type.ID() == arrow.LARGE_STRING) {
				covered, rows, err = opts.Index.Find(ctx, d, w.Column, []string{v})
				if err != nil || (covered != nil && !covered.IsEmpty()) {
					return covered, rows, err
				}
			}
		}
	}
	for _, in := range opts.In {
		if in.Negate {
			continue
		}
		vals := make([]string, 0, len(in.Values))
		for v := range in.Values {
			vals = append(vals, v)
		}
		slices.Sort(vals)
		covered, rows, err = opts.Index.Find(ctx, d, in.Column, vals)
		if err != nil || (covered != nil && !covered.IsEmpty()) {
			return covered, rows, err
		}
	}
	return nil, nil, nil
}

const defaultBatchRows = 64 << 10

// Scan streams the matching live rows, fragment by fragment in manifest
// order, to fn, one batch at a time. Memory is bounded by one batch.
func (d *Dataset) Scan(ctx context.Context, opts ScanOptions, fn func(arrow.RecordBatch) error) error {
	if opts.Fragments != nil && opts.Fragments.IsEmpty() {
		return nil // no index lookup for no fragment
	}
	proj, outSchema, err := d.project(opts.Columns, opts.PlainDictionaries, opts.WithRowAddr)
	if err != nil {
		return err
	}
	preds, err := d.compilePredicates(opts.Where, opts.In)
	if err != nil {
		return err
	}
	batch := opts.BatchRows
	if batch <= 0 {
		batch = defaultBatchRows
	}
	st := &scanState{proj: proj, preds: preds, out: outSchema, withAddr: opts.WithRowAddr, plain: opts.PlainDictionaries,
		offset: opts.Offset, remaining: opts.Limit}
	if st.remaining <= 0 {
		st.remaining = -1
	}
	covered, found, err := d.keyLookup(ctx, opts)
	if err != nil {
		return err
	}
	for _, frag := range d.Fragments() {
		if st.remaining == 0 {
			return nil
		}
		if opts.Fragments != nil && !opts.Fragments.Contains(uint32(frag.GetId())) {
			continue
		}
		if covered != nil && covered.Contains(uint32(frag.GetId())) {
			if err := d.scanRows(ctx, st, frag, found[frag.GetId()], fn); err != nil {
				return err
			}
			continue
		}
		if len(preds) == 0 && !opts.WithDeleted && st.offset >= liveRows(frag) {
			st.offset -= liveRows(frag) // skip whole fragments without reading them
			continue
		}
		var del *roaring.Bitmap
		if !opts.WithDeleted {
			if del, err = d.deletedRows(ctx, frag); err != nil {
				return err
			}
		}
		start := int64(0)
		if len(preds) == 0 && del == nil {
			start, st.offset = st.offset, 0
		}
		n := int64(frag.GetPhysicalRows())
		for s := start; s < n && st.remaining != 0; s += int64(batch) {
			e := min(s+int64(batch), n)
			rec, err := d.scanChunk(ctx, st, frag, del, nil, s, e, false)
			if err != nil {
				return err
			}
			if rec == nil {
				continue
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

// scanState is what one Scan reads (projection, predicates, output
// schema) and what it has left to skip and to return: Offset and Limit
// count matching rows across fragments and chunks, so every chunk of the
// scan updates the same state.
type scanState struct {
	proj     *schema.Schema
	preds    []predicate
	out      *arrow.Schema
	withAddr bool // append RowAddrColumn
	plain    bool // dictionary columns read as their value type

	offset    int64 // matching rows still to skip
	remaining int64 // matching rows still to return; -1: no limit
}

// scanRows scans only the given row offsets (ascending) of a fragment, in
// runs of consecutive offsets, with the same predicates, deletions, offset
// and limit as a full scan of the fragment.
func (d *Dataset) scanRows(ctx context.Context, st *scanState, frag *pb.DataFragment, offsets []uint32, fn func(arrow.RecordBatch) error) error {
	if len(offsets) == 0 {
		return nil
	}
	del, err := d.deletedRows(ctx, frag)
	if err != nil {
		return err
	}
	if del != nil && !del.IsEmpty() {
		// An index names the rows of a key's every version; all but the
		// newest are deleted. Dropped here, they are never read: a chunk
		// of deleted rows cost its read, and a store whose ids are
		// rewritten read more of them the older it was.
		live := make([]uint32, 0, len(offsets))
		for _, o := range offsets {
			if !del.Contains(o) {
				live = append(live, o)
			}
		}
		offsets = live
	}
	n := frag.GetPhysicalRows()
	for i := 0; i < len(offsets) && st.remaining != 0; {
		// Offsets up to takeGap rows apart share one read: rows between
		// them are read and dropped, which costs less than a round trip.
		j := i + 1
		for j < len(offsets) && offsets[j] > offsets[j-1] && offsets[j]-offsets[j-1] <= takeGap {
			j++
		}
		s, e := int64(offsets[i]), int64(offsets[j-1])+1
		sel := offsets[i:j]
		i = j
		if uint64(e) > n {
			return fmt.Errorf("%w: index names row %d of fragment %d, which has %d rows", ErrCorrupt, e-1, frag.GetId(), n)
		}
		if int64(len(sel)) == e-s {
			sel = nil // every row of [s, e)
		}
		rec, err := d.scanChunk(ctx, st, frag, del, sel, s, e, true)
		if err != nil {
			return err
		}
		if rec == nil {
			continue
		}
		err = fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// scanChunk reads rows [s, e) of a fragment (only the offsets in sel, when
// not nil) and returns the selected ones, or nil when none are. eager
// reads the predicate columns with the projection (see below).
func (d *Dataset) scanChunk(ctx context.Context, st *scanState, frag *pb.DataFragment, del *roaring.Bitmap, sel []uint32, s, e int64, eager bool) (arrow.RecordBatch, error) {
	proj, preds, plain := st.proj, st.preds, st.plain
	n := int(e - s)
	keep := make([]bool, n)
	if sel == nil {
		for i := range keep {
			keep[i] = true
		}
	} else {
		for _, o := range sel {
			keep[int64(o)-s] = true
		}
	}
	for i := range keep {
		keep[i] = keep[i] && (del == nil || !del.Contains(uint32(s)+uint32(i)))
	}
	// Rows an index found almost always match: read the predicate columns
	// with the projection, in one read (one round trip less on an object
	// store), and drop those the projection does not hold.
	var arrs []arrow.Array
	if eager && len(preds) > 0 {
		fields := slices.Clone(proj.Fields)
		pos := make([]int, len(preds))
		for i, p := range preds {
			if !plain && p.field.Type.ID() == arrow.DICTIONARY {
				pos = nil
				break
			}
			pos[i] = slices.IndexFunc(fields, func(f *schema.Field) bool { return f.ID == p.field.ID })
			if pos[i] < 0 {
				pos[i] = len(fields)
				fields = append(fields, p.field)
			}
		}
		if pos != nil {
			all, err := d.readFragmentWith(ctx, frag, fields, s, e, plain)
			if err != nil {
				return nil, err
			}
			for i, p := range preds {
				p.apply(all[pos[i]], keep)
			}
			releaseAll(all[len(proj.Fields):])
			arrs, preds = all[:len(proj.Fields):len(proj.Fields)], nil
		}
	}
	if len(preds) > 0 {
		cols := make([]*schema.Field, len(preds))
		for i, p := range preds {
			cols[i] = p.field
		}
		arrs, err := d.readFragmentWith(ctx, frag, cols, s, e, true)
		if err != nil {
			return nil, err
		}
		for i, p := range preds {
			p.apply(arrs[i], keep)
			arrs[i].Release()
		}
	}
	// Offset and limit count matching rows only.
	matched := 0
	for i := range keep {
		if !keep[i] {
			continue
		}
		switch {
		case st.offset > 0:
			st.offset--
			keep[i] = false
		case st.remaining == 0:
			keep[i] = false
		default:
			matched++
			if st.remaining > 0 {
				st.remaining--
			}
		}
	}
	if matched == 0 {
		releaseAll(arrs)
		return nil, nil
	}
	if arrs == nil {
		var err error
		if arrs, err = d.readFragmentWith(ctx, frag, proj.Fields, s, e, plain); err != nil {
			return nil, err
		}
	}
	if st.withAddr {
		b := array.NewUint64Builder(memory.DefaultAllocator)
		b.Reserve(n)
		for i := 0; i < n; i++ {
			b.UnsafeAppend(frag.GetId()<<32 | uint64(s) + uint64(i))
		}
		arrs = append(arrs, b.NewArray())
	}
	rec := array.NewRecordBatch(st.out, arrs, int64(n))
	for _, a := range arrs {
		a.Release()
	}
	if matched == n {
		return rec, nil
	}
	defer rec.Release()
	mb := array.NewBooleanBuilder(memory.DefaultAllocator)
	mb.AppendValues(keep, nil)
	mask := mb.NewArray()
	defer mask.Release()
	filtered, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("lance/table: filter: %w", err)
	}
	return filtered, nil
}

// readFragment reads rows [s, e) of the given top-level fields of a
// fragment. A field no data file of the fragment holds reads as null (the
// column was added after the fragment was written).
func (d *Dataset) readFragment(ctx context.Context, frag *pb.DataFragment, fields []*schema.Field, s, e int64) ([]arrow.Array, error) {
	return d.readFragmentWith(ctx, frag, fields, s, e, d.plainDicts)
}

// readFragmentWith is readFragment; with plain, dictionary-typed fields
// come back as plain arrays of their value type.
func (d *Dataset) readFragmentWith(ctx context.Context, frag *pb.DataFragment, fields []*schema.Field, s, e int64, plain bool) ([]arrow.Array, error) {
	out := make([]arrow.Array, len(fields))
	type want struct {
		ids []int32
		pos []int
	}
	perFile := make([]want, len(frag.GetFiles()))
	for i, f := range fields {
		fi := slices.IndexFunc(frag.GetFiles(), func(df *pb.DataFile) bool { return slices.Contains(df.GetFields(), f.ID) })
		if fi < 0 {
			out[i] = array.MakeArrayOfNull(memory.DefaultAllocator, outputType(f.Type, plain), int(e-s))
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
			releaseAll(out)
			return nil, err
		}
		rec, err := r.ReadWith(ctx, w.ids, s, e, file.ReadOptions{PlainDictionaries: plain})
		if err != nil {
			releaseAll(out)
			return nil, fmt.Errorf("lance/table: fragment %d file %s: %w", frag.GetId(), frag.GetFiles()[fi].GetPath(), err)
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

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

func (d *Dataset) openFile(ctx context.Context, df *pb.DataFile) (*file.Reader, error) {
	key := dataDir + df.GetPath()
	if r, ok := d.files.reader(d.store, key); ok {
		return r, nil
	}
	size := int64(df.GetFileSizeBytes())
	var tail []byte
	if size == 0 {
		// A manifest without the size (Lance writes it only sometimes):
		// learn it with the metadata, in one read of the file's tail.
		var (
			info objstore.ObjectInfo
			err  error
		)
		tail, info, err = objstore.GetTail(ctx, d.store, key, file.TailReadSize)
		if err != nil {
			return nil, fmt.Errorf("lance/table: data file %s: %w", key, err)
		}
		size = info.Size
	}
	r, err := d.files.fileIO().OpenTail(ctx, HeldSource(d.store, key), size, tail)
	if err != nil {
		return nil, fmt.Errorf("lance/table: open data file %s: %w", key, err)
	}
	d.files.putReader(d.store, key, r)
	return r, nil
}

// takeGap is the most rows Take reads past to keep rows in one range read.
const takeGap = 32

// Take returns the given rows, in the order given, with the named columns
// (nil means all). Addresses must name live rows of this version.
func (d *Dataset) Take(ctx context.Context, addrs []RowAddr, columns []string) (arrow.RecordBatch, error) {
	proj, out, err := d.project(columns, d.plainDicts, false)
	if err != nil {
		return nil, err
	}
	frags := make(map[uint64]*pb.DataFragment, len(d.Fragments()))
	for _, f := range d.Fragments() {
		frags[f.GetId()] = f
	}
	parts := make([][]arrow.Array, len(proj.Fields))
	for i := range parts {
		parts[i] = make([]arrow.Array, len(addrs))
	}
	defer func() {
		for _, p := range parts {
			releaseAll(p)
		}
	}()
	// Rows close together in a fragment are read as one range (a read per
	// column, not per row and column): a page of rows listed in key order
	// is mostly a few runs when keys follow insertion order (UUIDv7 ids).
	order := make([]int, len(addrs))
	for i := range order {
		order[i] = i
		a := addrs[i]
		if f, ok := frags[a.Fragment]; !ok || uint64(a.Offset) >= f.GetPhysicalRows() {
			return nil, fmt.Errorf("lance/table: take: no row at fragment %d offset %d in version %d", a.Fragment, a.Offset, d.Version())
		}
	}
	slices.SortFunc(order, func(x, y int) int { return addrs[x].Compare(addrs[y]) })
	for i := 0; i < len(order); {
		first := addrs[order[i]]
		j := i + 1
		for j < len(order) && addrs[order[j]].Fragment == first.Fragment && addrs[order[j]].Offset-addrs[order[j-1]].Offset <= takeGap {
			j++
		}
		s, e := int64(first.Offset), int64(addrs[order[j-1]].Offset)+1
		arrs, err := d.readFragment(ctx, frags[first.Fragment], proj.Fields, s, e)
		if err != nil {
			return nil, err
		}
		for c, arr := range arrs {
			for _, k := range order[i:j] {
				o := int64(addrs[k].Offset) - s
				parts[c][k] = array.NewSlice(arr, o, o+1)
			}
			arr.Release()
		}
		i = j
	}
	cols := make([]arrow.Array, len(proj.Fields))
	for i, f := range proj.Fields {
		if len(parts[i]) == 0 {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, outputType(f.Type, d.plainDicts), 0)
			continue
		}
		c, err := array.Concatenate(parts[i], memory.DefaultAllocator)
		if err != nil {
			releaseAll(cols)
			return nil, fmt.Errorf("lance/table: take: %w", err)
		}
		cols[i] = c
	}
	rec := array.NewRecordBatch(out, cols, int64(len(addrs)))
	releaseAll(cols)
	return rec, nil
}

type predicate struct {
	field  *schema.Field
	str    string
	b      bool
	set    map[string]struct{}
	negate bool
}

func (d *Dataset) compilePredicates(where []Eq, in []In) ([]predicate, error) {
	out := make([]predicate, 0, len(where)+len(in))
	for _, w := range in {
		f := d.schema.Field(w.Column)
		if f == nil {
			return nil, fmt.Errorf("lance/table: filter on unknown column %q", w.Column)
		}
		if !isStringType(f.Type) {
			return nil, fmt.Errorf("lance/table: set filter on %q: only string columns, it is %s", w.Column, f.Type)
		}
		out = append(out, predicate{field: f, set: w.Values, negate: w.Negate})
	}
	for _, w := range where {
		f := d.schema.Field(w.Column)
		if f == nil {
			return nil, fmt.Errorf("lance/table: filter on unknown column %q", w.Column)
		}
		p := predicate{field: f}
		switch f.Type.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.DICTIONARY:
			if !isStringType(f.Type) {
				return nil, fmt.Errorf("lance/table: filter on %q: only string and bool columns can be filtered, it is %s", w.Column, f.Type)
			}
			s, ok := w.Value.(string)
			if !ok {
				return nil, fmt.Errorf("lance/table: filter on %q needs a string value, got %T", w.Column, w.Value)
			}
			p.str = s
		case arrow.BOOL:
			b, ok := w.Value.(bool)
			if !ok {
				return nil, fmt.Errorf("lance/table: filter on %q needs a bool value, got %T", w.Column, w.Value)
			}
			p.b = b
		default:
			return nil, fmt.Errorf("lance/table: filter on %q: only string and bool columns can be filtered, it is %s", w.Column, f.Type)
		}
		out = append(out, p)
	}
	return out, nil
}

// isStringType reports whether string predicates apply to columns of type
// t: utf8, large_utf8, or a dictionary of either.
func isStringType(t arrow.DataType) bool {
	if d, ok := t.(*arrow.DictionaryType); ok {
		t = d.ValueType
	}
	return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING
}

// StringAt returns the value of row i of a string or dictionary-of-string
// array, with ok false for a null (a null key or a null value); ok false
// from StringAt itself means arr is neither.
func StringAt(arr arrow.Array) (func(i int) (string, bool), bool) {
	type strArr interface {
		IsNull(int) bool
		Value(int) string
	}
	if d, ok := arr.(*array.Dictionary); ok {
		vals, ok := d.Dictionary().(strArr)
		if !ok {
			return nil, false
		}
		return func(i int) (string, bool) {
			if d.IsNull(i) {
				return "", false
			}
			j := d.GetValueIndex(i)
			if vals.IsNull(j) {
				return "", false
			}
			return vals.Value(j), true
		}, true
	}
	str, ok := arr.(strArr)
	if !ok {
		return nil, false
	}
	return func(i int) (string, bool) {
		if str.IsNull(i) {
			return "", false
		}
		return str.Value(i), true
	}, true
}

// apply clears keep[i] for rows where the predicate does not hold.
func (p predicate) apply(arr arrow.Array, keep []bool) {
	if p.set != nil || p.negate {
		at, ok := StringAt(arr)
		for i := range keep {
			if !keep[i] {
				continue
			}
			in := false
			if ok {
				if v, valid := at(i); valid {
					_, in = p.set[v]
				}
			}
			keep[i] = in != p.negate
		}
		return
	}
	switch a := arr.(type) {
	case *array.Dictionary:
		at, ok := StringAt(a)
		for i := range keep {
			if !keep[i] {
				continue
			}
			v, valid := "", false
			if ok {
				v, valid = at(i)
			}
			keep[i] = valid && v == p.str
		}
	case *array.String:
		for i := range keep {
			if keep[i] && (a.IsNull(i) || a.Value(i) != p.str) {
				keep[i] = false
			}
		}
	case *array.LargeString:
		for i := range keep {
			if keep[i] && (a.IsNull(i) || a.Value(i) != p.str) {
				keep[i] = false
			}
		}
	case *array.Boolean:
		for i := range keep {
			if keep[i] && (a.IsNull(i) || a.Value(i) != p.b) {
				keep[i] = false
			}
		}
	default:
		for i := range keep {
			keep[i] = false
		}
	}
}

// TakePlain is Take with dictionary-typed columns returned as plain arrays
// of their value type: Take's dictionary columns can hold only as many
// distinct values as their keys address (128 for int8).
func (d *Dataset) TakePlain(ctx context.Context, addrs []RowAddr, columns []string) (arrow.RecordBatch, error) {
	v := *d
	v.plainDicts = true
	return v.Take(ctx, addrs, columns)
}

// outputType is the type a read returns for a column of type t.
func outputType(t arrow.DataType, plain bool) arrow.DataType {
	if d, ok := t.(*arrow.DictionaryType); ok && plain {
		return d.ValueType
	}
	return t
}
