// Package row is the row model of a store: the rollout schema and what is
// derived from it, without any I/O. It owns
//
//   - the column table (columns.go): per column its name, Arrow type,
//     whether a stored row always has a value, its default, its check, and
//     the Record field it maps to; Schema, the Col* names and ListColumns
//     come from it;
//   - the field bindings (columns_field.go): how each column is read from
//     and written to a Record (the wire type of package api);
//   - the Arrow conversions: Records to one Schema batch (BuildBatch, with
//     pooled builders and shared all-null columns, record.go), a batch of
//     any subset of Schema's columns back to Records (FromBatch, FromArrow),
//     and an appended batch to Schema without Records (Conform,
//     ConformPart, arrowappend.go); the types a column is accepted in
//     (toSchemaType, and the reference system's, reftypes.go: AsSchemaType);
//   - validation and defaults (columns_validate.go): one validate for both
//     append paths, so a bad value gets the same "record N: what" message
//     whichever way it came (Prepare on Records, Conform on batches), and
//     the defaults of the table.
//
// Bad input is a *ValidationError (Invalidf). Package rollout, the store,
// reads and writes rows through these functions; the package itself
// reads no files, objects or network, and imports none of objstore, wal,
// lance/table, lance/file, net/http or os (imports_test.go).
package row
