package rollout

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/table"
)

// Column names of the rollout schema.
const (
	ColID            = "id"
	ColRolloutID     = "rollout_id"
	ColProblemID     = "problem_id"
	ColSequenceOrder = "sequence_order"
	ColRole          = "role"
	ColCreatedAt     = "created_at"
	ColContentType   = "content_type"
	ColPayload       = "binary_payload"
	ColPayloadSize   = "payload_size"
	ColPayloadSum    = "payload_checksum"
)

// primaryKeyMeta marks the key column the way Lance does, so LanceDB's
// merge-insert and our merge agree on the key.
var primaryKeyMeta = arrow.NewMetadata(
	[]string{"lance-schema:unenforced-primary-key", "lance-schema:unenforced-primary-key:position"},
	[]string{"true", "0"},
)

var (
	tsUTC       = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	relationsTy = arrow.StructOf(
		arrow.Field{Name: "target_id", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "relation", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "weight", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	)
)

func nullable(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

func required(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t}
}

// Schema is the rollout table schema. Columns are only ever added (as
// nullable), never changed or removed: stores opened by a newer version gain
// the new columns, and older rows read them as null.
var Schema = arrow.NewSchema([]arrow.Field{
	// identity
	{Name: ColID, Type: arrow.BinaryTypes.String, Metadata: primaryKeyMeta},
	required(ColRolloutID, arrow.BinaryTypes.String),
	required(ColProblemID, arrow.BinaryTypes.String),
	nullable("dataset", arrow.BinaryTypes.String),
	required(ColSequenceOrder, arrow.PrimitiveTypes.Int32),
	required(ColRole, arrow.BinaryTypes.String),
	required(ColCreatedAt, tsUTC),
	// content
	nullable("content", arrow.BinaryTypes.LargeString),
	required(ColContentType, arrow.BinaryTypes.String),
	// claim-check text
	nullable("model_input_string", arrow.BinaryTypes.LargeString),
	nullable("model_output_string", arrow.BinaryTypes.LargeString),
	nullable("rationale", arrow.BinaryTypes.LargeString),
	nullable("problem_text", arrow.BinaryTypes.LargeString),
	nullable("user_metadata", arrow.BinaryTypes.LargeString),
	// tokens
	nullable("input_tokens", arrow.ListOf(arrow.PrimitiveTypes.Int32)),
	nullable("output_tokens", arrow.ListOf(arrow.PrimitiveTypes.Int32)),
	nullable("num_input_tokens", arrow.PrimitiveTypes.Int32),
	nullable("num_output_tokens", arrow.PrimitiveTypes.Int32),
	// logprobs
	nullable("output_logprobs", arrow.ListOf(arrow.PrimitiveTypes.Float32)),
	nullable("input_logprobs", arrow.ListOf(arrow.PrimitiveTypes.Float32)),
	nullable("ref_logprobs", arrow.ListOf(arrow.PrimitiveTypes.Float32)),
	nullable("loss_mask", arrow.ListOf(arrow.PrimitiveTypes.Int8)),
	// scores
	nullable("advantage", arrow.PrimitiveTypes.Float32),
	nullable("reward", arrow.PrimitiveTypes.Float32),
	nullable("raw_reward", arrow.PrimitiveTypes.Float32),
	nullable("score", arrow.PrimitiveTypes.Float32),
	nullable("grader_id", arrow.BinaryTypes.String),
	// training
	nullable("include_in_training", arrow.FixedWidthTypes.Boolean),
	nullable("exclude_reason", arrow.BinaryTypes.String),
	nullable("policy_version", arrow.BinaryTypes.String),
	// relationships
	nullable("relationships", arrow.ListOf(relationsTy)),
	// payload
	nullable(ColPayload, arrow.BinaryTypes.LargeBinary),
	nullable(ColPayloadSize, arrow.PrimitiveTypes.Int64),
	nullable(ColPayloadSum, arrow.BinaryTypes.String),
	nullable("artifact_type", arrow.BinaryTypes.String),
	// metadata (JSON text)
	nullable("metadata", arrow.BinaryTypes.LargeString),
}, nil)

// listColumns is every column but the payload: what lists and record reads
// return. Payload bytes are fetched by id only.
var listColumns = func() []string {
	var out []string
	for _, f := range Schema.Fields() {
		if f.Name != ColPayload {
			out = append(out, f.Name)
		}
	}
	return out
}()

// FilterColumns are the columns List accepts equality filters on.
var FilterColumns = api.FilterColumns

// baseColumns returns the columns of cols that the base table d has: a
// store written before a column was added to Schema gains it only at its
// next write (a merge or compaction commits the new columns; reads never
// commit), and until then its rows read that column as null.
func baseColumns(d *table.Dataset, cols []string) []string {
	out := make([]string, 0, len(cols))
	for _, c := range cols {
		if d.Schema().Field(c) != nil {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = append(out, ColID) // the row count only
	}
	return out
}
