package rollout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/uuid"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// Payloads stored out of line ("blobs", see "Large payloads" in doc.go): a
// payload too large to carry through the WAL, the memtable and a merge is
// streamed into an object of its own, _lc_blobs/{uuidv7}, before the
// append that refers to it is written to the WAL; the row holds its key in
// payload_ref, with binary_payload null and payload_size and
// payload_checksum set as for an inline payload.

// blobPrefix is the directory of out-of-line payloads in a store.
const blobPrefix = "_lc_blobs/"

// DefaultBlobGrace is how old an unreferenced blob must be before a
// cleanup deletes it: longer than any upload takes between the blob's
// last byte and its append's WAL entry.
const DefaultBlobGrace = time.Hour

// blobWindow is the bytes a payload reader fetches per request.
const blobWindow = 4 << 20

// Blob is a payload written by a BlobWriter.
type Blob struct {
	Ref    string // the object key, relative to the store (payload_ref)
	Size   int64
	SHA256 string // hex
}

// BlobWriter streams one payload into its own object. Memory is bounded by
// the object store's writer (a temporary file locally, one part on S3).
type BlobWriter struct {
	w   objstore.ObjectWriter
	ref string
	h   hash.Hash
	n   int64
}

// CreateBlob starts an out-of-line payload. Commit it, then append the
// record that refers to it; Abort it on any failure before the append.
func (s *Store) CreateBlob(ctx context.Context) (*BlobWriter, error) {
	ref := blobPrefix + uuid.Must(uuid.NewV7()).String()
	w, err := s.root.Create(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("rollout: start payload object: %w", err)
	}
	return &BlobWriter{w: w, ref: ref, h: sha256.New()}, nil
}

func (b *BlobWriter) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	b.h.Write(p[:n])
	b.n += int64(n)
	return n, err
}

// Commit makes the payload durable and returns what the row records.
func (b *BlobWriter) Commit() (Blob, error) {
	if err := b.w.Close(); err != nil {
		return Blob{}, fmt.Errorf("rollout: write payload object: %w", err)
	}
	return Blob{Ref: b.ref, Size: b.n, SHA256: hex.EncodeToString(b.h.Sum(nil))}, nil
}

// Abort discards an uncommitted payload (nothing after Commit).
func (b *BlobWriter) Abort() { _ = b.w.Abort() }

// DeleteBlob removes a committed payload no acknowledged row refers to (an
// append refused after its upload). Best effort: a cleanup collects what
// is left.
func (s *Store) DeleteBlob(ctx context.Context, b Blob) {
	if validBlobRef(b.Ref) {
		_ = s.root.Delete(ctx, b.Ref)
	}
}

// validBlobRef: refs are only ever blobPrefix + a UUID, so that a damaged
// or foreign row can never name another object of the store.
func validBlobRef(ref string) bool {
	id, ok := strings.CutPrefix(ref, blobPrefix)
	if !ok || len(id) != 36 {
		return false
	}
	_, err := uuid.Parse(id)
	return err == nil
}

// Payload is a record's payload, open for reading. An inline payload is
// in memory; an out-of-line one is read from its object a window at a
// time as it is consumed (Seek makes ranges cheap).
type Payload struct {
	io.ReadSeeker
	Size        int64
	ContentType string
	Checksum    string // sha256 in hex, when the row has one
	ModTime     time.Time
}

// OpenPayload opens a record's payload from the full union (base version v
// alone when v is not 0). ErrNotFound when the record or its payload is
// absent.
func (s *Store) OpenPayload(ctx context.Context, id string, v uint64) (*Payload, error) {
	var p *Payload
	err := s.readView(ctx, true, planGet.at(v), func(vw *view) error {
		var err error
		p, err = s.openPayload(ctx, vw, id)
		return err
	})
	return p, err
}

// payloadColumns are read to serve a payload; older files lack the last.
var payloadColumns = []string{ColPayload, ColContentType, ColPayloadSum, ColPayloadRef}

