package objstore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSmallFilesReadsSmallObjectsOnce: a Head of a selected small object
// reads it whole (in parallel with the Head), later reads cost no request
// and return its bytes; large and unselected objects go to the store; a
// write or delete of the key drops the copy.
func TestSmallFilesReadsSmallObjectsOnce(t *testing.T) {
	ctx := context.Background()
	mem := NewMemory()
	c := NewCounting(mem, 0)
	s := NewSmallFiles(c, func(k string) bool { return strings.HasPrefix(k, "idx/") }, 100)
	small := []byte("0123456789abcdef")
	big := bytes.Repeat([]byte("x"), 200)
	for k, v := range map[string][]byte{"idx/small": small, "idx/big": big, "data/small": small} {
		if err := mem.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	info, err := s.Head(ctx, "idx/small")
	if err != nil || info.Size != int64(len(small)) {
		t.Fatalf("head: %v %v", info, err)
	}
	c.Reset()
	got, err := s.GetRange(ctx, "idx/small", 4, 6)
	if err != nil || string(got) != "456789" {
		t.Fatalf("range: %q %v", got, err)
	}
	got, err = s.GetRange(ctx, "idx/small", 10, 100) // truncated at the end
	if err != nil || string(got) != "abcdef" {
		t.Fatalf("range past the end: %q %v", got, err)
	}
	if _, err := s.GetRange(ctx, "idx/small", 17, 1); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("range beyond the end: %v", err)
	}
	dst := make([]byte, 3)
	if err := s.GetRangeInto(ctx, "idx/small", 1, dst); err != nil || string(dst) != "123" {
		t.Fatalf("range into: %q %v", dst, err)
	}
	if b, err := s.Get(ctx, "idx/small"); err != nil || !bytes.Equal(b, small) {
		t.Fatalf("get: %q %v", b, err)
	}
	if _, err := s.Head(ctx, "idx/small"); err != nil {
		t.Fatal(err)
	}
	if n := c.Counts().Requests(); n != 0 {
		t.Errorf("reads of a cached small object made %d requests", n)
	}
	// Large and unselected objects are read from the store.
	for _, k := range []string{"idx/big", "data/small"} {
		if _, err := s.Head(ctx, k); err != nil {
			t.Fatal(err)
		}
		c.Reset()
		if _, err := s.GetRange(ctx, k, 0, 4); err != nil {
			t.Fatal(err)
		}
		if n := c.Counts().Requests(); n != 1 {
			t.Errorf("%s: %d requests for a range read, want 1", k, n)
		}
	}
	// A rewrite drops the copy: the new bytes are read.
	if err := s.Put(ctx, "idx/small", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.GetRange(ctx, "idx/small", 0, 10); err != nil || string(b) != "new" {
		t.Fatalf("after put: %q %v", b, err)
	}
	if _, err := s.Head(ctx, "idx/small"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "idx/small"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRange(ctx, "idx/small", 0, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v, want not found", err)
	}
}

// TestListFirst: the first n keys in byte order, on every kind of store
// and through the wrappers.
func TestListFirst(t *testing.T) {
	ctx := context.Background()
	local, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mem := NewMemory()
	for name, st := range map[string]Store{
		"memory": mem, "local": local, "sub": Sub(NewMemory(), "p"), "counting": NewCounting(NewMemory(), 0),
		"smallfiles": NewSmallFiles(NewMemory(), func(string) bool { return true }, 10),
	} {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"v/3", "v/1", "v/2", "w/0", "u/9"} {
				if err := st.Put(ctx, k, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ListFirst(ctx, st, "v/", 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Key != "v/1" || got[1].Key != "v/2" || got[0].Size != 3 {
				t.Errorf("ListFirst = %+v, want v/1, v/2", got)
			}
			if got, err := ListFirst(ctx, st, "none/", 2); err != nil || len(got) != 0 {
				t.Errorf("empty prefix: %v %v", got, err)
			}
		})
	}
}

// TestSmallFilesPreloadIsOneWave: Preload reads every selected, uncached
// object of its keys in parallel (one sequential round trip on a store
// with latency), skips unselected keys, and later reads of them cost no
// request.
func TestSmallFilesPreloadIsOneWave(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		wrap     func(Store) Store
		requests int
	}{
		// One tail read each (TailReader).
		{"tail reads", func(s Store) Store { return s }, 3},
		// A Head and a read of the object's start each, in parallel.
		{"no tail reads", func(s Store) Store { return noTail{s} }, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := NewMemory()
			// A latency well above a loaded machine's scheduling delays:
			// at 5 ms, -race on two busy cores started one of the six
			// parallel requests after another had ended (two round trips).
			cs := NewCounting(c.wrap(mem), 40*time.Millisecond)
			s := NewSmallFiles(cs, func(k string) bool { return strings.HasPrefix(k, "idx/") }, 100)
			keys := []string{"idx/a", "idx/b", "idx/c", "data/d"}
			for _, k := range keys {
				if err := mem.Put(ctx, k, []byte("bytes of "+k)); err != nil {
					t.Fatal(err)
				}
			}
			s.Preload(ctx, keys...)
			if got := cs.Counts(); got.Sequential != 1 || got.Requests() != c.requests {
				t.Errorf("preload of 3 selected objects: %v, want %d requests in 1 round trip", got, c.requests)
			}
			cs.Reset()
			for _, k := range keys[:3] {
				if b, err := s.Get(ctx, k); err != nil || string(b) != "bytes of "+k {
					t.Fatalf("get %s: %q %v", k, b, err)
				}
			}
			s.Preload(ctx, keys[:3]...)
			if _, _, err := s.GetTail(ctx, "idx/a", 5); err != nil {
				t.Fatal(err)
			}
			if n := cs.Counts().Requests(); n != 0 {
				t.Errorf("reads and preload of preloaded objects made %d requests", n)
			}
		})
	}
}

