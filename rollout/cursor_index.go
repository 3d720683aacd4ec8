package rollout

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
)

// The index walks: a page's base rows in id order through the id index,
// unfiltered (ascendIndexed) or keeping the rows a key filter's index
// names (walkFiltered), both through view.ascendBase.

// ascendIndexed offers to h the base rows v shows above after, in id
// order, through the id index: it stops once h holds k ids below the next
// one, so it reads O(log n + k) index entries, not the id column. It
// returns the fragments the index covers (nil when it covers none: the
// caller scans).
func (s *Store) ascendIndexed(ctx context.Context, v *view, after string, h *idHeap, k int) (*roaring.Bitmap, error) {
	if s.finder() == nil || !slices.Contains(s.indexColumns(), ColID) {
		return nil, nil
	}
	return v.ascendBase(ctx, after, nil, h.full(k), func(id string, addr table.RowAddr) bool {
		h.offer(candidate{id: strings.Clone(id), addr: addr}, k)
		return true
	})
}

// full returns whether h holds k ids all below id (a walk in id order
// then ends: every later id is larger still).
func (h *idHeap) full(k int) func(id string) bool {
	return func(id string) bool { return h.Len() == k && id >= (*h)[0].id }
}

// walkFiltered offers to h the base rows v shows above after whose column
// f.Column holds f.Value, in id order, by walking the id index and keeping
// the rows the filter column's index names. A filtered page then costs
// O(k · rows/matches) index entries, which stays flat as the table grows,
// instead of reading the id of every matching row (O(matches)); it is
// used only when it is the cheaper of the two. It returns the fragments it
// answered for (nil: it did not walk, the caller scans as before), and
// when it did not walk, few: the filter's index covers every fragment and
// names at most fewMatchRows(k) rows (the scan may read them whole).
func (s *Store) walkFiltered(ctx context.Context, v *view, f Filter, after string, h *idHeap, k int) (walked *roaring.Bitmap, few bool, err error) {
	base := v.base()
	cols := s.indexColumns()
	if s.finder() == nil || !slices.Contains(cols, f.Column) {
		return nil, false, nil
	}
	if fd := base.Schema().Field(f.Column); fd == nil || !isStringField(fd.Type) {
		return nil, false, nil
	}
	coveredF, all, err := s.opts.Indexes.Addrs(ctx, base, f.Column, f.Value)
	if err != nil || coveredF == nil {
		return nil, false, err
	}
	few = len(all) <= fewMatchRows(k) && fragmentsOutside(base, coveredF).IsEmpty()
	if !slices.Contains(cols, ColID) {
		return nil, few, nil
	}
	byID, err := index.Covered(base, ColID)
	if err != nil || byID.IsEmpty() {
		return nil, few, err
	}
	both := roaring.And(byID, coveredF)
	var runs, indexed int64
	for _, fr := range base.Fragments() {
		if both.Contains(uint32(fr.GetId())) {
			indexed += int64(fr.GetPhysicalRows())
		}
	}
	// The matches of fragments both indexes cover, ascending.
	match := all[:0]
	lastFrag, lastIn := uint64(1<<63), false
	for _, a := range all {
		if frag := a >> 32; frag != lastFrag {
			lastFrag, lastIn = frag, both.Contains(uint32(frag))
		}
		if !lastIn {
			continue
		}
		if len(match) == 0 || a != match[len(match)-1]+1 {
			runs++
		}
		match = append(match, a)
	}
	matches := int64(len(match))
	if matches == 0 {
		return nil, few, nil // the scan answers from the index alone
	}
	// Expected entries walked for k matches, against the reads of the
	// matching rows (about one range read per run of consecutive rows and
	// column, worth ~walkEntriesPerRun entries of the walk).
	if walk := int64(k) * indexed / matches; walk > runs*walkEntriesPerRun {
		return nil, few, nil
	}
	_, err = v.ascendBase(ctx, after, index.NewAddrSet(match), h.full(k), func(id string, addr table.RowAddr) bool {
		h.offer(candidate{id: strings.Clone(id), addr: addr}, k)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	filteredWalks.Add(1)
	return both, false, nil
}

// walkEntriesPerRun is how many id index entries a walk reads for the cost
// of reading one run of matching rows (measured: a run costs two range
// reads and their decoding, an entry a map probe).
var walkEntriesPerRun int64 = 1000

// filteredWalks counts the listings walkFiltered answered (for tests).
var filteredWalks atomic.Int64

func isStringField(t arrow.DataType) bool {
	return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING
}
