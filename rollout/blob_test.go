package rollout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// writeBlob streams n pseudo-random bytes into a payload object.
func writeBlob(t *testing.T, s *Store, n int, seed uint64) (Blob, []byte) {
	t.Helper()
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	w, err := s.CreateBlob(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < n; off += 1 << 20 { // as a body arrives: in pieces
		if _, err := w.Write(data[off:min(off+1<<20, n)]); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if b.Size != int64(n) || b.SHA256 != hex.EncodeToString(sum[:]) || !validBlobRef(b.Ref) {
		t.Fatalf("blob %+v for %d bytes", b, n)
	}
	return b, data
}

// withBlob is a record whose payload is the blob, as the multipart path
// makes it.
func withBlob(id string, b Blob) Record {
	r := recs(id, 1, "r-"+id)[0]
	r.ID = id
	size, sum, ref := b.Size, b.SHA256, b.Ref
	r.PayloadSize, r.PayloadChecksum, r.PayloadRef = &size, &sum, &ref
	return r
}

func readPayload(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	data, _, err := s.Blob(context.Background(), id)
	if err != nil {
		t.Fatalf("payload of %s: %v", id, err)
	}
	return data
}

func blobExists(t *testing.T, s *Store, b Blob) bool {
	t.Helper()
	_, err := s.root.Head(context.Background(), b.Ref)
	if errors.Is(err, objstore.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestOutOfLinePayloadsRoundTripThroughEveryTier: a payload stored as an
// object reads back the same from the tail's generation, after a merge and
// after a compaction, in ranges too; the row carries its size and checksum.
func TestOutOfLinePayloadsRoundTripThroughEveryTier(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "blobs")
	b, data := writeBlob(t, s, 9<<20+123, 1)
	appendFlush(t, s, []Record{withBlob("big", b)})
	check := func(stage string) {
		t.Helper()
		if got := readPayload(t, s, "big"); !bytes.Equal(got, data) {
			t.Fatalf("%s: payload differs (%d bytes read, want %d)", stage, len(got), len(data))
		}
		p, err := s.OpenPayload(ctx, "big", 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Size != int64(len(data)) || p.Checksum != b.SHA256 {
			t.Fatalf("%s: payload size %d checksum %s", stage, p.Size, p.Checksum)
		}
		// A range across a window's edge.
		if _, err := p.Seek(blobWindow-10, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		part := make([]byte, 100)
		if _, err := io.ReadFull(p, part); err != nil || !bytes.Equal(part, data[blobWindow-10:blobWindow+90]) {
			t.Fatalf("%s: range read: %v", stage, err)
		}
		rec, err := s.Get(ctx, "big")
		if err != nil || rec.PayloadSize == nil || *rec.PayloadSize != int64(len(data)) || rec.PayloadChecksum == nil || *rec.PayloadChecksum != b.SHA256 {
			t.Fatalf("%s: record %+v, %v", stage, rec, err)
		}
	}
	check("pending")
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	check("merged")
	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}

// TestCleanupCollectsOnlyUnreferencedBlobs: a cleanup deletes a payload
// object once no version, generation or unsealed row refers to it and it
// is older than the grace, and nothing else.
func TestCleanupCollectsOnlyUnreferencedBlobs(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{IndexColumns: []string{}})
	s := mustStore(t, c, "blobs")
	zero := time.Duration(0)
	grace := 300 * time.Millisecond
	cleanup := func() *CleanupResult {
		t.Helper()
		res, err := s.Cleanup(ctx, CleanupOptions{ReadGrace: &zero, BlobGrace: &grace})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	merged, _ := writeBlob(t, s, 2<<20, 1)
	// With a neighbour, so that the rewrite below leaves the fragment
	// with a deletion file rather than removing it.
	appendFlush(t, s, append(recs("neighbour", 1, "r-n"), withBlob("merged", merged)))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	pending, _ := writeBlob(t, s, 2<<20, 2)
	appendFlush(t, s, []Record{withBlob("pending", pending)})
	unsealed, _ := writeBlob(t, s, 2<<20, 3)
	if _, err := s.Append(ctx, []Record{withBlob("unsealed", unsealed)}); err != nil {
		t.Fatal(err)
	}
	orphan, _ := writeBlob(t, s, 1<<20, 4) // an upload whose append never came
	time.Sleep(grace + 50*time.Millisecond)
	young, _ := writeBlob(t, s, 1<<20, 6) // an upload whose append may be coming
	res := cleanup()
	if res.BlobsRemoved != 1 || res.BlobBytesRemoved != 1<<20 || blobExists(t, s, orphan) {
		t.Fatalf("first cleanup: %d blobs, %d bytes; orphan exists %v", res.BlobsRemoved, res.BlobBytesRemoved, blobExists(t, s, orphan))
	}
	for name, b := range map[string]Blob{"merged": merged, "pending": pending, "unsealed": unsealed, "young": young} {
		if !blobExists(t, s, b) {
			t.Fatalf("the %s blob was deleted", name)
		}
	}
	// Rewrites without a payload: after the merge, the next cleanups
	// free the old objects (the read grace is zero).
	rewrite := recs("merged", 1, "r-merged")
	rewrite[0].ID = "merged"
	appendFlush(t, s, rewrite)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(grace + 50*time.Millisecond)
	cleanup()
	if !blobExists(t, s, merged) {
		// Its row is only marked deleted: the data file, which a
		// compaction rewrites, still holds it.
		t.Fatal("a blob whose row is still in a data file was deleted")
	}
	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup()
	if blobExists(t, s, merged) {
		t.Fatal("the rewritten row's blob survived a compaction and cleanup")
	}
	for name, b := range map[string]Blob{"pending": pending, "unsealed": unsealed} {
		if !blobExists(t, s, b) {
			t.Fatalf("the %s blob was deleted", name)
		}
	}
	if blobExists(t, s, young) {
		t.Fatal("the upload no append referred to survived, past the grace")
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(readPayload(t, s, "unsealed")) != 2<<20 {
		t.Fatal("the unsealed record's payload")
	}
}

// TestAnotherShardsUnsealedLogProtectsItsBlobs: a payload referred to only
// by an entry in another process's log (not sealed, not visible to this
// one) is kept by this process's cleanup.
func TestAnotherShardsUnsealedLogProtectsItsBlobs(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	a := mustStore(t, newCatalog(t, root, "wa", Options{IndexColumns: []string{}}), "blobs")
	b := mustStore(t, newCatalog(t, root, "wb", Options{IndexColumns: []string{}}), "blobs")
	blob, data := writeBlob(t, b, 1<<20, 7)
	if _, err := b.Append(ctx, []Record{withBlob("other", blob)}); err != nil {
		t.Fatal(err)
	}
	grace := 200 * time.Millisecond
	zero := time.Duration(0)
	time.Sleep(grace + 50*time.Millisecond)
	if _, err := a.Cleanup(ctx, CleanupOptions{ReadGrace: &zero, BlobGrace: &grace}); err != nil {
		t.Fatal(err)
	}
	if !blobExists(t, a, blob) {
		t.Fatal("a blob referred to by another shard's unsealed entry was deleted")
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readPayload(t, a, "other"); !bytes.Equal(got, data) {
		t.Fatal("payload differs")
	}
}
