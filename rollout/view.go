package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/wal"
)

// view is a store as one read sees it at one snapshot: the base table at
// its version, and the pending rows (the generations above the base's
// watermarks, one row per id: the newest, by wal's Newest rule) that win
// over it. It owns the one rule of the union, newest write wins across the
// tiers:
//
//	a pending row hides every base row of its id.
//
// Every read of rows (get, the pages of every list strategy, trajectory,
// scan, export, a payload, a sample) reads the base through the view
// (scanBase, ascendBase, getRow, hiddenBaseRows), which applies the rule;
// no reader tests a pending id itself. A view of the base alone
// (fragments, a checkout, BaseTable, or baseOnly while the pending rows
// are being read) hides nothing.
//
// The pending rows are read once, on first use (pending): reads that
// overlap the base's round trips with the generations' start a base walk
// on baseOnly first, and drop what it found through hides afterwards.
type view struct {
	s    *Store
	snap *snapshot

	read   bool                // pending rows read
	rows   []walRow            // the winning pending rows, oldest generation first
	hidden map[string]struct{} // their ids: the base rows they hide
}

func (s *Store) newView(snap *snapshot) *view { return &view{s: s, snap: snap} }

// base is the view's base table.
func (v *view) base() *table.Dataset { return v.snap.base }

// baseOnly is a view of the base table alone: it hides nothing. A read
// that walks the base before the pending rows are known uses it, then
// drops what it found through v.hides.
func (v *view) baseOnly() *view {
	return &view{s: v.s, snap: &snapshot{base: v.snap.base}, read: true}
}

// pending reads the winning pending rows (once) and returns them, oldest
// generation first and in row order within one.
func (v *view) pending(ctx context.Context) ([]walRow, error) {
	if !v.read {
		set, err := v.s.walRows(ctx, v.snap)
		if err != nil {
			return nil, err
		}
		v.rows, v.hidden, v.read = set.rows, set.ids, true
	}
	return v.rows, nil
}

// hiddenIDs is the set of ids whose base rows the view hides (nil until
// pending has read them, and for a view of the base alone).
func (v *view) hiddenIDs() map[string]struct{} { return v.hidden }

// hides reports whether the view hides the base rows of id: a pending row
// holds a newer write of it. This is the rule; everything else applies it.
func (v *view) hides(id string) bool {
	_, ok := v.hidden[id]
	return ok
}

// pendingCached reports whether every pending generation of the view is
// decoded in the generation cache (reading them costs no request).
func (v *view) pendingCached() bool { return v.s.pendingCached(v.snap) }

// scanBase scans the base rows the view shows: live, and not hidden (the
// hidden ids are a negated In of the scan, so the table drops them before
// reading other columns).
func (v *view) scanBase(ctx context.Context, opts table.ScanOptions, fn func(arrow.RecordBatch) error) error {
	if len(v.hidden) > 0 {
		opts.In = append(opts.In, table.In{Column: ColID, Values: v.hidden, Negate: true})
	}
	return v.base().Scan(ctx, opts, fn)
}

// ascendBase walks the base rows the view shows through the id index, in
// id order above after: live (deletion files checked, one read per
// fragment met), not hidden, and, when keep is not nil, at an address in
// keep. stop is asked first for every entry (before any deletion file is
// read for it): true ends the walk (every later id is larger). fn takes
// each row; false ends the walk. It returns the fragments the index
// covers (nil when none: the caller scans).
func (v *view) ascendBase(ctx context.Context, after string, keep *index.AddrSet, stop func(id string) bool, fn func(id string, addr table.RowAddr) bool) (*roaring.Bitmap, error) {
	base := v.base()
	deleted := map[uint64]*roaring.Bitmap{}
	var werr error
	visit := func(id string, addr uint64) bool {
		if stop(id) {
			return false
		}
		frag, off := addr>>32, uint32(addr)
		del, ok := deleted[frag]
		if !ok {
			if del, werr = base.DeletedRows(ctx, frag); werr != nil {
				return false
			}
			deleted[frag] = del
		}
		if del != nil && del.Contains(off) {
			return true
		}
		if v.hides(id) {
			return true
		}
		return fn(id, table.RowAddr{Fragment: frag, Offset: off})
	}
	var covered *roaring.Bitmap
	var err error
	if keep == nil {
		covered, err = v.s.opts.Indexes.Ascend(ctx, base, ColID, after, visit)
	} else {
		covered, err = v.s.opts.Indexes.AscendEach(ctx, base, ColID, after, keep, visit)
	}
	if werr != nil {
		return nil, werr
	}
	return covered, err
}

