package file

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
)

// TestFetchGivesTheFileBytes: waves of random ranges through one Read's
// fetchNow (coalesced, taken in part from Open's tail and from earlier
// waves) give exactly the file's bytes, and no byte is read twice.
func TestFetchGivesTheFileBytes(t *testing.T) {
	b, _ := writeFile(t, mixedSchema, WriterOptions{PageBytes: 8 << 10}, mixedRecords(23, 20000)...)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 60 {
		src := &logSource{memSource: &memSource{b: b}}
		r, err := Open(context.Background(), src, int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		src.take()
		rc := &readCtx{ctx: context.Background(), r: r, limit: 1 << 40}
		var all [][2]int64
		for range 1 + rng.IntN(4) {
			reqs := make([]bufRange, 1+rng.IntN(12))
			for i := range reqs {
				off := rng.Int64N(int64(len(b)))
				n := min(int64(len(b))-off, rng.Int64N(40<<10))
				reqs[i] = bufRange{off, n}
			}
			out, err := rc.fetchNow(reqs, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, q := range reqs {
				if !bytes.Equal(out[i], b[q.off:q.off+q.size]) {
					t.Fatalf("round %d: range [%d, +%d) differs from the file's bytes", round, q.off, q.size)
				}
			}
			all = append(all, src.take()...)
		}
		for i, a := range all {
			for _, c := range all[i+1:] {
				if a[0] < c[1] && c[0] < a[1] {
					t.Fatalf("round %d: reads [%d, %d) and [%d, %d) overlap", round, a[0], a[1], c[0], c[1])
				}
			}
		}
	}
}
