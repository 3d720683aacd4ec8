package row

import (
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/api"
)

// Record and Relationship are the wire types: the engine stores and reads
// exactly what the API carries.
type (
	Record       = api.Record
	Relationship = api.Relationship
)

// ValidationError is bad input: the message says what to fix.
type ValidationError struct{ Msg string }

func (e *ValidationError) Error() string { return e.Msg }

// Invalidf returns a *ValidationError with the formatted message: the
// one way the store reports bad input.
func Invalidf(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...)}
}

// columnBuilders are builders for Schema's columns, made on first use and
// pooled: an array built hands its buffers over and leaves the builder
// empty and ready for reuse.
type columnBuilders []array.Builder

var builders = sync.Pool{New: func() any { return make(columnBuilders, len(columns)) }}

func (cb columnBuilders) get(i int) array.Builder {
	if cb[i] == nil {
		cb[i] = array.NewBuilder(memory.DefaultAllocator, Schema.Field(i).Type)
	}
	return cb[i]
}

// columnBytes gives, for the text and binary columns (by position in
// Schema), the bytes a record adds, so that BuildBatch sizes their value
// buffers once instead of growing them by doubling (a copy and a zeroed
// allocation each time).
var columnBytes = func() []func(r *Record) int {
	out := make([]func(r *Record) int, len(columns))
	for i, c := range columns {
		if f, ok := c.field.(interface{ size(*Record) int }); ok {
			out[i] = f.size
		}
	}
	return out
}()

