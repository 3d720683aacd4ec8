//go:build cgo

package sqlquery

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/rollout"
)

// indexBase decides whether the scan reads through a BTree index: a scan
// that plainBase may read directly, with a string equality hint on a
// column a BTree index of the base table covers (WHERE rollout_id = 'r5').
// The index (the store's own lookup, which LanceDB's indexes serve too)
// gives the rows holding the key in the fragments it covers; the others
// are scanned with the predicate. It returns the base table and the
// equalities; nil when the scan reads otherwise.
func (s *scanSource) indexBase() (*rollout.BaseTable, []rollout.Filter) {
	var eqs []rollout.Filter
	for _, h := range s.hints {
		if h.IsStr && h.Op == "=" {
			eqs = append(eqs, rollout.Filter{Column: h.Column, Value: h.Str})
		}
	}
	if len(eqs) == 0 {
		return nil, nil
	}
	d := s.plainBase()
	if d == nil {
		return nil, nil
	}
	for _, eq := range eqs {
		c, ok := d.Column(eq.Column)
		if !ok {
			continue
		}
		if c.Type.ID() != arrow.STRING && c.Type.ID() != arrow.LARGE_STRING {
			continue // the index serves string keys only
		}
		if d.Indexed(eq.Column) {
			return d, eqs
		}
	}
	return nil, nil
}

// scanIndexed streams the base table's rows matching eqs, found through
// the index where it covers the fragments, to DuckDB, with the other hints
// applied as in any scan. Only the rows read count as scanned rows.
func (s *scanSource) scanIndexed(d *rollout.BaseTable, eqs []rollout.Filter) error {
	cols := s.projected
	if len(cols) == 0 {
		cols = []string{eqs[0].Column} // count(*): any column; FillChunk reads none
	}
	return d.Scan(s.q.ctx, rollout.BaseScan{Columns: cols, Equal: eqs, BatchRows: 32 << 10},
		func(b arrow.RecordBatch) error {
			s.read(b.NumRows())
			sb := scanBatch{rec: b, sel: selection(s.hints, s.projected, b)}
			if err := s.count(int64(sb.len())); err != nil {
				return err
			}
			return s.push(sb)
		})
}
