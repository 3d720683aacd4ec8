package vfs

import (
	"errors"
	"syscall"
	"testing"
)

// TestQuotaFailsWithNoSpace: growth past the budget fails with ErrNoSpace
// (and ENOSPC) and changes nothing; removing a file gives its bytes back.
func TestQuotaFailsWithNoSpace(t *testing.T) {
	q := NewQuota(NewMem(), 100)
	if err := q.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	f, err := q.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 60), 0); err != nil {
		t.Fatal(err)
	}
	err = f.Allocate(60, 200)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || !IsNoSpace(err) {
		t.Fatalf("allocate past the budget: %v", err)
	}
	if n, _ := f.Size(); n != 60 {
		t.Fatalf("size %d after a failed allocation", n)
	}
	if err := f.Allocate(60, 100); err != nil { // exactly what is left
		t.Fatal(err)
	}
	if q.Free() != 0 {
		t.Fatalf("free %d", q.Free())
	}
	if _, err := q.Create("/d/b"); !IsNoSpace(err) {
		t.Fatalf("create on a full file system: %v", err)
	}
	if err := f.Truncate(10); err != nil || q.Free() != 90 {
		t.Fatalf("truncate: %v, free %d", err, q.Free())
	}
	f.Close()
	if err := q.Rename("/d/a", "/d/c"); err != nil {
		t.Fatal(err)
	}
	if err := q.Remove("/d/c"); err != nil || q.Free() != 100 {
		t.Fatalf("remove: %v, free %d", err, q.Free())
	}
	if q.Failed() != 2 {
		t.Fatalf("failed %d, want 2", q.Failed())
	}
	if NoSpace(syscall.ENOSPC) == nil || !errors.Is(NoSpace(syscall.EDQUOT), ErrNoSpace) || NoSpace(nil) != nil || errors.Is(NoSpace(syscall.EIO), ErrNoSpace) {
		t.Fatal("NoSpace classifies wrongly")
	}
}
