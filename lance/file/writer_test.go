package file

import "testing"

// TestReserveDoublesUpToAPage: a page buffer filled 100 bytes at a time
// grows by doubling (append's quarter steps took ~40 copies to reach 1 MiB),
// and never holds more than a page plus the bytes that overflowed it.
func TestReserveDoublesUpToAPage(t *testing.T) {
	const limit, step = 1 << 20, 100
	chunk := make([]byte, step)
	var b []byte
	grows := 0
	for len(b) < limit {
		prev := cap(b)
		b = append(reserve(b, step, limit), chunk...)
		if cap(b) != prev {
			grows++
		}
		if cap(b) > limit+step+8<<10 { // 8 KiB: the rounding of a large allocation
			t.Fatalf("capacity %d at length %d: more than a page (%d)", cap(b), len(b), limit)
		}
	}
	if grows > 16 {
		t.Fatalf("%d reallocations to fill %d bytes; doubling takes about 14", grows, limit)
	}
}
