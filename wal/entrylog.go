package wal

import (
	"context"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// entryLog is where a writer makes its entries durable: one object per
// entry in the store (objectLog, the log of object stores) or frames in
// segment files on a local file system (segmentLog). See doc.go.
type entryLog interface {
	// put makes the entry of msgs (encoded in format f) durable at the
	// writer's next position, pos. An error wrapping ErrLogFailed means
	// what reached the log is unknown: the writer must stop.
	// recs are the batches msgs encode (the memtable's).
	put(ctx context.Context, pos uint64, f *entryFormat, msgs []*encoded, recs []arrow.RecordBatch) error
	// sealed says positions up to upTo are in committed generations.
	sealed(upTo uint64)
	// close releases the log's files when the writer stops.
	close()
}

// objectLog writes entries as objects, put-if-absent (Writer.putEntry,
// which adopts other writers' entries at the positions it finds taken and
// so may move the writer's position on). Sealed entries are deleted by
// the writer's collection.
type objectLog struct{ w *Writer }

func (l objectLog) put(ctx context.Context, _ uint64, f *entryFormat, msgs []*encoded, _ []arrow.RecordBatch) error {
	start := time.Now()
	err := l.w.putEntry(ctx, f.header, msgs)
	l.w.opts.Metrics.PutSeconds.Observe(since(start))
	return err
}

func (objectLog) sealed(uint64) {}
func (objectLog) close()        {}

// put appends the entry as a frame and flushes it.
func (l *segmentLog) put(_ context.Context, pos uint64, f *entryFormat, msgs []*encoded, recs []arrow.RecordBatch) error {
	start := time.Now()
	var frame []byte
	if s := l.cur; s != nil && s.direct && !l.cutNext {
		// Assembled in the aligned buffer after room for the segment's
		// tail, where the direct write takes it without a copy (direct.go).
		t := len(s.tail)
		buf := l.alignedBuf(int(alignUp(int64(f.header.size(msgs, t+frameHeaderSize)))))
		frame = f.header.assemble(msgs, pos, t+frameHeaderSize, buf)[t:]
		l.buf = nil // the first frame's, assembled before the segment was known
	} else {
		frame = f.header.assemble(msgs, pos, frameHeaderSize, l.buf)
		if cap(frame) <= maxKeptFrameBuffer {
			l.buf = frame[:0] // written by the time append returns (io.WriterAt keeps nothing)
		} else {
			l.buf = nil
		}
	}
	if err := l.append(pos, frame); err != nil {
		return err
	}
	if l.genRoot != "" {
		l.notePlaced(l.cur.off-int64(len(frame)), f.header.msg, msgs, recs)
	}
	if l.metrics != nil {
		l.metrics.SyncSeconds.Observe(since(start))
	}
	return nil
}

// sealed retires the closed segments whose frames are all sealed.
func (l *segmentLog) sealed(upTo uint64) { l.collect(upTo) }