// openPayload opens the payload of the row of id that v shows (its
// pending row or its base row: the view's rule).
func (s *Store) openPayload(ctx context.Context, v *view, id string) (*Payload, error) {
	rec, err := v.getRow(ctx, id, payloadColumns)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	col := func(name string) arrow.Array {
		if i := rec.Schema().FieldIndices(name); len(i) > 0 && !rec.Column(i[0]).IsNull(0) {
			return rec.Column(i[0])
		}
		return nil
	}
	p := &Payload{ContentType: "application/octet-stream"}
	if c, ok := col(ColContentType).(*array.String); ok && c.Value(0) != "text/plain" {
		p.ContentType = c.Value(0)
	}
	if c, ok := col(ColPayloadSum).(*array.String); ok {
		p.Checksum = strings.TrimPrefix(c.Value(0), "sha256:")
	}
	if c, ok := col(ColPayload).(*array.LargeBinary); ok {
		data := append([]byte(nil), c.Value(0)...)
		p.ReadSeeker, p.Size = bytes.NewReader(data), int64(len(data))
		return p, nil
	}
	c, ok := col(ColPayloadRef).(*array.String)
	if !ok {
		return nil, fmt.Errorf("%w: record %q has no payload", ErrNotFound, id)
	}
	ref := c.Value(0)
	if !validBlobRef(ref) {
		return nil, fmt.Errorf("rollout: record %q refers to %q, which is not a payload object", id, ref)
	}
	info, err := s.root.Head(ctx, ref)
	if err != nil {
		// A row refers to it, so a missing object is damage, not a miss.
		return nil, fmt.Errorf("rollout: payload object %s of record %q: %w", ref, id, err)
	}
	p.Size, p.ModTime = info.Size, info.ModTime
	p.ReadSeeker = &objectReader{ctx: ctx, st: s.root, key: ref, size: info.Size}
	return p, nil
}

// objectReader reads an object through ranged gets of up to blobWindow
// bytes, so a download holds one window, whatever the object's size.
type objectReader struct {
	ctx    context.Context
	st     objstore.Reader
	key    string
	size   int64
	off    int64
	buf    []byte
	bufOff int64 // buf holds the bytes from bufOff on
}

func (r *objectReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if r.off < r.bufOff || r.off >= r.bufOff+int64(len(r.buf)) {
		n := min(blobWindow, r.size-r.off)
		var err error
		if into, ok := r.st.(objstore.RangeIntoReader); ok {
			// One window for the whole read: a gigabyte leaves no
			// gigabyte of garbage behind it.
			if cap(r.buf) < int(n) {
				r.buf = make([]byte, n)
			}
			r.buf = r.buf[:n]
			err = into.GetRangeInto(r.ctx, r.key, r.off, r.buf)
		} else {
			r.buf, err = r.st.GetRange(r.ctx, r.key, r.off, n)
		}
		if err != nil {
			r.buf = r.buf[:0]
			return 0, fmt.Errorf("rollout: read payload object %s at %d: %w", r.key, r.off, err)
		}
		if len(r.buf) == 0 {
			return 0, fmt.Errorf("rollout: payload object %s ends at %d, before its %d bytes", r.key, r.off, r.size)
		}
		r.bufOff = r.off
	}
	n := copy(p, r.buf[r.off-r.bufOff:])
	r.off += int64(n)
	return n, nil
}

func (r *objectReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("rollout: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("rollout: seek before the start")
	}
	r.off = offset
	return offset, nil
}

