package lru

import "testing"

func TestEvictsLeastRecentlyUsedBeyondBytes(t *testing.T) {
	const o = EntryOverhead
	c := New(100 + 2*o)
	c.Put("a", 1, 40)
	c.Put("b", 2, 40)
	if _, ok := c.Get("a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.Put("c", 3, 40) // 120 > 100 (and the overheads): evicts b, the least recently used
	if _, ok := c.Get("b"); ok {
		t.Error("b should have been evicted")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	if n, b := c.Stats(); n != 2 || b != 80+2*o {
		t.Errorf("stats %d entries %d bytes, want 2, %d", n, b, 80+2*o)
	}
	c.Put("big", 4, 101+o)
	if _, ok := c.Get("big"); ok {
		t.Error("an entry larger than the cache was kept")
	}
	c.Put("a", 5, 10) // replace re-charges
	if v, _ := c.Get("a"); v != 5 {
		t.Errorf("a = %v, want 5", v)
	}
	if _, b := c.Stats(); b != 50+2*o {
		t.Errorf("%d bytes after replace, want %d", b, 50+2*o)
	}
	c.Remove("a")
	if _, ok := c.Get("a"); ok {
		t.Error("a not removed")
	}
}

func TestZeroSizeHoldsNothing(t *testing.T) {
	c := New(0)
	c.Put("a", 1, 1)
	if _, ok := c.Get("a"); ok {
		t.Error("a zero-byte cache kept an entry")
	}
}

// Regression: entries were charged only what their owners stated, so a
// cache of small entries held millions (offsets chunks of ~100 bytes, at
// two to three times the bound in memory). Each now costs EntryOverhead
// too.
func TestRegression_SmallEntriesAreChargedTheirOverhead(t *testing.T) {
	c := New(100 * EntryOverhead)
	for i := range 10_000 {
		c.Put(i, i, 8)
	}
	n, b := c.Stats()
	if n >= 100 || b > 100*EntryOverhead {
		t.Fatalf("%d entries of 8 bytes, %d bytes charged, in a cache of %d", n, b, 100*EntryOverhead)
	}
	if n < 90 {
		t.Fatalf("only %d entries kept", n)
	}
}
