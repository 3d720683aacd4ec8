package wal

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/objstore"
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
	msgs := &encoded{}
	defer msgs.release()
	for _, b := range batches {
		if err := msgs.add(b); err != nil {
			return nil, err
		}
	}
	h, err := newEntryHeader(s, shard, epoch)
	if err != nil {
		return nil, err
	}
	return h.assemble([]*encoded{msgs}, pos, 0, nil), nil
}

// TestEntriesLeaveOutNullColumns: an entry carries only the columns with a
// value in some row (and the required ones); replay restores the others as
// nulls by itself, without the caller's Conform.
func TestEntriesLeaveOutNullColumns(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	o := opts(store)
	w := claim(t, o)
	b := array.NewRecordBuilder(memory.DefaultAllocator, rowSchema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"n1", "n2"}, nil)
	b.Field(1).(*array.Int64Builder).AppendNulls(2)
	nulls := b.NewRecordBatch()
	defer nulls.Release()
	b.Release()
	if err := w.Append(ctx, nulls); err != nil {
		t.Fatal(err)
	}
	if err := appendIDs(t, w, "v1"); err != nil { // v set: all columns
		t.Fatal(err)
	}
	w.Abandon()
	var fields []int
	for pos := uint64(1); pos <= 2; pos++ {
		data, err := store.Get(ctx, entryKey("s1", pos))
		if err != nil {
			t.Fatal(err)
		}
		e, err := decodeEntry(data)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, int(e.batches[0].NumCols()))
		e.release()
	}
	if !slices.Equal(fields, []int{1, 2}) {
		t.Fatalf("entries carry %v columns, want [1 2]", fields)
	}
	o.Conform = func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		return nil, fmt.Errorf("Conform called for %s", rec.Schema())
	}
	w2 := claim(t, o) // replays both entries and seals them
	defer w2.Abandon()
	wantIDs(t, store, "n1", "n2", "v1")
}

// TestRegression_SharedNullColumnsDoNotFillTheMemtable: a batch's all-null
// column may be a slice of a shared null array of thousands of rows
// (rollout builds sparse batches that way). Counting its buffers made a
// 1-row batch weigh kilobytes, so small appends filled MaxMemtableBytes and
// sealed every few seconds (single-record p99 +4 ms, twice the disk bytes).
func TestRegression_SharedNullColumnsDoNotFillTheMemtable(t *testing.T) {
	ids := rows("a")
	defer ids.Release()
	shared := array.MakeArrayOfNull(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64, 1<<16)
	defer shared.Release()
	v := array.NewSlice(shared, 0, 1)
	defer v.Release()
	rec := array.NewRecordBatch(rowSchema, []arrow.Array{ids.Column(0), v}, 1)
	defer rec.Release()
	if got := recordBytes(rec); got > 1024 {
		t.Fatalf("a 1-row batch counts %d bytes", got)
	}
}

// TestEncodedSharesBatchBuffers: encoding a batch for an entry copies none
// of its large buffers (the entry's assembly is the one copy), and small
// writes the IPC writer makes from reused scratch are copied, so the
// assembled entry is still the stream.
func TestEncodedSharesBatchBuffers(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	long := string(bytes.Repeat([]byte("x"), 4096))
	b.AppendValues([]string{long, long + "y"}, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(s, []arrow.Array{col}, 2)
	col.Release()
	defer rec.Release()
	enc := &encoded{}
	defer enc.release()
	if err := enc.add(rec); err != nil {
		t.Fatal(err)
	}
	values := col.(*array.String).ValueBytes()
	shared := false
	for _, p := range enc.parts {
		if len(p) == len(values) && unsafe.SliceData(p) == unsafe.SliceData(values) {
			shared = true
		}
	}
	if !shared {
		t.Fatalf("the value buffer (%d bytes) was copied into the encoding", len(values))
	}
	h, err := newEntryHeader(s, "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	// Assembling into a dirty reused buffer gives the same bytes as into a
	// new one.
	dirty := bytes.Repeat([]byte{0xee}, 3*enc.size)
	got := h.assemble([]*encoded{enc, enc}, 7, frameHeaderSize, dirty)[frameHeaderSize:]
	want := h.assemble([]*encoded{enc, enc}, 7, 0, nil)
	if !bytes.Equal(got, want) {
		t.Fatal("assembling into a reused buffer changed the entry")
	}
	e, err := decodeEntry(want)
	if err != nil {
		t.Fatal(err)
	}
	defer e.release()
	if len(e.batches) != 2 || e.position != 7 || e.batches[1].Column(0).(*array.String).Value(1) != long+"y" {
		t.Fatalf("decoded %d batches at %d", len(e.batches), e.position)
	}
}
