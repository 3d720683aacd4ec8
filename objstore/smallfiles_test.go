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
	mem := NewMemory()
	c := NewCounting(mem, 5*time.Millisecond)
	s := NewSmallFiles(c, func(k string) bool { return strings.HasPrefix(k, "idx/") }, 100)
	keys := []string{"idx/a", "idx/b", "idx/c", "data/d"}
	for _, k := range keys {
		if err := mem.Put(ctx, k, []byte("bytes of "+k)); err != nil {
			t.Fatal(err)
		}
	}
	s.Preload(ctx, keys...)
	if got := c.Counts(); got.Sequential != 1 || got.Requests() != 6 {
		t.Errorf("preload of 3 selected objects: %v, want 6 requests (head and get each) in 1 round trip", got)
	}
	c.Reset()
	for _, k := range keys[:3] {
		if b, err := s.Get(ctx, k); err != nil || string(b) != "bytes of "+k {
			t.Fatalf("get %s: %q %v", k, b, err)
		}
	}
	s.Preload(ctx, keys[:3]...)
	if n := c.Counts().Requests(); n != 0 {
		t.Errorf("reads and preload of preloaded objects made %d requests", n)
	}
}
