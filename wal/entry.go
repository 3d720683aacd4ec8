package wal

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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

// encoded is record batch messages of an entry, as pieces that concatenate
// to them. The large pieces are the batches' own buffers, not copies: the
// one copy of a row on its way to the log is the entry's assembly (and, for
// a segment, the kernel's). Appenders encode their own batches, in
// parallel, so that the writer's loop only concatenates.
type encoded struct {
	parts    [][]byte
	size     int
	payloads []ipc.Payload // hold the buffers parts point into
	// owned is set while the last part is a copy of small writes, which the
	// next small write may extend in place.
	owned bool
}

// copyBelow: writes shorter than this are copied (the IPC writer reuses
// its scratch for lengths and padding); longer ones are buffers of the
// batch or its message header, referenced.
const copyBelow = 256

func (e *encoded) Write(p []byte) (int, error) {
	e.size += len(p)
	if len(p) >= copyBelow {
		e.parts = append(e.parts, p)
		e.owned = false
		return len(p), nil
	}
	if n := len(e.parts); e.owned && cap(e.parts[n-1])-len(e.parts[n-1]) >= len(p) {
		e.parts[n-1] = append(e.parts[n-1], p...)
		return len(p), nil
	}
	e.parts = append(e.parts, append(make([]byte, 0, 4*copyBelow), p...))
	e.owned = true
	return len(p), nil
}

// add encodes rec as one IPC record batch message.
func (e *encoded) add(rec arrow.RecordBatch) error {
	p, err := ipc.GetRecordBatchPayload(rec)
	if err != nil {
		return fmt.Errorf("wal: encode batch: %w", err)
	}
	e.payloads = append(e.payloads, p)
	if _, err := p.WritePayload(e); err != nil {
		return fmt.Errorf("wal: encode batch: %w", err)
	}
	return nil
}

func (e *encoded) release() {
	for i := range e.payloads {
		e.payloads[i].Release()
	}
	e.payloads, e.parts = nil, nil
}

// columnSet says which columns of the row schema an entry carries: byte i
// is 1 when column i is in. Entries leave out the nullable columns that are
// null in every row of every batch, so a sparse schema costs no bytes for
// the columns a workload does not fill (for 1 KB text records in the
// rollout schema: 1,328 bytes a row with all 38 columns, ~1,130 without
// the 30 null ones). Replay puts them back as nulls (widen).
type columnSet string

// presentColumns returns the columns of s that recs need: every required
// column, and every nullable one with a value in some row.
func presentColumns(s *arrow.Schema, recs []arrow.RecordBatch) columnSet {
	b := make([]byte, s.NumFields())
	for i, f := range s.Fields() {
		if !f.Nullable {
			b[i] = 1
			continue
		}
		for _, r := range recs {
			if c := r.Column(i); c.NullN() < c.Len() {
				b[i] = 1
				break
			}
		}
	}
	return columnSet(b)
}

// entryFormat is how a writer encodes entries of one column set: the
// projected schema and its schema message.
type entryFormat struct {
	cols   []int // columns of the row schema, in order
	full   bool  // all of them: batches are encoded as they are
	schema *arrow.Schema
	header *entryHeader
}

func newEntryFormat(s *arrow.Schema, set columnSet, shard string, epoch uint64) (*entryFormat, error) {
	f := &entryFormat{full: true}
	var fields []arrow.Field
	for i := range s.NumFields() {
		if set[i] == 1 {
			f.cols = append(f.cols, i)
			fields = append(fields, s.Field(i))
		} else {
			f.full = false
		}
	}
	f.schema = s
	if !f.full {
		f.schema = arrow.NewSchema(fields, nil)
	}
	h, err := newEntryHeader(f.schema, shard, epoch)
	if err != nil {
		return nil, err
	}
	f.header = h
	return f, nil
}

// encode adds rec, projected to the format's columns, to e as one IPC
// record batch message.
func (f *entryFormat) encode(e *encoded, rec arrow.RecordBatch) error {
	if f.full {
		return e.add(rec)
	}
	cols := make([]arrow.Array, len(f.cols))
	for i, c := range f.cols {
		cols[i] = rec.Column(c)
	}
	p := array.NewRecordBatch(f.schema, cols, rec.NumRows())
	defer p.Release()
	return e.add(p)
}

// widen returns rec with the columns of s it lacks added as nulls, or
// false when rec is not such a projection of s (a column of another type,
// one s does not have, or a required one missing).
func widen(rec arrow.RecordBatch, s *arrow.Schema) (arrow.RecordBatch, bool) {
	rs := rec.Schema()
	cols := make([]arrow.Array, 0, s.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	used := 0
	for _, f := range s.Fields() {
		idx := rs.FieldIndices(f.Name)
		switch {
		case len(idx) == 1:
			rf := rs.Field(idx[0])
			if rf.Nullable != f.Nullable || !arrow.TypeEqual(rf.Type, f.Type) {
				return nil, false
			}
			c := rec.Column(idx[0])
			c.Retain()
			cols = append(cols, c)
			used++
		case len(idx) == 0 && f.Nullable:
			cols = append(cols, array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rec.NumRows())))
		default:
			return nil, false
		}
	}
	if used != int(rec.NumCols()) {
		return nil, false
	}
	return array.NewRecordBatch(s, cols, rec.NumRows()), true
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
// left for the caller (a segment frame's header). It appends to buf[:0]
// when buf is large enough (a segment log reuses its buffer: allocating
// one clears it, which cost as much as the copy).
func (h *entryHeader) assemble(msgs []*encoded, pos uint64, headroom int, buf []byte) []byte {
	n := h.size(msgs, headroom)
	var out []byte
	if cap(buf) >= n {
		out = buf[:headroom]
	} else {
		out = make([]byte, headroom, n)
	}
	out = append(out, h.msg...)
	var digits [positionWidth]byte
	v := pos
	for i := positionWidth - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	copy(out[headroom+h.posOff:], digits[:])
	for _, m := range msgs {
		for _, p := range m.parts {
			out = append(out, p...)
		}
	}
	return append(out, endOfStream...)
}

// size is the length of the frame assemble makes of msgs after headroom.
func (h *entryHeader) size(msgs []*encoded, headroom int) int {
	n := headroom + len(h.msg) + len(endOfStream)
	for _, m := range msgs {
		n += m.size
	}
	return n
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