// noTail hides a store's optional interfaces (TailReader among them).
type noTail struct{ Store }

// TestSmallFilesGetTail: GetTail of a small selected object reads it whole
// with its one request and caches it (later reads cost nothing); of a large
// one it returns just the tail asked for; of an unselected one it passes
// through.
func TestSmallFilesGetTail(t *testing.T) {
	ctx := context.Background()
	mem := NewMemory()
	c := NewCounting(mem, 0)
	s := NewSmallFiles(c, func(k string) bool { return strings.HasPrefix(k, "idx/") }, 1000)
	small, large := bytes.Repeat([]byte("s"), 600), bytes.Repeat([]byte("L"), 5000)
	large[4999] = 'E'
	for k, v := range map[string][]byte{"idx/small": small, "idx/large": large, "data/x": small} {
		if err := mem.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	b, info, err := s.GetTail(ctx, "idx/small", 10)
	if err != nil || !bytes.Equal(b, small[590:]) || info.Size != 600 || info.Key != "idx/small" {
		t.Fatalf("GetTail(idx/small, 10) = %q, %+v, %v", b, info, err)
	}
	if got := c.Counts().Requests(); got != 1 {
		t.Fatalf("GetTail of a small object: %d requests, want 1", got)
	}
	c.Reset()
	if got, err := s.GetRange(ctx, "idx/small", 0, 600); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("GetRange after GetTail = %d bytes, %v", len(got), err)
	}
	if info, err := s.Head(ctx, "idx/small"); err != nil || info.Size != 600 {
		t.Fatalf("Head after GetTail = %+v, %v", info, err)
	}
	if b, _, err := s.GetTail(ctx, "idx/small", 1000); err != nil || !bytes.Equal(b, small) {
		t.Fatalf("cached GetTail = %d bytes, %v", len(b), err)
	}
	if got := c.Counts().Requests(); got != 0 {
		t.Fatalf("reads of a cached object: %d requests, want 0", got)
	}
	b, info, err = s.GetTail(ctx, "idx/large", 3)
	if err != nil || string(b) != "LLE" || info.Size != 5000 {
		t.Fatalf("GetTail(idx/large, 3) = %q, %+v, %v", b, info, err)
	}
	// Known large now: its size costs no request, a tail or a range
	// within the last bytes the first read took (the wrapper's maximum)
	// none either, and a longer tail is read as asked.
	c.Reset()
	if info, err := s.Head(ctx, "idx/large"); err != nil || info.Size != 5000 {
		t.Fatalf("Head of a known large object = %+v, %v", info, err)
	}
	if b, _, err := s.GetTail(ctx, "idx/large", 10); err != nil || string(b) != "LLLLLLLLLE" {
		t.Fatalf("GetTail(idx/large, 10) again = %q, %v", b, err)
	}
	if got, err := s.GetRange(ctx, "idx/large", 4990, 10); err != nil || string(got) != "LLLLLLLLLE" {
		t.Fatalf("GetRange(idx/large, 4990, 10) = %q, %v", got, err)
	}
	if got := c.Counts(); got.Requests() != 0 {
		t.Fatalf("Head, a 10-byte tail and a range in the kept tail of a known large object: %s, want no request", got)
	}
	kept := s.max
	if b, _, err := s.GetTail(ctx, "idx/large", kept+10); err != nil || int64(len(b)) != kept+10 {
		t.Fatalf("GetTail(idx/large, %d) = %d bytes, %v", kept+10, len(b), err)
	}
	if got := c.Counts(); got.Requests() != 1 || got.BytesRead != kept+10 {
		t.Fatalf("a tail longer than the kept one: %s, want 1 request of %d bytes", got, kept+10)
	}
	if err := s.Put(ctx, "idx/large", small); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Head(ctx, "idx/large"); err != nil || info.Size != 600 {
		t.Fatalf("Head after a Put over a large object = %+v, %v; want the new size", info, err)
	}
	b, info, err = s.GetTail(ctx, "data/x", 4)
	if err != nil || string(b) != "ssss" || info.Size != 600 {
		t.Fatalf("GetTail(data/x, 4) = %q, %+v, %v", b, info, err)
	}
	c.Reset()
	if _, err := s.GetRange(ctx, "data/x", 0, 1); err != nil || c.Counts().Requests() != 1 {
		t.Fatalf("an unselected object was cached (%v, %s)", err, c.Counts())
	}
}

