package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// blobLimit is the largest payload part accepted (LC_MAX_BLOB_BYTES).
func (s *Server) blobLimit() int64 {
	if s.cfg.MaxBlobBytes > 0 {
		return s.cfg.MaxBlobBytes
	}
	return s.cfg.MaxPayloadBytes // a Config built without FromEnv
}

// inlineLimit is the largest part kept inline (in the WAL entry).
func (s *Server) inlineLimit() int64 {
	if s.cfg.BlobInlineBytes > 0 {
		return min(s.cfg.BlobInlineBytes, s.cfg.MaxPayloadBytes)
	}
	return s.cfg.MaxPayloadBytes // a Config built without FromEnv
}

// dropBlobs deletes payload objects of an append that was refused before
// any of its rows reached the log.
func (s *Server) dropBlobs(st *rollout.Store, blobs []rollout.Blob) {
	for _, b := range blobs {
		st.DeleteBlob(context.Background(), b)
	}
}

// decodeMultipart reads a "metadata" part ({"records":[...]}) followed by
// payload parts named by record index. A part up to the inline size is
// kept in the record; a larger one streams into an object of its own
// (rollout.CreateBlob) as it arrives, so a 1 GiB part costs the worker a
// buffer, not a gigabyte. The objects written are returned: the caller
// deletes them if the append is refused.
func (s *Server) decodeMultipart(ctx context.Context, st *rollout.Store, body io.Reader, boundary string) (recs []rollout.Record, blobs []rollout.Blob, err error) {
	defer func() {
		if err != nil {
			s.dropBlobs(st, blobs)
			blobs = nil
		}
	}()
	if boundary == "" {
		return nil, nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "multipart body without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	var parts []bool // parts[i]: record i's payload part arrived
	seen := false
	held := heldBytes{max: s.cfg.MaxBodyBytes}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, blobs, partError("", err)
		}
		name := p.FormName()
		if !seen {
			if name != "metadata" {
				return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "the first multipart part must be \"metadata\" (JSON {\"records\":[...]}), got %q", name)
			}
			// What is held in memory (the metadata and the inline parts)
			// stays within the body limit; only streamed parts exceed it.
			lr := &io.LimitedReader{R: p, N: held.left()}
			recs, err = s.decodeJSONRecords(lr, -1)
			if lr.N <= 0 {
				return nil, blobs, held.full()
			}
			if err != nil {
				return nil, blobs, err
			}
			held.n += held.left() - lr.N
			parts = make([]bool, len(recs))
			seen = true
			continue
		}
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 || i >= len(recs) {
			return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "payload part %q must be named by a record index 0..%d", name, len(recs)-1)
		}
		if parts[i] {
			return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "duplicate payload part for record index %d: send one part per record", i)
		}
		parts[i] = true
		rec := &recs[i]
		// Read up to the inline size; a part that goes on streams.
		br := bufio.NewReaderSize(p, 64<<10)
		head, err := io.ReadAll(io.LimitReader(br, s.inlineLimit()+1))
		if err != nil {
			return nil, blobs, partError(name, err)
		}
		if int64(len(head)) <= s.inlineLimit() {
			if held.n += int64(len(head)); held.n > held.max {
				return nil, blobs, held.full()
			}
			if want := rec.PayloadSize; want != nil && *want != int64(len(head)) {
				return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "record %d: payload_size %d does not match the %d bytes of its part", i, *want, len(head))
			}
			rec.BinaryPayload = head
			continue
		}
		b, err := s.streamPart(ctx, st, name, head, br)
		if err != nil {
			return nil, blobs, err
		}
		blobs = append(blobs, b)
		if want := rec.PayloadSize; want != nil && *want != b.Size {
			return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "record %d: payload_size %d does not match the %d bytes of its part", i, *want, b.Size)
		}
		if want := rec.PayloadChecksum; want != nil && strings.TrimPrefix(*want, "sha256:") != b.SHA256 {
			return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "record %d: payload_checksum does not match the payload (sha256 %s)", i, b.SHA256)
		}
		size, sum, ref := b.Size, b.SHA256, b.Ref
		rec.BinaryPayload, rec.PayloadSize, rec.PayloadChecksum, rec.PayloadRef = nil, &size, &sum, &ref
	}
	if !seen {
		return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "multipart body has no \"metadata\" part")
	}
	// A record that declares a payload but got no bytes would be stored
	// without its artifact: refuse it, as the reference does.
	for i := range recs {
		if recs[i].PayloadSize != nil && !parts[i] && recs[i].BinaryPayload == nil {
			return nil, blobs, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "record %d declares payload_size but no part named %q carries its bytes", i, strconv.Itoa(i))
		}
	}
	return recs, blobs, nil
}

// streamPart writes a part larger than the inline size to a payload
// object: head, what was read of it already, then the rest of r.
func (s *Server) streamPart(ctx context.Context, st *rollout.Store, name string, head []byte, r io.Reader) (rollout.Blob, error) {
	w, err := st.CreateBlob(ctx)
	if err != nil {
		return rollout.Blob{}, err
	}
	defer w.Abort()
	limit := s.blobLimit()
	if _, err := w.Write(head); err != nil {
		return rollout.Blob{}, err
	}
	n, err := io.Copy(w, bodyReader{io.LimitReader(r, limit-int64(len(head))+1)})
	var be bodyErr
	if errors.As(err, &be) {
		return rollout.Blob{}, partError(name, be.error)
	}
	if err != nil {
		return rollout.Blob{}, err // the object store's: a 5xx
	}
	if int64(len(head))+n > limit {
		return rollout.Blob{}, httpapi.Errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, "payload part %q is larger than %d bytes (LC_MAX_BLOB_BYTES)", name, limit)
	}
	return w.Commit()
}

// partError words an error reading the body: the body limit passes through
// (413), anything else is a malformed body (400).
func partError(name string, err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	if name == "" {
		return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "malformed multipart body: %v", err)
	}
	return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "reading payload part %q: %v", name, err)
}

// bodyReader marks errors of reading the request, so that they are told
// apart from the object store's in a copy between the two.
type bodyReader struct{ r io.Reader }

type bodyErr struct{ error }

func (e bodyErr) Unwrap() error { return e.error }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = bodyErr{err}
	}
	return n, err
}

// heldBytes counts the bytes of a multipart body kept in memory.
type heldBytes struct{ n, max int64 }

// left is what may still be read into memory, plus one to see an excess.
func (h heldBytes) left() int64 { return h.max - h.n + 1 }

// full is the error of a body whose in-memory part is over the body limit:
// the same 413 as any body over it.
func (h heldBytes) full() error { return &http.MaxBytesError{Limit: h.max} }
