package file

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/schema"
)

// rolloutSchema is the shape of a stored RL rollout.
var rolloutSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String},
	{Name: "text", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "step", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// rolloutBatch builds n rollout rows starting at row first and returns the
// batch and its raw size: string bytes, 4 bytes per token, fixed widths.
func rolloutBatch(first, n int) (arrow.RecordBatch, int64) {
	var raw int64
	id := array.NewStringBuilder(mem)
	rid := array.NewStringBuilder(mem)
	text := array.NewLargeStringBuilder(mem)
	reward := array.NewFloat32Builder(mem)
	score := array.NewFloat64Builder(mem)
	step := array.NewInt64Builder(mem)
	ts := array.NewTimestampBuilder(mem, rolloutSchema.Field(6).Type.(*arrow.TimestampType))
	tok := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	tv := tok.ValueBuilder().(*array.Int32Builder)
	body := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23)[:1024]
	for i := first; i < first+n; i++ {
		s := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919)
		id.Append(s)
		r := fmt.Sprintf("rollout-%d", i/16)
		rid.Append(r)
		t := fmt.Sprintf("%06d", i) + body[6:]
		text.Append(t)
		reward.Append(float32(i%100) / 100)
		score.Append(float64(i) * 0.5)
		step.Append(int64(i % 16))
		ts.Append(arrow.Timestamp(1700000000000000 + int64(i)*1000))
		tok.Append(true)
		for k := range 64 {
			tv.Append(int32(i*64 + k))
		}
		raw += int64(len(s) + len(r) + len(t) + 4 + 8 + 8 + 8 + 64*4)
	}
	cols := []arrow.Array{id.NewArray(), rid.NewArray(), text.NewArray(), reward.NewArray(), score.NewArray(), step.NewArray(), ts.NewArray(), tok.NewArray()}
	rec := array.NewRecordBatch(rolloutSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec, raw
}

const benchRows, benchBatch = 64 << 10, 8 << 10

func rolloutBatches() ([]arrow.RecordBatch, int64) {
	var recs []arrow.RecordBatch
	var raw int64
	for first := 0; first < benchRows; first += benchBatch {
		r, n := rolloutBatch(first, benchBatch)
		recs = append(recs, r)
		raw += n
	}
	return recs, raw
}

// BenchmarkWrite encodes 64Ki rollout rows (about 90 MB raw) into one file.
func BenchmarkWrite(b *testing.B) {
	recs, raw := rolloutBatches()
	s, err := schema.FromArrow(rolloutSchema, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(raw)
	b.ReportAllocs()
	var size int64
	for b.Loop() {
		w, err := NewWriter(discard{}, s, WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		info, err := w.Finish()
		if err != nil {
			b.Fatal(err)
		}
		size = info.Size
	}
	b.ReportMetric(float64(size)/float64(raw), "file/raw")
}

// sliceSource serves ranges of an in-memory file without copying (the
// reader never writes into what a Source returns).
type sliceSource []byte

func (s sliceSource) ReadRange(_ context.Context, off, n int64) ([]byte, error) {
	return s[off : off+n : off+n], nil
}

// BenchmarkScan opens the file and reads every column of every row.
func BenchmarkScan(b *testing.B) {
	recs, raw := rolloutBatches()
	data, _ := writeFile(b, rolloutSchema, WriterOptions{}, recs...)
	ids := make([]int32, 0, len(rolloutSchema.Fields()))
	r, err := Open(context.Background(), sliceSource(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range r.Schema().Fields {
		ids = append(ids, f.ID)
	}
	b.SetBytes(raw)
	b.ReportAllocs()
	for b.Loop() {
		r, err := Open(context.Background(), sliceSource(data), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		rec, err := r.Read(context.Background(), ids, 0, r.NumRows())
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
}

// BenchmarkPointRead reads one row of every column (a get by row).
func BenchmarkPointRead(b *testing.B) {
	recs, _ := rolloutBatches()
	data, _ := writeFile(b, rolloutSchema, WriterOptions{}, recs...)
	r, err := Open(context.Background(), sliceSource(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	var ids []int32
	for _, f := range r.Schema().Fields {
		ids = append(ids, f.ID)
	}
	b.ReportAllocs()
	row := int64(0)
	for b.Loop() {
		rec, err := r.Read(context.Background(), ids, row, row+1)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
		row = (row + 7919) % r.NumRows()
	}
}
