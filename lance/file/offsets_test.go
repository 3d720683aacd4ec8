package file

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestPackedOffsets checks that packed offsets give back every range of
// the raw entries: equal widths, varying widths, nulls (none, some, all
// per block), large gaps, and offsets that do not ascend (kept raw).
func TestPackedOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const adj = 1 << 40
	cases := map[string]func(i int, end uint64) (uint64, bool){
		"equal":    func(i int, end uint64) (uint64, bool) { return end + 16, false },
		"varying":  func(i int, end uint64) (uint64, bool) { return end + uint64(900+rng.IntN(250)), false },
		"nulls":    func(i int, end uint64) (uint64, bool) { return end + uint64(rng.IntN(40)), rng.IntN(3) == 0 },
		"allnull":  func(i int, end uint64) (uint64, bool) { return end, true },
		"empty":    func(i int, end uint64) (uint64, bool) { return end, false },
		"huge":     func(i int, end uint64) (uint64, bool) { return end + uint64(rng.IntN(1<<33)), false },
		"halfnull": func(i int, end uint64) (uint64, bool) { return end + 3, i >= 300 && i < 700 },
	}
	for name, gen := range cases {
		for _, n := range []int{1, 2, 255, 256, 257, 1000} {
			raw := make([]byte, 0, 8*n)
			var end uint64
			for i := 0; i < n; i++ {
				v, null := gen(i, end)
				end = v
				if null {
					v += adj
				}
				raw = binary.LittleEndian.AppendUint64(raw, v)
			}
			p := packOffsets(raw, adj)
			for k := 0; k < 50; k++ {
				lo := rng.IntN(n)
				hi := lo + 1 + rng.IntN(n-lo)
				if got := p.appendRange(nil, lo, hi); !bytes.Equal(got, raw[8*lo:8*hi]) {
					t.Fatalf("%s n=%d [%d,%d): entries differ", name, n, lo, hi)
				}
			}
			if got := p.appendRange(nil, 0, n); !bytes.Equal(got, raw) {
				t.Fatalf("%s n=%d: all entries differ", name, n)
			}
			if name == "equal" && p.bytes() > 200+int64(n)/8 {
				t.Errorf("equal widths: %d entries packed into %d bytes", n, p.bytes())
			}
		}
	}
	// Not ascending: kept raw.
	raw := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 10), 5)
	p := packOffsets(raw, 0)
	if p.raw == nil || !bytes.Equal(p.appendRange(nil, 0, 2), raw) {
		t.Fatal("descending offsets were not kept raw")
	}
}
