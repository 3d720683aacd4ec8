// Package hostile makes request bodies built to hurt a server, for the
// tests that show it survives them: JSON nested millions deep, and Arrow
// IPC streams whose metadata loops, nests or repeats, states bodies it
// does not send, or compresses buffers. Only tests import it.
package hostile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// NestedJSON is n '[' (unclosed) inside prefix and suffix: prefix
// `{"records":[{"rollout_id":"r","metadata":` puts it in a field.
func NestedJSON(prefix string, n int, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(len(prefix) + n + len(suffix))
	b.WriteString(prefix)
	b.WriteString(strings.Repeat("[", n))
	b.WriteString(suffix)
	return b.Bytes()
}

// The flatbuffer enums of Message.fbs and Schema.fbs used here.
const (
	metadataV5      = 4
	headerSchema    = 1
	headerRecord    = 3
	typeNull        = 1
	typeStruct      = 13
	messageSlots    = 5
	schemaSlots     = 4
	fieldSlots      = 7
	recordSlots     = 5
	keyValueSlots   = 2
	fieldChildren   = 5
	fieldCustomMeta = 6
)

// frame writes one message of a stream: continuation marker, metadata
// length (padded to 8 bytes), metadata, then a body of bodyLen bytes of
// which only send are written (a body shorter than stated).
func frame(w *bytes.Buffer, meta []byte, send int) {
	pad := (8 - (len(meta)+8)%8) % 8
	_ = binary.Write(w, binary.LittleEndian, uint32(0xFFFFFFFF))
	_ = binary.Write(w, binary.LittleEndian, int32(len(meta)+pad))
	w.Write(meta)
	w.Write(make([]byte, pad))
	w.Write(make([]byte, send))
}

// end writes the end-of-stream marker.
func end(w *bytes.Buffer) {
	_ = binary.Write(w, binary.LittleEndian, uint32(0xFFFFFFFF))
	_ = binary.Write(w, binary.LittleEndian, int32(0))
}

// message finishes a Message table around a header.
func message(b *flatbuffers.Builder, headerType byte, header flatbuffers.UOffsetT, bodyLen int64, customMeta flatbuffers.UOffsetT) []byte {
	b.StartObject(messageSlots)
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, headerType, 0)
	b.PrependUOffsetTSlot(2, header, 0)
	b.PrependInt64Slot(3, bodyLen, 0)
	if customMeta != 0 {
		b.PrependUOffsetTSlot(4, customMeta, 0)
	}
	b.Finish(b.EndObject())
	return b.FinishedBytes()
}

func emptyTable(b *flatbuffers.Builder) flatbuffers.UOffsetT {
	b.StartObject(0)
	return b.EndObject()
}

// field builds a Field: a struct of children, or a null leaf without.
func field(b *flatbuffers.Builder, name string, children []flatbuffers.UOffsetT, customMeta flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	n := b.CreateString(name)
	var kids flatbuffers.UOffsetT
	typ, tt := emptyTable(b), byte(typeNull)
	if children != nil {
		kids = b.CreateVectorOfTables(children)
		tt = typeStruct
	}
	b.StartObject(fieldSlots)
	b.PrependUOffsetTSlot(0, n, 0)
	b.PrependBoolSlot(1, true, false)
	b.PrependByteSlot(2, tt, 0)
	b.PrependUOffsetTSlot(3, typ, 0)
	if children != nil {
		b.PrependUOffsetTSlot(fieldChildren, kids, 0)
	}
	if customMeta != 0 {
		b.PrependUOffsetTSlot(fieldCustomMeta, customMeta, 0)
	}
	return b.EndObject()
}

func schemaMessage(b *flatbuffers.Builder, fields []flatbuffers.UOffsetT) []byte {
	fv := b.CreateVectorOfTables(fields)
	b.StartObject(schemaSlots)
	b.PrependUOffsetTSlot(1, fv, 0)
	return message(b, headerSchema, b.EndObject(), 0, 0)
}

func stream(metas ...[]byte) []byte {
	var w bytes.Buffer
	for _, m := range metas {
		frame(&w, m, 0)
	}
	end(&w)
	return w.Bytes()
}

// DeepSchema is a stream whose one column is a struct nested depth
// levels deep.
func DeepSchema(depth int) []byte {
	b := flatbuffers.NewBuilder(depth * 64)
	f := field(b, "leaf", nil, 0)
	for range depth - 1 {
		f = field(b, "s", []flatbuffers.UOffsetT{f}, 0)
	}
	return stream(schemaMessage(b, []flatbuffers.UOffsetT{f}))
}

// WideSchema is a stream of a schema with n null columns.
func WideSchema(n int) []byte {
	b := flatbuffers.NewBuilder(n * 48)
	fs := make([]flatbuffers.UOffsetT, n)
	for i := range fs {
		fs[i] = field(b, "c", nil, 0)
	}
	return stream(schemaMessage(b, fs))
}

