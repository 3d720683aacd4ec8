package wal

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const (
	metaEpoch    = "lc.epoch"
	metaShard    = "lc.shard"
	metaPosition = "lc.position"
)

func entryKey(shard string, pos uint64) string {
	return fmt.Sprintf("%swal/%020d.arrow", shardDir(shard), pos)
}

// encodeBatch returns rec as one IPC record batch message, the unit an
// entry is made of after its schema message. Appenders encode their own
// batches, in parallel, so that the writer's loop only concatenates.
func encodeBatch(rec arrow.RecordBatch) ([]byte, error) {
	p, err := ipc.GetRecordBatchPayload(rec)
	if err != nil {
		return nil, fmt.Errorf("wal: encode batch: %w", err)
	}
	defer p.Release()
	var buf bytes.Buffer
	buf.Grow(int(recordBytes(rec)) + 64*rec.Schema().NumFields() + 1024)
	if _, err := p.WritePayload(&buf); err != nil {
		return nil, fmt.Errorf("wal: encode batch: %w", err)
	}
	return buf.Bytes(), nil
}

// endOfStream is the IPC stream's end marker: a continuation and a zero
// metadata length.
var endOfStream = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// entryHeader is the schema message of a writer's entries, built once: the
// position is written as 20 digits (zero-padded, the width of any uint64),
// so each entry only patches those bytes. Building the message costs about
// as much as writing a small entry.
type entryHeader struct {
	msg    []byte
	posOff int // where the 20 position digits start in msg
}

const positionWidth = 20

func newEntryHeader(s *arrow.Schema, shard string, epoch uint64) (*entryHeader, error) {
	const sentinel = "98765432109876543210" // positionWidth characters, found once below
	md := arrow.NewMetadata(
		[]string{metaEpoch, metaShard, metaPosition},
		[]string{strconv.FormatUint(epoch, 10), shard, sentinel},
	)
	sp := ipc.GetSchemaPayload(arrow.NewSchema(s.Fields(), &md), memory.DefaultAllocator)
	defer sp.Release()
	var buf bytes.Buffer
	if _, err := sp.WritePayload(&buf); err != nil {
		return nil, fmt.Errorf("wal: encode entry schema: %w", err)
	}
	msg := buf.Bytes()
	off := bytes.Index(msg, []byte(sentinel))
	if off < 0 || bytes.Index(msg[off+1:], []byte(sentinel)) >= 0 {
		return nil, fmt.Errorf("wal: entry schema: cannot place the position")
	}
	return &entryHeader{msg: msg, posOff: off}, nil
}

// assemble returns the entry at pos made of msgs, after headroom bytes
// left for the caller (a segment frame's header).
func (h *entryHeader) assemble(msgs [][]byte, pos uint64, headroom int) []byte {
	n := headroom + len(h.msg) + len(endOfStream)
	for _, m := range msgs {
		n += len(m)
	}
	out := make([]byte, headroom, n)
	out = append(out, h.msg...)
	var digits [positionWidth]byte
	v := pos
	for i := positionWidth - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	copy(out[headroom+h.posOff:], digits[:])
	for _, m := range msgs {
		out = append(out, m...)
	}
	return append(out, endOfStream...)
}

// entry is a decoded WAL entry.
type entry struct {
	epoch    uint64
	shard    string
	position uint64
	batches  []arrow.RecordBatch
}

func decodeEntry(b []byte) (*entry, error) {
	r, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("wal: decode entry: %w", err)
	}
	defer r.Release()
	e := &entry{}
	md := r.Schema().Metadata()
	if i := md.FindKey(metaEpoch); i >= 0 {
		e.epoch, _ = strconv.ParseUint(md.Values()[i], 10, 64)
	}
	if i := md.FindKey(metaShard); i >= 0 {
		e.shard = md.Values()[i]
	}
	if i := md.FindKey(metaPosition); i >= 0 {
		e.position, _ = strconv.ParseUint(md.Values()[i], 10, 64)
	}
	plain := arrow.NewSchema(r.Schema().Fields(), nil)
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		e.batches = append(e.batches, arrowRecordWithSchema(plain, rec))
		rec.Release()
	}
	if err := r.Err(); err != nil {
		e.release()
		return nil, fmt.Errorf("wal: decode entry: %w", err)
	}
	return e, nil
}

func (e *entry) release() {
	for _, b := range e.batches {
		b.Release()
	}
}
