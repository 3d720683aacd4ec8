package row

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// field is the Record field of a column: how the JSON path sees its value
// and how it goes to and from Arrow. Arrays given to set have the column's
// Schema type (toSchemaType converts other accepted types first).
type field interface {
	// null reports a record without a value (for a required text column:
	// the empty string).
	null(r *Record) bool
	// add appends the record's value, or null, to b (of the Schema type).
	add(b array.Builder, r *Record)
	// set stores the non-null values of a in out, row by row.
	set(a arrow.Array, out []Record)
}

// Optional views of a field's value, for checks and defaults. A field
// implements those of its kind.
type (
	textField interface {
		text(r *Record) string // valid when !null(r)
		setText(r *Record, s string)
		size(r *Record) int // bytes the value adds to the column
		badUTF8(r *Record) bool
	}
	int32Field interface{ int32Of(r *Record) int32 }
	int64Field interface {
		int64Of(r *Record) int64
		setInt64(r *Record, v int64)
	}
)

// systemField is a column the store sets itself and a Record does not
// carry: appends write null, reads ignore it.
type systemField struct{}

func (systemField) null(*Record) bool              { return true }
func (systemField) add(b array.Builder, _ *Record) { b.AppendNull() }
func (systemField) set(arrow.Array, []Record)      {}

// refField is payload_ref: the store sets it (rollout/blob.go), and a Record
// carries it into the WAL; an appended Arrow value is dropped (it would
// name another store's object) and reads do not return it.
type refField struct{}

func (refField) null(r *Record) bool { return r.PayloadRef == nil }
func (refField) add(b array.Builder, r *Record) {
	if r.PayloadRef != nil {
		appendString(b, *r.PayloadRef)
	} else {
		b.AppendNull()
	}
}
func (refField) set(arrow.Array, []Record) {}

// reqText is a string field that is never null when stored: empty means
// no value.
type reqText func(r *Record) *string

func (f reqText) null(r *Record) bool            { return *f(r) == "" }
func (f reqText) add(b array.Builder, r *Record) { appendString(b, *f(r)) }
func (f reqText) text(r *Record) string          { return *f(r) }
func (f reqText) setText(r *Record, s string)    { *f(r) = s }
func (f reqText) size(r *Record) int             { return len(*f(r)) }
func (f reqText) badUTF8(r *Record) bool         { return !utf8.ValidString(*f(r)) }
func (f reqText) set(a arrow.Array, out []Record) {
	get := stringValues(a)
	for i := range out {
		if a.IsValid(i) {
			*f(&out[i]) = strings.Clone(get(i))
		}
	}
}

// optText is a nullable string field.
type optText func(r *Record) **string

func (f optText) null(r *Record) bool         { return *f(r) == nil }
func (f optText) text(r *Record) string       { return **f(r) }
func (f optText) setText(r *Record, s string) { *f(r) = &s }
func (f optText) badUTF8(r *Record) bool {
	v := *f(r)
	return v != nil && !utf8.ValidString(*v)
}
func (f optText) size(r *Record) int {
	if v := *f(r); v != nil {
		return len(*v)
	}
	return 0
}
func (f optText) add(b array.Builder, r *Record) {
	if v := *f(r); v != nil {
		appendString(b, *v)
	} else {
		b.AppendNull()
	}
}
func (f optText) set(a arrow.Array, out []Record) {
	get := stringValues(a)
	for i := range out {
		if a.IsValid(i) {
			s := strings.Clone(get(i))
			*f(&out[i]) = &s
		}
	}
}

// stringValues returns the value getter of a utf8 or large_utf8 array.
func stringValues(a arrow.Array) func(int) string {
	switch a := a.(type) {
	case *array.String:
		return a.Value
	case *array.LargeString:
		return a.Value
	}
	panic("row: not a string array: " + a.DataType().String())
}

func appendString(b array.Builder, s string) {
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(s)
	case *array.LargeStringBuilder:
		b.Append(s)
	}
}

// seqField is sequence_order: a plain int32 in Record (0 when not given).
type seqField struct{}

func (seqField) null(*Record) bool              { return false }
func (seqField) int32Of(r *Record) int32        { return r.SequenceOrder }
func (seqField) add(b array.Builder, r *Record) { b.(*array.Int32Builder).Append(r.SequenceOrder) }
func (seqField) set(a arrow.Array, out []Record) {
	v := a.(*array.Int32)
	for i := range out {
		if v.IsValid(i) {
			out[i].SequenceOrder = v.Value(i)
		}
	}
}

// scalar are the Go types of the nullable fixed-width fields.
type scalar interface{ int32 | int64 | float32 | bool }

// optScalar is a nullable int32, int64, float32 or bool field.
type optScalar[T scalar] func(r *Record) **T

