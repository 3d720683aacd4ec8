package index

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortEntriesAgreesWithCmpEntry: the key-accelerated sort orders runs
// exactly as cmpEntry does, for values sharing long prefixes, values that
// are prefixes of others, NUL bytes, empty values and nulls.
func TestSortEntriesAgreesWithCmpEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 'a', 'b', 0xff}
	defer func(n int) { radixMin = n }(radixMin)
	for round := range 200 {
		// Half the rounds through the radix sort, half the comparison sort.
		radixMin = []int{2, 1 << 20}[round%2]
		prefix := []string{"", "ro-0000", "same-prefix-longer-than-eight-"}[round%3]
		es := make([]entry, 1+rng.IntN(300))
		if round%10 == 0 {
			es = make([]entry, 1+rng.IntN(20000))
		}
		for i := range es {
			if rng.IntN(20) == 0 {
				es[i] = entry{null: true, addr: uint64(rng.IntN(50))}
				continue
			}
			b := []byte(prefix)
			for range rng.IntN(12) {
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
			es[i] = entry{v: string(b), addr: uint64(rng.IntN(50))}
		}
		want := slices.Clone(es)
		slices.SortFunc(want, cmpEntry)
		order := sortEntries(es)
		es = sorted(es, order)
		for i := range es {
			if es[i].v != want[i].v || es[i].null != want[i].null || es[i].addr != want[i].addr {
				t.Fatalf("round %d row %d: %q/%v/%d, want %q/%v/%d", round, i, es[i].v, es[i].null, es[i].addr, want[i].v, want[i].null, want[i].addr)
			}
		}
	}
}

func sorted(es []entry, order []uint32) []entry {
	out := make([]entry, len(order))
	for i, p := range order {
		out[i] = es[p]
	}
	return out
}