// CyclicSchema is a stream of a small schema whose struct column lists
// itself among its children: flatbuffer offsets are uint32 and wrap, so
// a child can point back at its parent. A reader that follows children
// without a bound recurses until its stack overflows. The message is a
// few hundred bytes.
func CyclicSchema() []byte {
	b := flatbuffers.NewBuilder(256)
	leaf := field(b, "leaf", nil, 0)
	n := b.CreateString("loop")
	kids := b.CreateVectorOfTables([]flatbuffers.UOffsetT{leaf})
	typ := emptyTable(b)
	b.StartObject(fieldSlots)
	b.PrependUOffsetTSlot(0, n, 0)
	b.PrependByteSlot(2, typeStruct, 0)
	b.PrependUOffsetTSlot(3, typ, 0)
	b.PrependUOffsetTSlot(fieldChildren, kids, 0)
	loop := b.EndObject()
	meta := schemaMessage(b, []flatbuffers.UOffsetT{loop})
	// Offsets count from the end of the finished buffer.
	size := uint32(len(meta))
	loopPos, elemPos := size-uint32(loop), size-uint32(kids)+4
	binary.LittleEndian.PutUint32(meta[elemPos:], loopPos-elemPos) // wraps: points backwards
	return stream(meta)
}

// RepeatedMetadata is a stream whose one column's custom metadata lists
// one key-value n times, with a value of size bytes: n*size bytes for a
// reader that copies each entry, from a message of about size + 4n bytes.
func RepeatedMetadata(n, size int) []byte {
	b := flatbuffers.NewBuilder(size + 4*n + 256)
	k, v := b.CreateString("k"), b.CreateString(strings.Repeat("v", size))
	b.StartObject(keyValueSlots)
	b.PrependUOffsetTSlot(0, k, 0)
	b.PrependUOffsetTSlot(1, v, 0)
	kv := b.EndObject()
	kvs := make([]flatbuffers.UOffsetT, n)
	for i := range kvs {
		kvs[i] = kv
	}
	meta := b.CreateVectorOfTables(kvs)
	f := field(b, "c", nil, meta)
	return stream(schemaMessage(b, []flatbuffers.UOffsetT{f}))
}

// UnsentBody is a stream of a valid one-column schema, then a record
// batch message that states a body of bodyLen bytes and sends none.
func UnsentBody(bodyLen int64) []byte {
	b := flatbuffers.NewBuilder(256)
	sch := schemaMessage(b, []flatbuffers.UOffsetT{field(b, "c", nil, 0)})
	var w bytes.Buffer
	frame(&w, sch, 0)
	b = flatbuffers.NewBuilder(256)
	b.StartVector(16, 1, 8) // one FieldNode{length 1, null_count 1}
	b.PrependInt64(1)
	b.PrependInt64(1)
	nodes := b.EndVector(1)
	b.StartObject(recordSlots)
	b.PrependInt64Slot(0, 1, 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	frame(&w, message(b, headerRecord, b.EndObject(), bodyLen, 0), 0)
	return w.Bytes()
}

// Compressed is a valid stream of one int64 column whose buffers are
// zstd-compressed (IPC body compression).
func Compressed() []byte {
	schema := arrow.NewSchema([]arrow.Field{{Name: "c", Type: arrow.PrimitiveTypes.Int64}}, nil)
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	bld.AppendValues([]int64{1, 2, 3}, nil)
	col := bld.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 3)
	var w bytes.Buffer
	iw := ipc.NewWriter(&w, ipc.WithSchema(schema), ipc.WithZstd())
	if err := iw.Write(rec); err != nil {
		panic(err)
	}
	if err := iw.Close(); err != nil {
		panic(err)
	}
	return w.Bytes()
}

// DictionaryDeltas is a valid stream of one dictionary-encoded string
// column: a dictionary, then n times a delta of one value of size bytes
// and a record batch that uses it. A reader concatenates the whole
// dictionary again for each batch: about n*n*size/2 bytes copied (and
// kept, by batches that hold each version) from a stream of n*size.
func DictionaryDeltas(n, size int) []byte {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt}}, nil)
	var w bytes.Buffer
	iw := ipc.NewWriter(&w, ipc.WithSchema(schema), ipc.WithDictionaryDeltas(true))
	bld := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
	for i := range n {
		// The builder keeps its dictionary: each batch adds one value,
		// which the writer sends as a delta.
		v := fmt.Sprintf("%0*d", size, i)
		if err := bld.AppendString(v); err != nil {
			panic(err)
		}
		col := bld.NewArray()
		rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1)
		if err := iw.Write(rec); err != nil {
			panic(err)
		}
		rec.Release()
		col.Release()
	}
	if err := iw.Close(); err != nil {
		panic(err)
	}
	return w.Bytes()
}