// BuildBatch converts records (already defaulted) to one batch with Schema,
// column by column. A column no record has a value in is a slice of a
// shared null column: building the 30 unused columns of a sparse record
// one null at a time cost more than the rest of the batch.
func BuildBatch(recs []Record) arrow.RecordBatch {
	n := len(recs)
	cb := builders.Get().(columnBuilders)
	cols := make([]arrow.Array, len(columns))
	for i := range columns {
		f := columns[i].field
		present := columns[i].required // never a null column, even before defaults
		for j := 0; j < len(recs) && !present; j++ {
			if !f.null(&recs[j]) {
				present = true
				break
			}
		}
		if !present {
			cols[i] = nullColumn(i, n)
			continue
		}
		if tf, ok := f.(textField); ok && columnBytes[i] != nil {
			if dt := Schema.Field(i).Type; dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING {
				cols[i] = buildText(f, tf, recs, dt, Schema.Field(i).Nullable, columnBytes[i])
				continue
			}
		}
		b := cb.get(i)
		b.Reserve(n)
		if size := columnBytes[i]; size != nil {
			n := 0
			for j := range recs {
				n += size(&recs[j])
			}
			b.(interface{ ReserveData(int) }).ReserveData(n)
		}
		for j := range recs {
			f.add(b, &recs[j])
		}
		cols[i] = b.NewArray()
	}
	builders.Put(cb) // only once emptied: a panic above drops the builders
	rec := array.NewRecordBatch(Schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// buildText builds a text column from its values directly: a builder
// zeroes the value buffer it reserves (after the allocator did), which
// cost a JSON append a tenth of its CPU, and then copies the values in.
func buildText(f field, tf textField, recs []Record, dt arrow.DataType, nullable bool, size func(*Record) int) arrow.Array {
	n, total := len(recs), 0
	for j := range recs {
		total += size(&recs[j])
	}
	data := make([]byte, 0, total)
	var valid []byte
	nulls := 0
	large := dt.ID() == arrow.LARGE_STRING
	var offs32 []int32
	var offs64 []int64
	if large {
		offs64 = make([]int64, 1, n+1)
	} else {
		offs32 = make([]int32, 1, n+1)
	}
	for j := range recs {
		if nullable && f.null(&recs[j]) {
			if valid == nil {
				valid = make([]byte, bitutil.BytesForBits(int64(n)))
				bitutil.SetBitsTo(valid, 0, int64(n), true)
			}
			bitutil.ClearBit(valid, j)
			nulls++
		} else {
			data = append(data, tf.text(&recs[j])...)
		}
		if large {
			offs64 = append(offs64, int64(len(data)))
		} else {
			offs32 = append(offs32, int32(len(data)))
		}
	}
	offs := arrow.Int32Traits.CastToBytes(offs32)
	if large {
		offs = arrow.Int64Traits.CastToBytes(offs64)
	}
	bufs := []*memory.Buffer{nil, memory.NewBufferBytes(offs), memory.NewBufferBytes(data)}
	if nulls > 0 {
		bufs[0] = memory.NewBufferBytes(valid)
	}
	d := array.NewData(dt, n, bufs, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// nullCols holds the all-null columns BuildBatch uses: base, per column of
// Schema, an array that grows to the largest batch asked for, and bySize,
// per batch size up to maxSharedNullsBySize, the columns of that size
// (slices of base), so that a batch of a size seen before allocates
// nothing for its null columns.
var nullCols struct {
	mu     sync.Mutex
	base   []arrow.Array
	bySize map[int][]arrow.Array
}

const (
	maxSharedNulls       = 1 << 16 // rows of base
	maxSharedNullsBySize = 1024    // batch sizes kept in bySize
)

// nullColumn returns column i of n null rows.
func nullColumn(i, n int) arrow.Array {
	dt := Schema.Field(i).Type
	if n > maxSharedNulls {
		return array.MakeArrayOfNull(memory.DefaultAllocator, dt, n)
	}
	nullCols.mu.Lock()
	defer nullCols.mu.Unlock()
	if nullCols.base == nil {
		nullCols.base = make([]arrow.Array, len(columns))
		nullCols.bySize = map[int][]arrow.Array{}
	}
	if n <= maxSharedNullsBySize {
		if cols := nullCols.bySize[n]; cols != nil && cols[i] != nil {
			cols[i].Retain()
			return cols[i]
		}
	}
	base := nullCols.base[i]
	if base == nil || base.Len() < n {
		// Arrays sliced from the old base keep their buffers.
		base = array.MakeArrayOfNull(memory.DefaultAllocator, dt, max(n, maxSharedNullsBySize))
		nullCols.base[i] = base
	}
	c := array.NewSlice(base, 0, int64(n))
	if n <= maxSharedNullsBySize {
		settleNullCounts(c) // shared from now on: no lazy writes left
		cols := nullCols.bySize[n]
		if cols == nil {
			cols = make([]arrow.Array, len(columns))
			nullCols.bySize[n] = cols
		}
		cols[i] = c
		c.Retain()
	}
	return c
}

// settleNullCounts computes the null counts of a and of the arrays nested
// in it, which arrow-go otherwise computes and stores on first use: an
// array that goroutines read at the same time must not write.
func settleNullCounts(a arrow.Array) {
	a.NullN()
	switch a := a.(type) {
	case array.ListLike:
		settleNullCounts(a.ListValues())
	case *array.Struct:
		for i := range a.NumField() {
			settleNullCounts(a.Field(i))
		}
	}
}

// FromArrow decodes an appended Arrow batch: any subset of Schema's
// columns, by name, in the types toSchemaType accepts. Unknown columns and
// wrong types are ValidationErrors.
func FromArrow(rec arrow.RecordBatch) ([]Record, error) {
	rs, err := FromBatch(rec)
	var ve *ValidationError
	if err != nil && !errors.As(err, &ve) {
		return nil, &ValidationError{Msg: err.Error()}
	}
	return rs, err
}

// FromBatch decodes rows of a batch with any subset of Schema's
// columns (by name), each converted to Schema's type first (a reference
// table's dictionary role and naive created_at included); absent columns
// stay zero.
func FromBatch(rec arrow.RecordBatch) ([]Record, error) {
	n := int(rec.NumRows())
	out := make([]Record, n)
	sch := rec.Schema()
	for ci := range sch.NumFields() {
		f := sch.Field(ci) // not Fields(), which copies them all
		i, ok := schemaIndex[f.Name]
		if !ok {
			return nil, Invalidf("unknown column %q: the rollout schema has no such column", f.Name)
		}
		col, err := toSchemaType(memory.DefaultAllocator, &columns[i], rec.Column(ci))
		if err != nil {
			return nil, err
		}
		columns[i].field.set(col, out)
		col.Release()
	}
	return out, nil
}
