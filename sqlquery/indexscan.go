//go:build cgo

package sqlquery

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
)

// finder looks keys up in the base tables' BTree indexes (the ones the
// stores build and LanceDB reads) for the engine's scans. It shares the
// process-wide index page cache with the stores' own lookups.
var finder = index.NewFinder(0)

// indexBase decides whether the scan reads through a BTree index: a scan
// that plainBase may read directly, with a string equality hint on a
// column a BTree index of the base table covers (WHERE rollout_id = 'r5').
// The index gives the rows holding the key in the fragments it covers;
// the others are scanned with the predicate. It returns the base table and
// the equality predicates; nil when the scan reads otherwise.
func (s *scanSource) indexBase() (*table.Dataset, []table.Eq) {
	var eqs []table.Eq
	for _, h := range s.hints {
		if h.IsStr && h.Op == "=" {
			eqs = append(eqs, table.Eq{Column: h.Column, Value: h.Str})
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
		f := d.Schema().Field(eq.Column)
		if f == nil {
			continue
		}
		t := f.ArrowField().Type
		if dt, ok := t.(*arrow.DictionaryType); ok {
			t = dt.ValueType
		}
		if t.ID() != arrow.STRING && t.ID() != arrow.LARGE_STRING {
			continue // the index serves string keys only
		}
		if ix, err := index.BTreeIndexes(d, eq.Column); err == nil && len(ix) > 0 {
			return d, eqs
		}
	}
	return nil, nil
}

// scanIndexed streams the base table's rows matching eqs, found through
// the index where it covers the fragments, to DuckDB, with the other hints
// applied as in any scan. Only the rows read count as scanned rows.
func (s *scanSource) scanIndexed(d *table.Dataset, eqs []table.Eq) error {
	cols := s.projected
	if len(cols) == 0 {
		cols = []string{eqs[0].Column} // count(*): any column; FillChunk reads none
	}
	return d.Scan(s.q.ctx, table.ScanOptions{Columns: cols, Where: eqs, Index: finder, PlainDictionaries: true, BatchRows: 32 << 10},
		func(b arrow.RecordBatch) error {
			s.read(b.NumRows())
			sb := scanBatch{rec: b, sel: selection(s.hints, s.projected, b)}
			if err := s.count(int64(sb.len())); err != nil {
				return err
			}
			return s.push(sb)
		})
}