func (f optScalar[T]) null(r *Record) bool { return *f(r) == nil }
func (f optScalar[T]) add(b array.Builder, r *Record) {
	if v := *f(r); v != nil {
		b.(interface{ Append(T) }).Append(*v)
	} else {
		b.AppendNull()
	}
}
func (f optScalar[T]) set(a arrow.Array, out []Record) {
	v := a.(interface{ Value(int) T })
	for i := range out {
		if a.IsValid(i) {
			x := v.Value(i)
			*f(&out[i]) = &x
		}
	}
}

// int32Of and int64Of give the value of a non-null field of that type.
func (f optScalar[T]) int32Of(r *Record) int32 { return any(**f(r)).(int32) }
func (f optScalar[T]) int64Of(r *Record) int64 { return any(**f(r)).(int64) }
func (f optScalar[T]) setInt64(r *Record, v int64) {
	x := any(v).(T)
	*f(r) = &x
}

// timeField is created_at.
type timeField struct{}

func (timeField) null(r *Record) bool { return r.CreatedAt == nil }
func (timeField) add(b array.Builder, r *Record) {
	if r.CreatedAt == nil {
		b.AppendNull()
		return
	}
	b.(*array.TimestampBuilder).Append(arrow.Timestamp(r.CreatedAt.UnixMicro()))
}
func (timeField) set(a arrow.Array, out []Record) {
	v := a.(*array.Timestamp)
	unit := v.DataType().(*arrow.TimestampType).Unit
	for i := range out {
		if v.IsValid(i) {
			t := v.Value(i).ToTime(unit).UTC()
			out[i].CreatedAt = &t
		}
	}
}
func (timeField) setTime(r *Record, t time.Time) { r.CreatedAt = &t }

// listField is a list of int32, float32 or int8.
type listField[T int32 | float32 | int8] func(r *Record) *[]T

func (f listField[T]) null(r *Record) bool { return *f(r) == nil }
func (f listField[T]) add(b array.Builder, r *Record) {
	lb := b.(*array.ListBuilder)
	v := *f(r)
	if v == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	lb.ValueBuilder().(interface{ AppendValues([]T, []bool) }).AppendValues(v, nil)
}
func (f listField[T]) set(a arrow.Array, out []Record) {
	l := a.(*array.List)
	vals := l.ListValues().(interface{ Values() []T })
	all := vals.Values()
	for i := range out {
		if l.IsNull(i) {
			continue
		}
		// ValueOffsets, not Offsets()[i]: the batch may be a slice.
		s, e := l.ValueOffsets(i)
		*f(&out[i]) = append(make([]T, 0, e-s), all[s:e]...)
	}
}

// relationsField is relationships: a list of (target_id, relation,
// weight).
type relationsField struct{}

func (relationsField) null(r *Record) bool { return r.Relationships == nil }
func (relationsField) add(b array.Builder, r *Record) {
	lb := b.(*array.ListBuilder)
	if r.Relationships == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	for _, rel := range r.Relationships {
		sb.Append(true)
		for k, s := range [2]*string{rel.TargetID, rel.Relation} {
			if s == nil {
				sb.FieldBuilder(k).AppendNull()
			} else {
				appendString(sb.FieldBuilder(k), *s)
			}
		}
		if rel.Weight == nil {
			sb.FieldBuilder(2).AppendNull()
		} else {
			sb.FieldBuilder(2).(*array.Float32Builder).Append(*rel.Weight)
		}
	}
}
func (relationsField) set(a arrow.Array, out []Record) {
	l := a.(*array.List)
	st := l.ListValues().(*array.Struct)
	tgt, rel, w := st.Field(0).(*array.String), st.Field(1).(*array.String), st.Field(2).(*array.Float32)
	for i := range out {
		if l.IsNull(i) {
			continue
		}
		s, e := l.ValueOffsets(i) // the batch may be a slice
		rs := make([]Relationship, 0, e-s)
		for j := int(s); j < int(e); j++ {
			var r Relationship
			if tgt.IsValid(j) {
				s := strings.Clone(tgt.Value(j))
				r.TargetID = &s
			}
			if rel.IsValid(j) {
				s := strings.Clone(rel.Value(j))
				r.Relation = &s
			}
			if w.IsValid(j) {
				v := w.Value(j)
				r.Weight = &v
			}
			rs = append(rs, r)
		}
		out[i].Relationships = rs
	}
}

// payloadField is binary_payload.
type payloadField struct{}

func (payloadField) null(r *Record) bool { return r.BinaryPayload == nil }
func (payloadField) size(r *Record) int  { return len(r.BinaryPayload) }
func (payloadField) add(b array.Builder, r *Record) {
	if pb := b.(*array.BinaryBuilder); r.BinaryPayload == nil {
		pb.AppendNull()
	} else {
		pb.Append(r.BinaryPayload)
	}
}
func (payloadField) set(a arrow.Array, out []Record) {
	v := a.(*array.LargeBinary)
	for i := range out {
		if v.IsValid(i) {
			out[i].BinaryPayload = append([]byte{}, v.Value(i)...)
		}
	}
}
