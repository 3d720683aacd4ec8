package table

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// TestCleanupDeletesInBatches: a cleanup of 2500 unreferenced files on an
// S3-like store (Counting counts a batch request per 1000 keys, as S3's
// DeleteObjects takes) sends 3 batch deletes and no single one; it sent
// one request a file.
func TestCleanupDeletesInBatches(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	const n = 2500
	for i := range n {
		if err := mem.Put(ctx, fmt.Sprintf("data/orphan-%05d.lance", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond) // the orphans are older than the table
	newTable(t, mem)
	c := objstore.NewCounting(mem, 0)
	res, err := Cleanup(ctx, c, CleanupOptions{DeleteUnverified: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != n || res.BytesRemoved != n {
		t.Fatalf("removed %d files, %d bytes; want %d of each", res.FilesRemoved, res.BytesRemoved, n)
	}
	got := c.Counts()
	if got.Calls[objstore.OpDeleteMany] != 3 || got.Calls[objstore.OpDelete] != 0 {
		t.Fatalf("cleanup of %d files: %v, want 3 deletemany and no delete", n, got)
	}
	t.Logf("cleanup of %d files: %v", n, got)
}
