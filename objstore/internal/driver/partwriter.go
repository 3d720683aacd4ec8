package driver

import (
	"context"
)

// Multipart is one backend's upload of an object in parts (S3's
// multipart upload, Azure's staged blocks), for PartWriter.
type Multipart interface {
	// Part uploads part n (0-based) of the object; p is reused after it
	// returns.
	Part(ctx context.Context, n int, p []byte) error
	// Complete makes the object of parts 0 to n-1 visible, at once.
	Complete(ctx context.Context, n int) error
	// Whole writes an object smaller than one part in one request, when
	// no part was uploaded.
	Whole(ctx context.Context, p []byte) error
	// Abort releases the parts uploaded, after a failed Close or on the
	// writer's Abort; it may be called again and must then do nothing.
	Abort(ctx context.Context) error
}

// PartWriter is the streaming writer (objstore.ObjectWriter) of the cloud
// drivers that upload in parts: it buffers one part of size bytes,
// uploads each full one, and on Close sends the last and completes the
// upload, or sends an object smaller than a part whole. A failed Write
// is sticky: Close then fails and aborts.
type PartWriter struct {
	ctx       context.Context
	m         Multipart
	size      int
	buf       []byte
	parts     int
	done      bool
	committed bool
	err       error
}

// NewPartWriter returns a writer of parts of size bytes through m; ctx
// is the context of all its requests.
func NewPartWriter(ctx context.Context, size int64, m Multipart) *PartWriter {
	return &PartWriter{ctx: ctx, m: m, size: int(size)}
}

// Write implements io.Writer.
func (w *PartWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, ErrWriterDone
	}
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		if w.buf == nil {
			// An object smaller than a part costs its own size.
			w.buf = make([]byte, 0, min(len(p), w.size))
		}
		c := min(w.size-len(w.buf), len(p))
		w.buf = append(w.buf, p[:c]...)
		p, n = p[c:], n+c
		if len(w.buf) == w.size {
			if err := w.flush(); err != nil {
				w.err = err
				return n, err
			}
		}
	}
	return n, nil
}

func (w *PartWriter) flush() error {
	if err := w.m.Part(w.ctx, w.parts, w.buf); err != nil {
		return err
	}
	w.parts++
	w.buf = w.buf[:0]
	return nil
}

// Close commits the object; on failure it aborts the upload.
func (w *PartWriter) Close() error {
	if w.done {
		return ErrWriterDone
	}
	w.done = true
	err := w.err
	if err == nil {
		err = w.commit()
	}
	w.buf = nil
	if err != nil {
		_ = w.m.Abort(w.ctx)
		return err
	}
	w.committed = true
	return nil
}

func (w *PartWriter) commit() error {
	if w.parts == 0 {
		return w.m.Whole(w.ctx, w.buf)
	}
	if len(w.buf) > 0 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	return w.m.Complete(w.ctx, w.parts)
}

// Abort discards what was written; after a successful Close it does
// nothing.
func (w *PartWriter) Abort() error {
	w.done = true
	w.buf = nil
	if w.committed {
		return nil
	}
	return w.m.Abort(w.ctx)
}
