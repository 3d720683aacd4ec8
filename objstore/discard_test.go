package objstore

import (
	"context"
	"errors"
	"testing"
)

// TestLocalDiscard: Discard deletes an object (not synced) and never a
// directory, like Delete.
func TestLocalDiscard(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub := Sub(l, "ds")
	for _, k := range []string{"a/1", "a/2/x"} {
		if err := sub.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a/1", "a/2", "a/missing"} {
		if err := Discard(ctx, sub, k); err != nil {
			t.Fatalf("discard %s: %v", k, err)
		}
	}
	if _, err := sub.Get(ctx, "a/1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("discarded object still readable: %v", err)
	}
	if got, err := sub.Get(ctx, "a/2/x"); err != nil || string(got) != "v" {
		t.Fatalf("discarding a directory's name touched it: %q %v", got, err)
	}
	if err := Discard(ctx, NewMemory(), "k"); err != nil {
		t.Fatalf("a store without Discard deletes: %v", err)
	}
}
