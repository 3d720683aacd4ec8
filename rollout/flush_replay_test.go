package rollout

import (
	"context"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// crash stops s's writer without sealing and closes s, as if its process
// died: acknowledged rows are only in the WAL.
func crash(s *Store) {
	s.mu.Lock()
	w := s.writer
	s.writer, s.closed = nil, true
	s.mu.Unlock()
	w.Abandon()
}

// TestFlushAfterCrashReplaysWAL: rows acknowledged by a process that then
// crashed (no seal) become readable when a new process with the same shard
// calls Flush, without having to append first. Before the fix Flush was a
// no-op on an unclaimed shard, so the rows stayed invisible until the next
// write to the store.
func TestFlushAfterCrashReplaysWAL(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	s1 := mustStore(t, NewCatalog(root, ShardID("w"), Options{}), "crash")
	if _, err := s1.Append(ctx, recs("acked", 3, "r")); err != nil {
		t.Fatal(err)
	}
	crash(s1)

	s2 := mustStore(t, newCatalog(t, root, "w", Options{}), "crash")
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s2, ListOptions{Source: SourceWAL}); len(got) != 3 {
		t.Fatalf("after restart and Flush: %v in source=wal, want the 3 acknowledged rows", got)
	}

	// A process whose shard never wrote to the store does not create a
	// shard by flushing it.
	s3 := mustStore(t, newCatalog(t, root, "reader", Options{}), "crash")
	if err := s3.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s3.PendingOwn() != -1 {
		t.Fatalf("Flush on a never-written shard claimed it")
	}
}

// TestRecoverSealsPredecessorsRows: a restarted process (same instance id)
// makes its crashed predecessor's acknowledged rows readable at startup,
// for every store, without any write or flush to them.
func TestRecoverSealsPredecessorsRows(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	old := NewCatalog(root, ShardID("w"), Options{})
	for _, name := range []string{"a", "b"} {
		s, err := old.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, []Record{{ID: name + "-1", RolloutID: "r"}}); err != nil {
			t.Fatal(err)
		}
		s.writer.Abandon() // crash: acknowledged, never sealed
	}
	fresh := NewCatalog(root, ShardID("w"), Options{})
	defer fresh.Close(ctx)
	if err := fresh.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	reader := NewCatalog(root, ShardID("reader"), Options{})
	for _, name := range []string{"a", "b"} {
		s, err := reader.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.List(ctx, ListOptions{Source: SourceWAL})
		if err != nil || len(res.Records) != 1 || res.Records[0].ID != name+"-1" {
			t.Fatalf("store %s after recover: %+v %v", name, res, err)
		}
	}
}
