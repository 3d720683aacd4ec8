package index

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// sortEntries returns the positions of a run's entries in index order
// (cmpEntry); the entries are not moved (moving 40-byte entries in random
// order costs as much as the sort). Most comparisons are
// settled by a uint64 key: the 8 bytes of the value after the prefix every
// value of the run shares (ids of one shape, "ro-000…" rollout ids), big
// endian and zero padded, so comparing keys agrees with comparing strings
// whenever the keys differ.
func sortEntries(es []entry) (order []uint32) {
	skip := commonPrefix(es)
	// Sort (key, position) pairs, 16 bytes each, rather than the entries:
	// swaps are most of a sort's work. Ties on the key look at the entries.
	ks := make([]keyPos, len(es))
	for i := range es {
		ks[i] = keyPos{sortKey(es[i].v, skip), uint32(i)}
		if es[i].null {
			ks[i].key = 0 // nulls sort first; ties fall through to cmpEntry
		}
	}
	byPos := func(a, b keyPos) int { return cmpEntry(es[a.pos], es[b.pos]) }
	if len(ks) < radixMin {
		slices.SortFunc(ks, func(a, b keyPos) int {
			if a.key != b.key {
				return cmp.Compare(a.key, b.key)
			}
			return byPos(a, b)
		})
	} else {
		ks = radixSort(ks)
		// Equal keys: the entries decide (values longer than the key,
		// nulls, row addresses). Runs are already in position order, which
		// is address order for a scan, so most are sorted already.
		for i := 0; i < len(ks); {
			j := i + 1
			for j < len(ks) && ks[j].key == ks[i].key {
				j++
			}
			if run := ks[i:j]; len(run) > 1 && !slices.IsSortedFunc(run, byPos) {
				slices.SortFunc(run, byPos)
			}
			i = j
		}
	}
	order = make([]uint32, len(ks))
	for i, k := range ks {
		order[i] = k.pos
	}
	return order
}

type keyPos struct {
	key uint64
	pos uint32
}

// commonPrefix returns the length of the prefix all non-null values share.
func commonPrefix(es []entry) int {
	first := true
	var p string
	for i := range es {
		if es[i].null {
			continue
		}
		v := es[i].v
		if first {
			p, first = v, false
			continue
		}
		n := min(len(p), len(v))
		j := 0
		for j < n && p[j] == v[j] {
			j++
		}
		p = p[:j]
		if len(p) == 0 {
			return 0
		}
	}
	return len(p)
}

func sortKey(v string, skip int) uint64 {
	var b [8]byte
	if skip < len(v) {
		copy(b[:], v[skip:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// radixMin is the run length from which sortEntries sorts keys by radix
// (a comparison sort of 1M keys was a fifth of an index build).
var radixMin = 4096

// radixSort sorts ks by key, stably: least significant 16 bits first,
// four passes, each skipped when every key has the same digit there.
func radixSort(ks []keyPos) []keyPos {
	var counts [4][1 << 16]int
	for _, k := range ks {
		for d := range 4 {
			counts[d][uint16(k.key>>(16*d))]++
		}
	}
	tmp := make([]keyPos, len(ks))
	for d := range 4 {
		c := &counts[d]
		if c[uint16(ks[0].key>>(16*d))] == len(ks) {
			continue
		}
		sum := 0
		for i, n := range c {
			c[i] = sum
			sum += n
		}
		for _, k := range ks {
			b := uint16(k.key >> (16 * d))
			tmp[c[b]] = k
			c[b]++
		}
		ks, tmp = tmp, ks
	}
	return ks
}
