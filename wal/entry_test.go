package wal

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// TestEntryIsAnArrowStream: an entry assembled from separately encoded
// batch messages and the writer's header (position patched in) is byte for
// byte the IPC stream arrow-go's stream writer makes of the same batches,
// so any Arrow reader reads it.
func TestEntryIsAnArrowStream(t *testing.T) {
	a, b := rows("a", "b"), rows("c")
	defer a.Release()
	defer b.Release()
	got, err := encodeEntry(rowSchema, []arrow.RecordBatch{a, b}, "s1", 3, 42)
	if err != nil {
		t.Fatal(err)
	}
	md := arrow.NewMetadata([]string{metaEpoch, metaShard, metaPosition}, []string{"3", "s1", fmt.Sprintf("%020d", 42)})
	ws := arrow.NewSchema(rowSchema.Fields(), &md)
	var want bytes.Buffer
	w := ipc.NewWriter(&want, ipc.WithSchema(ws))
	for _, r := range []arrow.RecordBatch{a, b} {
		if err := w.Write(arrowRecordWithSchema(ws, r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("entry differs from the stream writer's output (%d vs %d bytes)", len(got), want.Len())
	}
	e, err := decodeEntry(got)
	if err != nil {
		t.Fatal(err)
	}
	defer e.release()
	if e.epoch != 3 || e.shard != "s1" || e.position != 42 || len(e.batches) != 2 || e.batches[0].NumRows() != 2 {
		t.Fatalf("decoded %+v", e)
	}
}

// encodeEntry makes the entry at pos of batches, as a writer would (tests).
func encodeEntry(s *arrow.Schema, batches []arrow.RecordBatch, shard string, epoch, pos uint64) ([]byte, error) {
	msgs := make([][]byte, len(batches))
	for i, b := range batches {
		m, err := encodeBatch(b)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	h, err := newEntryHeader(s, shard, epoch)
	if err != nil {
		return nil, err
	}
	return h.assemble(msgs, pos, 0), nil
}
