package row

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
//     and the column table's conversion (toSchemaType, used by reads and
//     appends alike) turns what differs from Schema into Schema's types
//     (naive times are read as UTC; a dictionary that still shows up is
//     decoded);
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

// AsSchemaType returns column a of the named Schema column converted to
// Schema's type, as toSchemaType converts it (a dictionary of strings is
// decoded, a timestamp of another time zone or none retyped). A column
// Schema lacks, or of a type toSchemaType refuses, comes back as it is.
// The caller releases the result.
func AsSchemaType(name string, a arrow.Array) arrow.Array {
	if i, ok := schemaIndex[name]; ok {
		if out, err := toSchemaType(memory.DefaultAllocator, &columns[i], a); err == nil {
			return out
		}
	}
	a.Retain()
	return a
}

// decodeDictionary returns the values of d as an array of type want (utf8
// or large_utf8), or nil when d is not a dictionary of strings.
func decodeDictionary(mem memory.Allocator, d *array.Dictionary, want arrow.DataType) arrow.Array {
	var get func(int) string
	switch v := d.Dictionary().(type) {
	case *array.String:
		get = v.Value
	case *array.LargeString:
		get = v.Value
	default:
		return nil
	}
	b := array.NewBuilder(mem, want)
	defer b.Release()
	b.Reserve(d.Len())
	vals := d.Dictionary()
	for i := range d.Len() {
		if d.IsNull(i) || vals.IsNull(d.GetValueIndex(i)) {
			b.AppendNull()
			continue
		}
		appendString(b, get(d.GetValueIndex(i)))
	}
	return b.NewArray()
}
