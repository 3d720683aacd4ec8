package rollout

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/rollout/row"
)

// The row model (columns, Records, their Arrow conversion, validation and
// defaults) is package row. These names keep rollout's API as it was for
// its importers, and the helpers below let rollout's files call the row
// model as before.

// Record and Relationship are the wire types (package api), as row names
// them.
type (
	Record       = row.Record
	Relationship = row.Relationship
)

// ValidationError is bad input: the message says what to fix.
type ValidationError = row.ValidationError

// Schema is the rollout table schema (row.Schema).
var Schema = row.Schema

// Column names of the rollout schema (package row).
const (
	ColID            = row.ColID
	ColRolloutID     = row.ColRolloutID
	ColProblemID     = row.ColProblemID
	ColSequenceOrder = row.ColSequenceOrder
	ColRole          = row.ColRole
	ColCreatedAt     = row.ColCreatedAt
	ColContentType   = row.ColContentType
	ColPayload       = row.ColPayload
	ColPayloadSize   = row.ColPayloadSize
	ColPayloadSum    = row.ColPayloadSum
	ColMetadata      = row.ColMetadata
	ColRelationships = row.ColRelationships
	ColShard         = row.ColShard
	ColSeq           = row.ColSeq
	ColPayloadRef    = row.ColPayloadRef
)

// ConformArrow turns an appended batch into one with exactly Schema,
// validated and defaulted as Append does Records (row.Conform).
func ConformArrow(rec arrow.RecordBatch, now time.Time) (arrow.RecordBatch, []string, error) {
	return row.Conform(rec, now)
}

// RecordsFromArrow decodes an appended Arrow batch (row.FromArrow).
func RecordsFromArrow(rec arrow.RecordBatch) ([]Record, error) {
	return row.FromArrow(rec)
}

// invalid is bad input (a *ValidationError), as row reports it.
func invalid(format string, args ...any) error { return row.Invalidf(format, args...) }

// recordsFromBatch and buildBatch are the reader's and the JSON append
// path's conversions (row.FromBatch, row.BuildBatch).
func recordsFromBatch(rec arrow.RecordBatch) ([]Record, error) { return row.FromBatch(rec) }
func buildBatch(recs []Record) arrow.RecordBatch               { return row.BuildBatch(recs) }

// columns and schemaIndex are the column table as the sampler (sample.go)
// and the feed read it: each column's name and type, in Schema's order,
// and each column's position by name.
var (
	columns = func() []columnInfo {
		out := make([]columnInfo, Schema.NumFields())
		for i := range out {
			f := Schema.Field(i)
			out[i] = columnInfo{name: f.Name, typ: f.Type}
		}
		return out
	}()
	schemaIndex = func() map[string]int {
		m := make(map[string]int, Schema.NumFields())
		for i := range Schema.NumFields() {
			m[Schema.Field(i).Name] = i
		}
		return m
	}()
)

type columnInfo struct {
	name string
	typ  arrow.DataType
}