// hiddenBaseIDs returns, sorted, the ids of the live base rows in the
// fragments of in that the id index covers and the view hides (found
// through the index: a deep offset counts them out of the index's ranks).
func (v *view) hiddenBaseIDs(ctx context.Context, in *roaring.Bitmap) ([]string, error) {
	if len(v.hidden) == 0 {
		return nil, nil
	}
	base := v.base()
	ids := make([]string, 0, len(v.hidden))
	for id := range v.hidden {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	covered, found, err := v.s.opts.Indexes.Find(ctx, base, ColID, ids)
	if err != nil {
		return nil, err
	}
	var addrs []table.RowAddr
	for frag, offs := range found {
		if !covered.Contains(uint32(frag)) || !in.Contains(uint32(frag)) {
			continue
		}
		del, err := base.DeletedRows(ctx, frag)
		if err != nil {
			return nil, err
		}
		for _, off := range offs {
			if del == nil || !del.Contains(off) {
				addrs = append(addrs, table.RowAddr{Fragment: frag, Offset: off})
			}
		}
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	b, err := base.TakePlain(ctx, addrs, []string{ColID})
	if err != nil {
		return nil, err
	}
	defer b.Release()
	col, ok := b.Column(0).(interface{ Value(int) string })
	if !ok {
		return nil, fmt.Errorf("rollout: store %s: column id is %s, want a string column", v.s.name, b.Column(0).DataType())
	}
	out := make([]string, len(addrs))
	for i := range addrs {
		out[i] = strings.Clone(col.Value(i))
	}
	slices.Sort(out)
	return out, nil
}

// hiddenBaseRows returns the addresses (fragment<<32 | offset) of the live
// base rows the rows of gens hide: every base row of an id they write,
// found through the id index. Over all of the view's pending generations
// it is every base row the view hides; the sampler asks one generation at
// a time and keeps each answer per base version (sample_cache.go).
func (v *view) hiddenBaseRows(ctx context.Context, gens ...*wal.LoadedGeneration) ([]uint64, error) {
	n := 0
	for _, g := range gens {
		n += g.NumRows()
	}
	ids := make(map[string]struct{}, n)
	for _, g := range gens {
		for i := 0; i < g.NumRows(); i++ {
			ids[g.Key(i)] = struct{}{}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var out []uint64
	err := v.base().Scan(ctx, table.ScanOptions{Columns: []string{ColID}, In: []table.In{{Column: ColID, Values: ids}}, Index: v.s.finder(), WithRowAddr: true, PlainDictionaries: true}, func(b arrow.RecordBatch) error {
		ai := b.Schema().FieldIndices(table.RowAddrColumn)
		if len(ai) != 1 {
			return fmt.Errorf("rollout: store %s: scan batch without %s", v.s.name, table.RowAddrColumn)
		}
		addrs, ok := b.Column(ai[0]).(*array.Uint64)
		if !ok {
			return fmt.Errorf("rollout: store %s: %s is %s, not uint64", v.s.name, table.RowAddrColumn, b.Column(ai[0]).DataType())
		}
		out = append(out, addrs.Uint64Values()...)
		return nil
	})
	return out, err
}

// get returns the record of id the view shows (getRow, decoded).
func (v *view) get(ctx context.Context, id string) (*Record, error) {
	b, err := v.getRow(ctx, id, listColumns)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	rs, err := recordsFromBatch(b)
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// getRow returns the row of id the view shows, as a one-row batch: its
// pending row if it has one, else its base row; ErrNotFound when neither
// tier holds it. The batch holds the columns of cols that the row's file
// has, found by name (a pending row from the generation cache holds them
// all, and more). Release it.
func (v *view) getRow(ctx context.Context, id string, cols []string) (arrow.RecordBatch, error) {
	if !v.pendingCached() {
		// The pending generations must be read first (a cold process, or
		// new generations): look the id up in the base at the same time,
		// so the base's reads do not wait for theirs. The base's answer is
		// used only when no pending generation holds the id.
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			b   arrow.RecordBatch
			err error
		}
		ch := make(chan result, 1)
		go func() {
			b, err := v.getBase(bctx, id, cols)
			ch <- result{b, err}
		}()
		b, ok, err := v.getPending(ctx, id, cols)
		if err != nil || ok {
			cancel()
			if r := <-ch; r.b != nil { // no read of this call outlives it
				r.b.Release()
			}
			return b, err
		}
		r := <-ch
		return r.b, r.err
	}
	if b, ok, err := v.getPending(ctx, id, cols); err != nil || ok {
		return b, err
	}
	return v.getBase(ctx, id, cols)
}

// getPending looks id up in the pending generations (newest first) and
// returns its row: from the generation cache when it holds every column
// of cols, else (the payload columns, which it never holds) read from the
// generation's file.
func (v *view) getPending(ctx context.Context, id string, cols []string) (arrow.RecordBatch, bool, error) {
	w, ok, err := v.s.findPending(ctx, v.snap, id)
	if err != nil || !ok {
		return nil, false, err
	}
	if rec := w.walRow.gen.Rec; cached(rec.Schema(), cols) {
		return rec.NewSlice(int64(w.row), int64(w.row)+1), true, nil
	}
	r, err := v.s.opts.Cache.reader(ctx, v.s.root, w.walRow.gen)
	if err != nil {
		return nil, false, err
	}
	var ids []int32
	for _, c := range cols {
		if f := r.Schema().Field(c); f != nil {
			ids = append(ids, f.ID)
		}
	}
	b, err := r.Read(ctx, ids, int64(w.row), int64(w.row)+1)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// cached reports whether a batch of schema sc holds every column of cols.
func cached(sc *arrow.Schema, cols []string) bool {
	for _, c := range cols {
		if !sc.HasField(c) {
			return false
		}
	}
	return true
}

// getBase looks id up in the base table alone (getRow has ruled out a
// pending row first); ErrNotFound when it is not there.
func (v *view) getBase(ctx context.Context, id string, cols []string) (arrow.RecordBatch, error) {
	base := v.base()
	var out arrow.RecordBatch
	err := base.Scan(ctx, table.ScanOptions{Columns: baseColumns(base, cols), Where: []table.Eq{{Column: ColID, Value: id}}, Limit: 1, Index: v.s.finder(), PlainDictionaries: true}, func(b arrow.RecordBatch) error {
		switch {
		case out != nil || b.NumRows() == 0:
		case b.NumRows() == 1: // Limit 1: the usual batch, kept as it is
			b.Retain()
			out = b
		default:
			out = b.NewSlice(0, 1)
		}
		return nil
	})
	if err != nil {
		if out != nil {
			out.Release()
		}
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("%w: record %q", ErrNotFound, id)
	}
	return out, nil
}
