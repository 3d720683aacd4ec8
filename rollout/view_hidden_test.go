package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// TestHiddenBaseRowsAreTheRowsOfHiddenIDs: the base rows hiddenBaseRows
// finds for the view's pending generations, together or one at a time
// (as the sampler asks), are exactly the live base rows whose id the view
// hides: a deleted base row of a rewritten id is not among them, nor is a
// row whose id no pending generation writes.
func TestHiddenBaseRowsAreTheRowsOfHiddenIDs(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", Options{}), "hid")
	appendFlush(t, s, recs("b", 300, "r"))
	mergeAll(t, s)
	appendFlush(t, s, recs("c", 100, "r"))
	mergeAll(t, s) // two fragments
	// b-007's base row deleted (a deletion file, as LanceDB's delete).
	d, err := table.Open(ctx, s.root)
	if err != nil {
		t.Fatal(err)
	}
	var del []table.RowAddr
	err = d.Scan(ctx, table.ScanOptions{Columns: []string{ColID}, Where: []table.Eq{{Column: ColID, Value: "b-007"}}, WithRowAddr: true}, func(b arrow.RecordBatch) error {
		for _, a := range b.Column(1).(*array.Uint64).Uint64Values() {
			del = append(del, table.RowAddr{Fragment: a >> 32, Offset: uint32(a)})
		}
		return nil
	})
	if err != nil || len(del) != 1 {
		t.Fatalf("find b-007: %v %v", del, err)
	}
	if _, err := table.DeleteRows(ctx, s.root, del, "id = 'b-007'"); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, append(recs("b", 300, "r")[5:9], recs("new", 3, "r")...)) // b-005..b-008: b-007 has no live base row
	appendFlush(t, s, append(recs("c", 100, "r")[90:92], recs("b", 300, "r")[6]))
	err = s.readView(ctx, true, readPlan{files: true}, func(v *view) error {
		if _, err := v.pending(ctx); err != nil {
			return err
		}
		gens, err := s.loadPending(ctx, v.snap)
		if err != nil {
			return err
		}
		if len(gens) != 2 {
			return fmt.Errorf("%d pending generations, want 2", len(gens))
		}
		// What the rule says: every live base row whose id the view hides.
		var want []uint64
		err = v.base().Scan(ctx, table.ScanOptions{Columns: []string{ColID}, WithRowAddr: true}, func(b arrow.RecordBatch) error {
			ids, addrs := b.Column(0).(*array.String), b.Column(1).(*array.Uint64)
			for i := range ids.Len() {
				if v.hides(ids.Value(i)) {
					want = append(want, addrs.Value(i))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		slices.Sort(want)
		if len(want) != 5 { // b-005, b-006, b-008, c-090, c-091
			return fmt.Errorf("%d hidden base rows by a scan, want 5", len(want))
		}
		all, err := v.hiddenBaseRows(ctx, gens...)
		if err != nil {
			return err
		}
		var each []uint64
		for _, g := range gens {
			rows, err := v.hiddenBaseRows(ctx, g)
			if err != nil {
				return err
			}
			each = append(each, rows...)
		}
		slices.Sort(all)
		slices.Sort(each)
		each = slices.Compact(each) // b-006 is written by both
		if !slices.Equal(all, want) || !slices.Equal(each, want) {
			return fmt.Errorf("hidden base rows %x (together), %x (one generation at a time), want %x", all, each, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
