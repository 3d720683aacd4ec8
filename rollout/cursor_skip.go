package rollout

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/table"
)

// The deep offset: a page at a large offset starts from a cursor whose
// rank the id index gives (skipOffset), and counts only the rows after it.

// skipMinOffset is the smallest offset skipOffset turns into a cursor; a
// smaller one is cheaper to count through.
var skipMinOffset = 2048

// offsetSkips counts the listings skipOffset moved forward (tests check
// that the skip is exercised).
var offsetSkips atomic.Int64

// skipOffset returns o with After moved forward and Offset reduced by the
// rows in between, so that it names the same page: a deep offset then costs
// O(log n) index page reads instead of a walk over offset ids. It counts
// exactly the rows the listing counts: live base rows of the fragments the
// id index covers (Ranker), less the ones v hides, the rows of the other
// fragments v shows (scanned), plus the pending rows (source all; v has
// read them). When the index cannot rank exactly, o is returned as is.
func (s *Store) skipOffset(ctx context.Context, v *view, o ListOptions) (ListOptions, error) {
	base := v.base()
	if s.finder() == nil || !slices.Contains(s.indexColumns(), ColID) {
		return o, nil
	}
	rk, err := s.opts.Indexes.Ranker(ctx, base, ColID)
	if err != nil || rk == nil {
		return o, err
	}
	// Rows outside the ranked fragments, and WAL rows: sorted ids.
	var uncovered int64
	var others []string
	for _, f := range base.Fragments() {
		if !rk.Covered().Contains(uint32(f.GetId())) {
			uncovered += int64(f.GetPhysicalRows())
		}
	}
	if uncovered > maxSkipScan {
		return o, nil
	}
	if uncovered > 0 {
		frags := roaring.New()
		for _, f := range base.Fragments() {
			if !rk.Covered().Contains(uint32(f.GetId())) {
				frags.Add(uint32(f.GetId()))
			}
		}
		// The id column alone, the hidden ids dropped here (not by the
		// scan, which would read the column twice).
		opts := table.ScanOptions{Columns: []string{ColID}, Fragments: frags}
		err := base.Scan(ctx, opts, func(b arrow.RecordBatch) error {
			ids, ok := b.Column(0).(interface {
				Len() int
				Value(int) string
			})
			if !ok {
				return fmt.Errorf("rollout: store %s: column id is %s, want a string column", s.name, b.Column(0).DataType())
			}
			for i := 0; i < ids.Len(); i++ {
				if !v.hides(ids.Value(i)) {
					others = append(others, strings.Clone(ids.Value(i)))
				}
			}
			return nil
		})
		if err != nil {
			return o, err
		}
	}
	for _, r := range v.rows {
		others = append(others, r.id())
	}
	slices.Sort(others)
	// Base rows of ranked fragments the view hides are not listed: their
	// ids, sorted.
	hidden, err := v.hiddenBaseIDs(ctx, rk.Covered())
	if err != nil {
		return o, err
	}
	// upTo is the number of listed rows whose id is <= id.
	upTo := func(id string) (int64, error) {
		succ := id + "\x00" // the smallest string above id
		n, err := rk.Below(ctx, succ)
		if err != nil {
			return 0, err
		}
		n -= int64(sort.SearchStrings(hidden, succ))
		n += int64(sort.SearchStrings(others, succ))
		return n, nil
	}
	var before int64
	if o.After != "" {
		if before, err = upTo(o.After); err != nil {
			return o, err
		}
	}
	target := before + int64(o.Offset) // rows at or below the page's predecessor
	// The last pivot at or below target: binary search (upTo is monotone).
	pivots := rk.Pivots()
	lo, hi := sort.SearchStrings(pivots, o.After+"\x00"), len(pivots) // pivots above After
	best, bestN := "", int64(-1)
	var serr error
	i := sort.Search(hi-lo, func(i int) bool {
		if serr != nil {
			return true
		}
		n, err := upTo(pivots[lo+i])
		if err != nil {
			serr = err
			return true
		}
		if n <= target {
			return false
		}
		return true
	})
	if serr != nil {
		return o, serr
	}
	if i == 0 {
		return o, nil // no pivot between After and the page
	}
	best = pivots[lo+i-1]
	if bestN, err = upTo(best); err != nil {
		return o, err
	}
	o.After, o.Offset = best, int(target-bestN)
	offsetSkips.Add(1)
	return o, nil
}

// maxSkipScan bounds the rows of fragments no index covers that skipOffset
// reads to count them; beyond it the listing counts through as before.
const maxSkipScan = 1 << 20
