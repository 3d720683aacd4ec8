package wal

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// arrowRecordWithSchema returns a new record over rec's columns with schema s
// (same fields, other metadata). The caller owns the result.
func arrowRecordWithSchema(s *arrow.Schema, rec arrow.RecordBatch) arrow.RecordBatch {
	return array.NewRecordBatch(s, rec.Columns(), rec.NumRows())
}

// recordBytes is the memory held by rec's buffers (children included).
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		if c.NullN() == c.Len() {
			// Nothing of its own: an all-null column may be a slice of a
			// shared one (rollout's batches) whose buffers are far larger
			// than the batch, and entries and seals carry no bytes for it.
			continue
		}
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
