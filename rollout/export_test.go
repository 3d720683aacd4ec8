package rollout

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestParquetWriterRoundTripsAndSkipsUselessDictionaries: what
// ParquetWriter writes reads back (pqarrow) equal to the batches it was
// given, in row groups of at most parquetGroupRows rows, with the Arrow
// schema kept; id and float columns are not dictionary-encoded, a
// repeating text column is.
func TestParquetWriterRoundTripsAndSkipsUselessDictionaries(t *testing.T) {
	cols := []string{ColID, ColRolloutID, ColSequenceOrder, "reward", "output_logprobs", ColCreatedAt, "content"}
	schema := ExportSchema(cols)
	var recs []Record
	for i := range parquetGroupRows + 1000 { // two row groups
		at := time.Unix(1_700_000_000+int64(i), 1000).UTC()
		r := Record{ID: fmt.Sprintf("id-%07d", i), RolloutID: fmt.Sprintf("r-%d", i/64), SequenceOrder: int32(i % 64), Role: "assistant", ContentType: "text/plain", CreatedAt: &at}
		if i%5 != 0 {
			rw := float32(i) / 3
			r.Reward = &rw
			r.OutputLogprobs = []float32{-float32(i), -0.5}
		}
		if i%7 == 0 {
			c := "a step"
			r.Content = &c
		}
		recs = append(recs, r)
	}
	full := buildBatch(recs)
	defer full.Release()
	in, err := project(full, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	var buf bytes.Buffer
	pw, err := NewParquetWriter(&buf, schema)
	if err != nil {
		t.Fatal(err)
	}
	// In uneven batches, as a scan hands them out.
	for off := int64(0); off < in.NumRows(); off += 50_000 {
		b := in.NewSlice(off, min(off+50_000, in.NumRows()))
		err := pw.Write(b)
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}

	rd, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.NumRowGroups() != 2 || rd.RowGroup(0).NumRows() != parquetGroupRows {
		t.Fatalf("%d row groups, the first of %d rows; want 2, %d", rd.NumRowGroups(), rd.RowGroup(0).NumRows(), parquetGroupRows)
	}
	dict := map[string]bool{}
	md := rd.MetaData().RowGroup(0)
	for i := range md.NumColumns() {
		cc, err := md.ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		dict[cc.PathInSchema().String()] = slices.Contains(cc.Encodings(), parquet.Encodings.RLEDict) || slices.Contains(cc.Encodings(), parquet.Encodings.PlainDict)
	}
	for path, want := range map[string]bool{ColID: false, "reward": false, "output_logprobs.list.element": false, ColRolloutID: true, ColSequenceOrder: true, "content": true} {
		if got, ok := dict[path]; !ok || got != want {
			t.Errorf("column %s: dictionary %v (present %v), want %v; all: %v", path, got, ok, want, dict)
		}
	}

	ar, err := pqarrow.NewFileReader(rd, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := ar.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	// The same names and types (the element of a list is named "element"
	// in Parquet, "item" here), and the same values.
	if tbl.NumCols() != int64(len(cols)) || tbl.NumRows() != in.NumRows() {
		t.Fatalf("read back %d columns, %d rows; want %d, %d", tbl.NumCols(), tbl.NumRows(), len(cols), in.NumRows())
	}
	for i, c := range cols {
		f := tbl.Schema().Field(i)
		if f.Name != c || f.Type.ID() != schema.Field(i).Type.ID() || f.Type.String() != schema.Field(i).Type.String() && f.Type.ID() != arrow.LIST {
			t.Errorf("column %d: %s %s, want %s %s", i, f.Name, f.Type, c, schema.Field(i).Type)
		}
		got, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		gj, _ := got.MarshalJSON()
		wj, _ := in.Column(i).MarshalJSON()
		got.Release()
		if !bytes.Equal(gj, wj) {
			t.Errorf("column %s reads back otherwise than written: %.200s vs %.200s", c, gj, wj)
		}
	}
}
