//go:build cgo

package sqlquery

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/rollout"
)

// lateBase decides whether the scan materializes late: it reads the hinted
// columns of every row first and the other projected columns only for the
// rows the hints keep (a late BaseScan), so a selective filter never decodes
// the strings of the rows it drops; with a top-N bound, only rows that can
// still be in the result are taken. It applies to a fragments scan (the
// base table only), or an all scan of a store with no pending generation,
// whose hints and sort column name some but not all projected columns,
// when the base table holds every projected column in the scan's type (an
// older or reference table reads through the store's own scan, which
// converts). It returns the base table at the version the store's own scan
// would read, and the hinted columns; nil when the scan reads normally.
func (s *scanSource) lateBase() (*rollout.BaseTable, []string) {
	if len(s.hints) == 0 && s.top == nil {
		return nil, nil
	}
	var filter []string
	for _, h := range s.hints {
		if slices.Contains(s.projected, h.Column) && !slices.Contains(filter, h.Column) {
			filter = append(filter, h.Column)
		}
	}
	if s.top != nil && slices.Contains(s.projected, s.top.Column) && !slices.Contains(filter, s.top.Column) {
		filter = append(filter, s.top.Column)
	}
	if len(filter) == 0 || len(filter) == len(s.projected) {
		return nil, nil
	}
	d := s.plainBase()
	if d == nil {
		return nil, nil
	}
	return d, filter
}

// plainBase returns the base table the store's own scan would read, when
// the scan may read it directly: a fragments scan, or an all scan of a
// store with no pending generation, of a base table holding every
// projected column in the scan's type (an older or reference table reads
// through the store's own scan, which converts). nil otherwise.
func (s *scanSource) plainBase() *rollout.BaseTable {
	// all is the base table alone when no generation is pending: checked
	// on the statistics read at bind, whose base version the base opened
	// below must match (a merge since then falls back).
	var wantVersion uint64
	switch s.source {
	case rollout.SourceFragments, "":
	case rollout.SourceAll:
		if s.stats == nil || s.stats.PendingGenerations != 0 {
			return nil
		}
		wantVersion = s.stats.Version
	default:
		return nil
	}
	bs, ok := s.table.(baseStore)
	if !ok {
		return nil
	}
	d, err := bs.OpenBase(s.q.ctx, 0)
	if err != nil || (wantVersion != 0 && d.Version() != wantVersion) {
		return nil // the store's own scan reports an error
	}
	for i, name := range s.projected {
		c, ok := d.Column(name)
		if !ok || !arrow.TypeEqual(c.Type, scanColumns[s.proj[i]].Type) {
			return nil
		}
	}
	return d
}

// scanLate streams the base table's rows the hints keep, and of those the
// rows that can be in the query's first N (topN), reading the hinted and
// sort columns first.
func (s *scanSource) scanLate(d *rollout.BaseTable, filter []string) error {
	var bound *topBound
	if s.top != nil {
		bound = &topBound{t: s.top}
	}
	return d.Scan(s.q.ctx, rollout.BaseScan{
		Filter: filter, Columns: s.projected, BatchRows: 32 << 10,
		Keep: func(b arrow.RecordBatch) ([]int, error) {
			s.read(b.NumRows())
			out := keptRows(s.hints, filter, b)
			if bound != nil {
				out = bound.prune(s.hints, filter, b, out)
			}
			if err := s.count(int64(len(out))); err != nil {
				return nil, err
			}
			return out, nil
		},
	}, func(b arrow.RecordBatch) error {
		return s.push(scanBatch{rec: b})
	})
}
