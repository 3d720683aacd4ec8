package wal

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

const (
	metaEpoch    = "lc.epoch"
	metaShard    = "lc.shard"
	metaPosition = "lc.position"
)

func entryKey(shard string, pos uint64) string {
	return fmt.Sprintf("%swal/%020d.arrow", shardDir(shard), pos)
}

// encodeEntry writes batches (all with schema s) as one Arrow IPC stream
// whose schema metadata records who wrote it and where.
func encodeEntry(s *arrow.Schema, batches []arrow.RecordBatch, shard string, epoch, pos uint64) ([]byte, error) {
	md := arrow.NewMetadata(
		[]string{metaEpoch, metaShard, metaPosition},
		[]string{strconv.FormatUint(epoch, 10), shard, strconv.FormatUint(pos, 10)},
	)
	ws := arrow.NewSchema(s.Fields(), &md)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(ws))
	for _, b := range batches {
		rec := arrowRecordWithSchema(ws, b)
		if err := w.Write(rec); err != nil {
			return nil, fmt.Errorf("wal: encode entry: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("wal: encode entry: %w", err)
	}
	return buf.Bytes(), nil
}

// entry is a decoded WAL entry.
type entry struct {
	epoch   uint64
	batches []arrow.RecordBatch
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
