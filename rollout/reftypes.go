package rollout

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Base tables created by the reference system store two columns in types of
// their own: role as dictionary<int8, utf8> and created_at as a timestamp[us]
// without a time zone. Such a table is used as it is (its schema is never
// rewritten; which variants are accepted is schema.Compatible):
//
//   - reads ask the table for plain dictionaries (ScanOptions.
//     PlainDictionaries, TakePlain: no bound on distinct roles per batch)
//     and asSchemaType converts what differs from Schema (naive times are
//     read as UTC; a dictionary that still shows up is decoded);
//   - merges and compactions write the table's types: the fragment writer
//     stores Schema-typed WAL rows as the table's column types (a per-page
//     dictionary for role), so every fragment of the table has the same
//     types and LanceDB keeps reading it.
//
// One limit comes with the reference's type: int8 keys address 128 roles.
// We read and write any number of distinct roles (a page never holds more
// than 128), but LanceDB's scans fail ("Dictionary key bigger than the key
// type") once one of its batches spans pages with more than 128 distinct
// roles between them. The reference's own roles are a handful.

// asSchemaType returns column a of the named Schema column converted to
// Schema's type: a dictionary of strings is decoded, a timestamp of another
// time zone retyped. Anything else (including a column Schema lacks) comes
// back as it is. The caller releases the result.
func asSchemaType(name string, a arrow.Array) arrow.Array {
	idx := Schema.FieldIndices(name)
	if len(idx) != 1 {
		a.Retain()
		return a
	}
	return convertColumn(a, Schema.Field(idx[0]).Type)
}

// convertColumn converts a to type want when a is a dictionary of strings
// and want its plain type, or both are timestamps of one unit; otherwise it
// returns a as it is.
func convertColumn(a arrow.Array, want arrow.DataType) arrow.Array {
	have := a.DataType()
	switch {
	case arrow.TypeEqual(have, want):
	case have.ID() == arrow.DICTIONARY && want.ID() != arrow.DICTIONARY:
		if out := decodeDictionary(a.(*array.Dictionary), want); out != nil {
			return out
		}
	case have.ID() == arrow.TIMESTAMP && want.ID() == arrow.TIMESTAMP &&
		have.(*arrow.TimestampType).Unit == want.(*arrow.TimestampType).Unit:
		d := a.Data()
		nd := array.NewData(want, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
		defer nd.Release()
		return array.MakeFromData(nd)
	}
	a.Retain()
	return a
}

func addString(b array.Builder, s string) {
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(s)
	case *array.LargeStringBuilder:
		b.Append(s)
	}
}

// stringGetter returns element i of a utf8 or large_utf8 array.
func stringGetter(a arrow.Array) (func(int) string, bool) {
	switch v := a.(type) {
	case *array.String:
		return v.Value, true
	case *array.LargeString:
		return v.Value, true
	}
	return nil, false
}

// decodeDictionary returns the values of d as an array of type want (d's
// value type, utf8 or large_utf8), or nil when d is not such a dictionary.
func decodeDictionary(d *array.Dictionary, want arrow.DataType) arrow.Array {
	dt := d.DataType().(*arrow.DictionaryType)
	if !arrow.TypeEqual(dt.ValueType, want) {
		return nil
	}
	get, ok := stringGetter(d.Dictionary())
	if !ok {
		return nil
	}
	b := array.NewBuilder(memory.DefaultAllocator, want)
	defer b.Release()
	b.Reserve(d.Len())
	vals := d.Dictionary()
	for i := range d.Len() {
		if d.IsNull(i) || vals.IsNull(d.GetValueIndex(i)) {
			b.AppendNull()
			continue
		}
		addString(b, get(d.GetValueIndex(i)))
	}
	return b.NewArray()
}
