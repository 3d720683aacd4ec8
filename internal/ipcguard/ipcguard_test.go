package ipcguard_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/internal/hostile"
	"github.com/lance-context/lance-context/internal/ipcguard"
)

var limits = ipcguard.Limits{MaxDepth: 32, MaxFields: 1024, MaxMetadata: 1 << 20, MaxMessage: 2 << 20, MaxDecoded: 64 << 20}

// reserved is l with n bytes reserved for the stream.
func reserved(l ipcguard.Limits, n int) ipcguard.Limits {
	l.Reserved = int64(n)
	return l
}

// readAll reads a stream through the guard as the worker does, and
// returns the rows read.
func readAll(stream []byte, l ipcguard.Limits) (int64, error) {
	rd, err := ipc.NewReaderFromMessageReader(ipcguard.NewReader(bytes.NewReader(stream), l))
	if err != nil {
		return 0, err
	}
	defer rd.Release()
	var rows int64
	for rd.Next() {
		rows += rd.RecordBatch().NumRows()
	}
	return rows, rd.Err()
}

// TestPassesWhatArrowGoWrites: streams arrow-go writes (nested types,
// dictionaries with deltas, several batches, an empty batch) read the
// same through the guard.
func TestPassesWhatArrowGoWrites(t *testing.T) {
	mem := memory.DefaultAllocator
	rel := arrow.ListOf(arrow.StructOf(
		arrow.Field{Name: "target_id", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "weight", Type: arrow.PrimitiveTypes.Float32, Nullable: true}))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "relationships", Type: rel, Nullable: true, Metadata: arrow.NewMetadata([]string{"k"}, []string{"v"})},
	}, &arrow.Metadata{})
	var w bytes.Buffer
	iw := ipc.NewWriter(&w, ipc.WithSchema(schema))
	for _, n := range []int{3, 0, 5} {
		b := array.NewRecordBuilder(mem, schema)
		for i := range n {
			b.Field(0).(*array.StringBuilder).Append(strings.Repeat("x", i))
			lb := b.Field(1).(*array.ListBuilder)
			lb.Append(true)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append("t")
			sb.FieldBuilder(1).(*array.Float32Builder).Append(1)
		}
		rec := b.NewRecordBatch()
		if err := iw.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
	}
	if err := iw.Close(); err != nil {
		t.Fatal(err)
	}
	if rows, err := readAll(w.Bytes(), limits); err != nil || rows != 8 {
		t.Fatalf("nested: %d rows, %v", rows, err)
	}
	if rows, err := readAll(hostile.DictionaryDeltas(20, 16), limits); err != nil || rows != 20 {
		t.Fatalf("dictionary deltas: %d rows, %v", rows, err)
	}
	// The same with the stream's length reserved, whole or in part.
	for _, reserved := range []int64{int64(w.Len()), int64(w.Len()) / 2, 1} {
		l := limits
		l.Reserved = reserved
		if rows, err := readAll(w.Bytes(), l); err != nil || rows != 8 {
			t.Fatalf("nested, %d bytes reserved: %d rows, %v", reserved, rows, err)
		}
	}
}

// bigStream is one batch of a string column holding about n bytes.
func bigStream(t *testing.T, n int) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "content", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	row := strings.Repeat("y", 1000)
	for range n / len(row) {
		b.Field(0).(*array.StringBuilder).Append(row)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var w bytes.Buffer
	iw := ipc.NewWriter(&w, ipc.WithSchema(schema))
	if err := iw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := iw.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

// TestReservedBodiesAreReadInOneBuffer: a body within the bytes reserved
// for the stream is read into one buffer of its length; without a
// reservation it grows by doubling as the bytes arrive, and each doubling
// allocates and copies again (a fifth of an Arrow append's CPU).
func TestReservedBodiesAreReadInOneBuffer(t *testing.T) {
	stream := bigStream(t, 8<<20)
	alloc := func(reserved int64) uint64 {
		l := limits
		l.Reserved = reserved
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := readAll(stream, l); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	size := uint64(len(stream))
	if got := alloc(int64(len(stream))); got > size+size/4 {
		t.Errorf("with the stream's length reserved, reading %d bytes allocated %d", size, got)
	}
	if got := alloc(0); got < size+size/2 {
		t.Errorf("without a reservation, reading %d bytes allocated only %d: the doubling this test compares against is gone", size, got)
	}
}

// TestRefusesHostileStreams: each stream that crashes or floods arrow-go's
// own reader is refused with the limit it crossed. CyclicSchema (a few
// hundred bytes) overflowed the stack of a goroutine reading it with
// ipc.NewReader ("fatal error: stack overflow"), UnsentBody(1<<40) made it
// allocate a terabyte ("fatal error: runtime: out of memory"): both kill
// the process, so they are not run against arrow-go here.
func TestRefusesHostileStreams(t *testing.T) {
	small := limits
	small.MaxDecoded = 1 << 20
	for _, c := range []struct {
		name     string
		stream   []byte
		l        ipcguard.Limits
		want     string
		tooLarge bool
	}{
		{"cyclic schema", hostile.CyclicSchema(), limits, "nested deeper than 32 levels", false},
		{"deep schema", hostile.DeepSchema(40_000), limits, "nested deeper than 32 levels", false},
		{"wide schema", hostile.WideSchema(50_000), limits, "more than 1024 fields", false},
		{"repeated metadata", hostile.RepeatedMetadata(100_000, 1000), limits, "bytes of field names and custom metadata", false},
		{"unsent terabyte body", hostile.UnsentBody(1 << 40), limits, "decodes to more than 67108864 bytes", true},
		{"unsent body under the limit", hostile.UnsentBody(60 << 20), limits, "unexpected EOF", false},
		{"unsent body past the bytes reserved", hostile.UnsentBody(60 << 20), reserved(limits, len(hostile.UnsentBody(60<<20))), "unexpected EOF", false},
		{"compressed buffers", hostile.Compressed(), limits, "compressed Arrow IPC buffers are not accepted", false},
		{"dictionary deltas", hostile.DictionaryDeltas(300, 1024), small, "dictionary is concatenated with its deltas", true},
		{"large metadata", hostile.WideSchema(1000), ipcguard.Limits{MaxMessage: 4096}, "metadata of", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := readAll(c.stream, c.l)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			var ge *ipcguard.Error
			if c.want != "unexpected EOF" && (!errors.As(err, &ge) || ge.TooLarge != c.tooLarge) {
				t.Fatalf("got %#v, want an *ipcguard.Error (too large: %v)", err, c.tooLarge)
			}
			// Allocations are bounded by what arrived, not by what the
			// metadata states.
			if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
				t.Errorf("allocated %d MB for a %d-byte stream", got>>20, len(c.stream))
			}
		})
	}
}

// FuzzReader reads arbitrary streams through the guard into arrow-go's
// reader: whatever the bytes, it must return (an error or batches), never
// crash the process or allocate past the limits.
func FuzzReader(f *testing.F) {
	f.Add(hostile.CyclicSchema())
	f.Add(hostile.WideSchema(3))
	f.Add(hostile.DeepSchema(5))
	f.Add(hostile.UnsentBody(1 << 30))
	f.Add(hostile.DictionaryDeltas(3, 8))
	f.Fuzz(func(t *testing.T, stream []byte) {
		l := limits
		l.MaxDecoded = 1 << 20
		_, _ = readAll(stream, l)
	})
}
