package rollout

import (
	"context"
	"fmt"
	"slices"

	"github.com/lance-context/lance-context/lance/table"
)

// The early walk: a page of all whose pending generations are not cached
// walks the base on a view of the base alone while they are read (see
// listByID), and drops what the pending rows hide once they are known.

// earlyBase is a pageBase run on a view of the base alone, started before
// the pending rows are known; with take, it also takes the rows it chose, so
// that the page's base rows are read in the same round trip as the pending
// generations (most of them stay on the page: pending rows displace only
// those above the pending ids that fall among them).
type earlyBase struct {
	done   chan struct{}
	h      idHeap
	k      int
	verify *Filter
	err    error
	rows   map[table.RowAddr]Record // the rows taken ahead, by address
}

func (s *Store) startPageBase(ctx context.Context, v *view, o ListOptions, k int, take bool) *earlyBase {
	e := &earlyBase{done: make(chan struct{}), h: make(idHeap, 0, k), k: k}
	go func() {
		defer close(e.done)
		var rows map[table.RowAddr]Record
		if e.verify, rows, e.err = s.pageBase(ctx, v, o, &e.h, k); e.err != nil || !take || e.h.Len() == 0 {
			return
		}
		if rows != nil {
			e.rows = rows // read whole by the scan
			return
		}
		addrs := make([]table.RowAddr, len(e.h))
		for i, c := range e.h {
			addrs[i] = c.addr
		}
		// In address order TakeRows does not reorder (the rows are kept by address).
		slices.SortFunc(addrs, table.RowAddr.Compare)
		b, err := v.base().TakeRows(ctx, addrs, baseColumns(v.base(), listColumns))
		if err != nil {
			e.err = err
			return
		}
		defer b.Release()
		if e.verify != nil {
			if err := checkFilter(b, *e.verify); err != nil {
				e.err = fmt.Errorf("rollout: store %s: %w", s.name, err)
				return
			}
		}
		rs, err := recordsFromBatch(b)
		if err != nil {
			e.err = err
			return
		}
		e.rows = make(map[table.RowAddr]Record, len(rs))
		for i := range rs {
			e.rows[addrs[i]] = rs[i]
		}
	}()
	return e
}

func (e *earlyBase) wait() (*Filter, error) {
	<-e.done
	return e.verify, e.err
}

// taken returns the row at addr if it was taken ahead (e may be nil).
func (e *earlyBase) taken(addr table.RowAddr) (Record, bool) {
	if e == nil {
		return Record{}, false
	}
	r, ok := e.rows[addr]
	return r, ok
}

// merge offers to h the early walk's rows that v shows. It reports
// whether h now holds the page: the early walk kept the k smallest base
// ids, up to its largest t; without the hidden ones they are every base
// row v shows up to t, so h is exact unless the walk was full and h is
// short of k or reaches above t (base rows above t may belong).
func (e *earlyBase) merge(h *idHeap, v *view, k int) bool {
	full := e.h.Len() == e.k
	var t string
	if full {
		t = e.h[0].id
	}
	for _, c := range e.h {
		if !v.hides(c.id) {
			h.offer(c, k)
		}
	}
	return !full || (h.Len() == k && (*h)[0].id <= t)
}