// TestSmallFilesGetTailWithoutTailReads: over a store without one-request
// tails (Azure), GetTail of a small selected object costs one round trip
// (a Head and a read of its start, in parallel), as Head does, not a Head
// and then a read; of a large one, two.
func TestSmallFilesGetTailWithoutTailReads(t *testing.T) {
	ctx := context.Background()
	mem := NewMemory()
	c := NewCounting(Sub(noTail{mem}, "p"), 40*time.Millisecond) // see TestSmallFilesPreloadIsOneWave
	s := NewSmallFiles(c, func(k string) bool { return strings.HasPrefix(k, "idx/") }, 1000)
	small, large := bytes.Repeat([]byte("s"), 600), bytes.Repeat([]byte("L"), 5000)
	large[4999] = 'E'
	for k, v := range map[string][]byte{"p/idx/small": small, "p/idx/large": large} {
		if err := mem.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		key        string
		want       []byte
		sequential int
	}{{"idx/small", small[595:], 1}, {"idx/large", large[4995:], 2}} {
		c.Reset()
		b, info, err := s.GetTail(ctx, w.key, 5)
		if err != nil || !bytes.Equal(b, w.want) || info.Key != w.key {
			t.Fatalf("GetTail(%s, 5) = %q, %+v, %v", w.key, b, info, err)
		}
		if got := c.Counts(); got.Sequential != w.sequential {
			t.Errorf("GetTail(%s): %s; want %d sequential", w.key, got, w.sequential)
		}
	}
	// Counting sees through Sub that a tail costs a Head and a read here.
	c.Reset()
	if _, _, err := GetTail(ctx, c, "idx/large", 5); err != nil {
		t.Fatal(err)
	}
	if got := c.Counts(); got.Requests() != 2 || got.Sequential != 2 {
		t.Errorf("GetTail through Counting(Sub(a store without tails)): %s; want head and getrange", got)
	}
}

// TestSmallFilesPreloadTails: PreloadTails reads each selected object's
// last tail bytes with its size, in one wave: a larger object is kept as
// large with that tail (its size, and reads within the tail, cost no
// request later), one no larger than tail is kept whole; an object known
// already, or not selected, is not read.
func TestSmallFilesPreloadTails(t *testing.T) {
	ctx := context.Background()
	mem := NewMemory()
	cs := NewCounting(mem, 40*time.Millisecond) // see TestSmallFilesPreloadIsOneWave
	s := NewSmallFiles(cs, func(k string) bool { return strings.HasPrefix(k, "idx/") }, 1000)
	large := bytes.Repeat([]byte("L"), 5000)
	large[4999] = 'E'
	for k, v := range map[string][]byte{"idx/large": large, "idx/small": []byte("tiny"), "data/x": large} {
		if err := mem.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	s.PreloadTails(ctx, 100, "idx/large", "idx/small", "data/x")
	if got := cs.Counts(); got.Sequential != 1 || got.Requests() != 2 || got.BytesRead != 104 {
		t.Errorf("preload of the tails of 2 selected objects: %s; want 2 requests in 1 round trip, 104 bytes", got)
	}
	cs.Reset()
	if info, err := s.Head(ctx, "idx/large"); err != nil || info.Size != 5000 {
		t.Fatalf("Head = %+v, %v", info, err)
	}
	if b, _, err := s.GetTail(ctx, "idx/large", 100); err != nil || len(b) != 100 || b[99] != 'E' {
		t.Fatalf("GetTail(100) = %q, %v", b, err)
	}
	if b, err := s.GetRange(ctx, "idx/large", 4950, 50); err != nil || len(b) != 50 {
		t.Fatalf("GetRange in the tail = %d bytes, %v", len(b), err)
	}
	if b, err := s.Get(ctx, "idx/small"); err != nil || string(b) != "tiny" {
		t.Fatalf("Get(idx/small) = %q, %v", b, err)
	}
	s.PreloadTails(ctx, 100, "idx/large", "idx/small")
	if got := cs.Counts(); got.Requests() != 0 {
		t.Errorf("reads within what the preload kept, and a second preload: %s; want no request", got)
	}
	if b, err := s.GetRange(ctx, "idx/large", 0, 10); err != nil || string(b) != "LLLLLLLLLL" {
		t.Fatalf("GetRange before the tail = %q, %v", b, err)
	}
	if got := cs.Counts(); got.Requests() != 1 {
		t.Errorf("a range before the kept tail: %s; want 1 request", got)
	}
}