// collectBlobs deletes the payload objects that nothing can refer to any
// more and that are older than grace. It runs inside Cleanup, after the
// base's old versions went, and reads the references in the order that
// a row moving between tiers cannot escape: this process's unsealed rows
// (Writer.Tail), then each shard's manifest and pending generations, then
// every base version left. A row leaves the tail only after its
// generation's manifest is published, and a generation is drained only
// after the base version holding its rows is committed, so a row is seen
// in one tier or the next. Rows only in another process's log are not
// read: blobs written after that log's oldest unsealed entry (less grace,
// for the upload before the entry) are kept instead.
//
// kept are the base versions the cleanup just read (table.CleanupOptions
// Kept): the versions are listed again after the shards are read, as the
// order above needs, but only those not among kept (committed since) have
// their manifest read.
func (s *Store) collectBlobs(ctx context.Context, grace time.Duration, kept []*table.Dataset) (files int, bytes int64, err error) {
	objs, err := s.root.List(ctx, blobPrefix)
	if err != nil {
		return 0, 0, fmt.Errorf("rollout: list payload objects: %w", err)
	}
	cutoff := s.clockNow().Add(-grace)
	var cands []objstore.ObjectInfo
	for _, o := range objs {
		if o.ModTime.Before(cutoff) {
			cands = append(cands, o)
		}
	}
	if len(cands) == 0 {
		return 0, 0, nil
	}
	refs := map[string]bool{}
	addRefs := func(rec arrow.RecordBatch) {
		i := rec.Schema().FieldIndices(ColPayloadRef)
		if len(i) == 0 {
			return
		}
		if c, ok := rec.Column(i[0]).(*array.String); ok {
			for r := 0; r < c.Len(); r++ {
				if c.IsValid(r) {
					refs[c.Value(r)] = true
				}
			}
		}
	}
	own := s.writer.Load()
	if own != nil {
		for _, b := range own.Tail() {
			addRefs(b.Rec)
			b.Rec.Release()
		}
	}
	shards, err := wal.ListShards(ctx, s.root)
	if err != nil {
		return 0, 0, err
	}
	var floor time.Time // blobs from here on (less grace) may be in a log
	floored := false
	for _, id := range shards {
		m, err := wal.LoadManifest(ctx, s.root, id)
		if err != nil {
			return 0, 0, err
		}
		if m == nil {
			continue
		}
		if own == nil || id != s.shard {
			o := s.walOptions()
			o.Shard = id
			since, any, err := wal.UnsealedSince(ctx, o, m)
			if err != nil {
				return 0, 0, err
			}
			if any && (!floored || since.Before(floor)) {
				floor, floored = since, true
			}
		}
		for _, g := range m.Generations {
			r, err := wal.OpenGeneration(ctx, s.root, id, g)
			if errors.Is(err, objstore.ErrNotFound) {
				continue // drained: its rows are in a base version read below
			}
			if err != nil {
				return 0, 0, err
			}
			f := r.Schema().Field(ColPayloadRef)
			if f == nil {
				continue
			}
			rec, err := r.Read(ctx, []int32{f.ID}, 0, r.NumRows())
			if err != nil {
				return 0, 0, err
			}
			addRefs(rec)
			rec.Release()
		}
	}
	versions, err := table.Versions(ctx, s.root)
	if err != nil {
		return 0, 0, err
	}
	read := make(map[uint64]*table.Dataset, len(kept))
	for _, d := range kept {
		read[d.Version()] = d
	}
	seen := map[uint64]bool{} // fragment ids: a fragment's data files never change
	for _, v := range versions {
		d, ok := read[v]
		if !ok {
			d, err = table.Checkout(ctx, s.root, v)
			if errors.Is(err, objstore.ErrNotFound) {
				continue // removed by another process's cleanup
			}
			if err != nil {
				return 0, 0, err
			}
		}
		if d.Schema().Field(ColPayloadRef) == nil {
			continue
		}
		frags := roaringOf(d, seen)
		if frags.IsEmpty() {
			continue
		}
		// Deleted rows too: an older kept version may still hold them.
		err = d.Scan(ctx, table.ScanOptions{Columns: []string{ColPayloadRef}, Fragments: frags, WithDeleted: true}, func(b arrow.RecordBatch) error {
			addRefs(b)
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
	}
	var doomed []string
	size := map[string]int64{}
	for _, o := range cands {
		if refs[o.Key] || (floored && !o.ModTime.Before(floor.Add(-grace))) {
			continue
		}
		doomed = append(doomed, o.Key)
		size[o.Key] = o.Size
	}
	err = objstore.DeleteKeys(ctx, s.root, doomed)
	for _, k := range objstore.NotDeleted(err, doomed) {
		delete(size, k)
	}
	for _, n := range size {
		files++
		bytes += n
	}
	if err != nil {
		return files, bytes, fmt.Errorf("rollout: delete payload objects: %w", err)
	}
	return files, bytes, nil
}

// roaringOf returns the ids of d's fragments not in seen, and adds them.
func roaringOf(d *table.Dataset, seen map[uint64]bool) *roaring.Bitmap {
	bm := roaring.New()
	for _, f := range d.Fragments() {
		if id := f.GetId(); !seen[id] {
			seen[id] = true
			bm.Add(uint32(id))
		}
	}
	return bm
}
