package faults

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestCheckFindsEveryKindOfDamage: the final check counts a lost id, an id
// listed twice, an id showing an older write, a row never sent; it allows
// an unacknowledged id and a write whose outcome the client never learnt.
func TestCheckFindsEveryKindOfDamage(t *testing.T) {
	w := &writer{g: 0}
	rng := rand.New(rand.NewPCG(1, 1))
	idx := w.pick(rng, 6, 0) // ids 0..5, write 1
	w.settle(idx, 1, true, true)
	w.settle([]int{1}, 2, true, false)  // id 1: write 2 acknowledged
	w.settle([]int{2}, 3, false, false) // id 2: write 3 failed, outcome unknown
	w.settle([]int{3}, 4, true, false)  // id 3: write 4 acknowledged, but the row shows write 1
	more := w.pick(rng, 1, 0)           // id 6: sent, never acknowledged
	w.settle(more, 5, false, false)
	row := func(i int, seq uint64) string { return content(idOf(0, i), seq, 40) }
	rows := map[string][]string{
		idOf(0, 0): {row(0, 1)},
		idOf(0, 1): {row(1, 2)},
		idOf(0, 2): {row(2, 3)},            // the failed write landed: allowed
		idOf(0, 3): {row(3, 1)},            // an older write: wrong
		idOf(0, 4): {row(4, 1), row(4, 1)}, // twice
		// id 5 is lost
		idOf(0, 6): {row(6, 5)}, // unacknowledged, present: allowed
		idOf(0, 9): {row(9, 1)}, // never sent
		"other":    {"x"},       // not ours at all
	}
	got := check([]*writer{w}, rows)
	want := tally{rows: 9, readable: 5, lost: 1, duplicated: 1, wrong: 1, phantom: 2, unacked: 1}
	ex := got.examples
	got.examples = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("check = %+v\nwant    %+v", got, want)
	}
	for _, k := range []string{"lost", "duplicated", "wrong_content", "phantom"} {
		if len(ex[k]) == 0 {
			t.Errorf("no example of %s: %v", k, ex)
		}
	}
	if n := acknowledged([]*writer{w}); n != 6 {
		t.Fatalf("acknowledged = %d, want 6", n)
	}
}

func TestIDsAndContentRoundTrip(t *testing.T) {
	id := idOf(7, 1234)
	if g, i, ok := parseID(id); !ok || g != 7 || i != 1234 {
		t.Fatalf("parseID(%q) = %d, %d, %v", id, g, i, ok)
	}
	for _, bad := range []string{"", "a07-12", "b07-0001234", "a7x-0001234"} {
		if _, _, ok := parseID(bad); ok {
			t.Errorf("parseID(%q) ok", bad)
		}
	}
	c := content(id, 99, 100)
	if len(c) != 100 {
		t.Fatalf("content is %d bytes, want 100", len(c))
	}
	if seq, ok := seqOf(c); !ok || seq != 99 {
		t.Fatalf("seqOf(%q) = %d, %v", c, seq, ok)
	}
}
