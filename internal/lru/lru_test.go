package lru

import "testing"

func TestEvictsLeastRecentlyUsedBeyondBytes(t *testing.T) {
	c := New(100)
	c.Put("a", 1, 40)
	c.Put("b", 2, 40)
	if _, ok := c.Get("a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.Put("c", 3, 40) // 120 > 100: evicts b, the least recently used
	if _, ok := c.Get("b"); ok {
		t.Error("b should have been evicted")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	if n, b := c.Stats(); n != 2 || b != 80 {
		t.Errorf("stats %d entries %d bytes, want 2, 80", n, b)
	}
	c.Put("big", 4, 101)
	if _, ok := c.Get("big"); ok {
		t.Error("an entry larger than the cache was kept")
	}
	c.Put("a", 5, 10) // replace re-charges
	if v, _ := c.Get("a"); v != 5 {
		t.Errorf("a = %v, want 5", v)
	}
	if _, b := c.Stats(); b != 50 {
		t.Errorf("%d bytes after replace, want 50", b)
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
