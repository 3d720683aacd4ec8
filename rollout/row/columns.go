package row

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// The rollout schema, stated once. Every column of the table is one entry
// of columns below: its name, Arrow type, whether a stored row always has a
// value, its default, its check, and the Record field it maps to. From this
// table come
//
//   - Schema (the base table's and the WAL's Arrow schema);
//   - the JSON append path: validate and defaults on Records
//     (Prepare), then Records to one Arrow batch (BuildBatch);
//   - the Arrow append path: an appended batch's columns converted to
//     Schema's types (toSchemaType), validated by the same validate, then
//     defaulted column by column (Conform);
//   - the reader: Arrow to Records (FromBatch), through the same
//     type conversion, so a reference table's dictionary role and naive
//     created_at are accepted wherever a column is read or appended.
//
// A rule is written once here and both append paths run it, so a bad value
// gets the same 400 message whichever way it came. Columns are only ever
// appended to this table, as nullable: a store written by an older version
// gains them at its next merge, and older rows read them as null.

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
	ColMetadata      = "metadata"
	ColRelationships = "relationships"
	// ColShard and ColSeq say where a row became durable: the shard that
	// wrote it (ShardKey) and its sequence number there (wal.Seq). A seal
	// sets lc_seq and a merge lc_shard; appended values are replaced. The
	// feed's positions are made of them (rollout/feed.go).
	ColShard = "lc_shard"
	ColSeq   = "lc_seq"
	// ColPayloadRef names the object holding a payload stored out of line
	// (rollout/blob.go); binary_payload is null then. Set by the store only.
	ColPayloadRef = "payload_ref"
)

// Defaults of the role and content type, for JSON and Arrow appends alike.
const (
	defaultRole        = "assistant"
	defaultContentType = "text/plain"
)

// column is one column of the rollout table.
type column struct {
	name string
	typ  arrow.DataType
	// required: a stored row always has a value (the Schema field is not
	// nullable). An appended row without one (null, or an empty string)
	// gets def, or is refused as "<name> is required" when there is none.
	required bool
	meta     arrow.Metadata
	def      deflt
	// check is the column's rule on an appended row's value (nil: none);
	// it returns what is wrong, for "record N: <what>". Besides, validate
	// checks every text column for UTF-8.
	check func(rs rows, c, i int) string
	// field is the Record field the column maps to: how the JSON path
	// reads and writes it, and how it is built from and read into Arrow.
	field field
}

// defaultKind says what an appended row without a value gets.
type defaultKind uint8

const (
	noDefault    defaultKind = iota
	defaultText              // deflt.text
	defaultNewID             // a new UUIDv7
	defaultNow               // the time of the append
	defaultZero              // 0
	defaultCopy              // the row's value of column deflt.from
	defaultSize              // the payload's length, where there is a payload
	defaultSum               // the payload's sha256 in hex, where there is a payload
)

type deflt struct {
	kind    defaultKind
	text    string // defaultText
	from    string // defaultCopy
	fromCol int    // the position of from (set at init)
}

func init() {
	for i := range columns {
		if d := &columns[i].def; d.kind == defaultCopy {
			d.fromCol = schemaIndex[d.from]
		}
	}
}

// columns is the rollout schema, in Schema's order.
var columns = []column{
	// identity
	{name: ColID, typ: textT, required: true, meta: primaryKeyMeta, def: deflt{kind: defaultNewID},
		field: reqText(func(r *Record) *string { return &r.ID })},
	{name: ColRolloutID, typ: textT, required: true,
		field: reqText(func(r *Record) *string { return &r.RolloutID })},
	{name: ColProblemID, typ: textT, required: true, def: deflt{kind: defaultCopy, from: ColRolloutID},
		field: reqText(func(r *Record) *string { return &r.ProblemID })},
	{name: "dataset", typ: textT, field: optText(func(r *Record) **string { return &r.Dataset })},
	{name: ColSequenceOrder, typ: arrow.PrimitiveTypes.Int32, required: true, def: deflt{kind: defaultZero},
		check: checkNonNegative, field: seqField{}},
	{name: ColRole, typ: textT, required: true, def: deflt{kind: defaultText, text: defaultRole},
		field: reqText(func(r *Record) *string { return &r.Role })},
	{name: ColCreatedAt, typ: tsUTC, required: true, def: deflt{kind: defaultNow}, field: timeField{}},
	// content
	{name: "content", typ: largeTextT, field: optText(func(r *Record) **string { return &r.Content })},
	{name: ColContentType, typ: textT, required: true, def: deflt{kind: defaultText, text: defaultContentType},
		field: reqText(func(r *Record) *string { return &r.ContentType })},
	// claim-check text
	{name: "model_input_string", typ: largeTextT, field: optText(func(r *Record) **string { return &r.ModelInputString })},
	{name: "model_output_string", typ: largeTextT, field: optText(func(r *Record) **string { return &r.ModelOutputString })},
	{name: "rationale", typ: largeTextT, field: optText(func(r *Record) **string { return &r.Rationale })},
	{name: "problem_text", typ: largeTextT, field: optText(func(r *Record) **string { return &r.ProblemText })},
	{name: "user_metadata", typ: largeTextT, field: optText(func(r *Record) **string { return &r.UserMetadata })},
	// tokens
	{name: "input_tokens", typ: arrow.ListOf(arrow.PrimitiveTypes.Int32), field: listField[int32](func(r *Record) *[]int32 { return &r.InputTokens })},
	{name: "output_tokens", typ: arrow.ListOf(arrow.PrimitiveTypes.Int32), field: listField[int32](func(r *Record) *[]int32 { return &r.OutputTokens })},
	{name: "num_input_tokens", typ: arrow.PrimitiveTypes.Int32, field: optScalar[int32](func(r *Record) **int32 { return &r.NumInputTokens })},
	{name: "num_output_tokens", typ: arrow.PrimitiveTypes.Int32, field: optScalar[int32](func(r *Record) **int32 { return &r.NumOutputTokens })},
	// logprobs
	{name: "output_logprobs", typ: arrow.ListOf(arrow.PrimitiveTypes.Float32), field: listField[float32](func(r *Record) *[]float32 { return &r.OutputLogprobs })},
	{name: "input_logprobs", typ: arrow.ListOf(arrow.PrimitiveTypes.Float32), field: listField[float32](func(r *Record) *[]float32 { return &r.InputLogprobs })},
	{name: "ref_logprobs", typ: arrow.ListOf(arrow.PrimitiveTypes.Float32), field: listField[float32](func(r *Record) *[]float32 { return &r.RefLogprobs })},
	{name: "loss_mask", typ: arrow.ListOf(arrow.PrimitiveTypes.Int8), field: listField[int8](func(r *Record) *[]int8 { return &r.LossMask })},
	// scores
	{name: "advantage", typ: arrow.PrimitiveTypes.Float32, field: optScalar[float32](func(r *Record) **float32 { return &r.Advantage })},
	{name: "reward", typ: arrow.PrimitiveTypes.Float32, field: optScalar[float32](func(r *Record) **float32 { return &r.Reward })},
	{name: "raw_reward", typ: arrow.PrimitiveTypes.Float32, field: optScalar[float32](func(r *Record) **float32 { return &r.RawReward })},
	{name: "score", typ: arrow.PrimitiveTypes.Float32, field: optScalar[float32](func(r *Record) **float32 { return &r.Score })},
	{name: "grader_id", typ: textT, field: optText(func(r *Record) **string { return &r.GraderID })},
	// training
	{name: "include_in_training", typ: arrow.FixedWidthTypes.Boolean, field: optScalar[bool](func(r *Record) **bool { return &r.IncludeInTraining })},
	{name: "exclude_reason", typ: textT, field: optText(func(r *Record) **string { return &r.ExcludeReason })},
	{name: "policy_version", typ: textT, field: optText(func(r *Record) **string { return &r.PolicyVersion })},
	// relationships
	{name: ColRelationships, typ: arrow.ListOf(relationsTy), field: relationsField{}},
	// payload
	{name: ColPayload, typ: arrow.BinaryTypes.LargeBinary, field: payloadField{}},
	{name: ColPayloadSize, typ: arrow.PrimitiveTypes.Int64, def: deflt{kind: defaultSize},
		check: checkPayloadSize, field: optScalar[int64](func(r *Record) **int64 { return &r.PayloadSize })},
	{name: ColPayloadSum, typ: textT, def: deflt{kind: defaultSum},
		check: checkPayloadSum, field: optText(func(r *Record) **string { return &r.PayloadChecksum })},
	{name: "artifact_type", typ: textT, field: optText(func(r *Record) **string { return &r.ArtifactType })},
	// metadata (JSON text)
	{name: ColMetadata, typ: largeTextT, check: checkJSON, field: optText(func(r *Record) **string { return &r.Metadata })},
	// where the row became durable (no Record field: set by seal and merge)
	{name: ColShard, typ: arrow.PrimitiveTypes.Int64, field: systemField{}},
	{name: ColSeq, typ: arrow.PrimitiveTypes.Int64, field: systemField{}},
	// a payload stored out of line (no Record field on the wire: the
	// multipart path sets it after streaming the part to an object)
	{name: ColPayloadRef, typ: textT, field: refField{}},
}

var (
	textT      = arrow.BinaryTypes.String
	largeTextT = arrow.BinaryTypes.LargeString
	tsUTC      = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	// relationsTy is the item of relationships; appended lists may name
	// its fields otherwise (they are matched by position).
	relationsTy = arrow.StructOf(
		arrow.Field{Name: "target_id", Type: textT, Nullable: true},
		arrow.Field{Name: "relation", Type: textT, Nullable: true},
		arrow.Field{Name: "weight", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	)
)

// primaryKeyMeta marks the key column the way Lance does, so LanceDB's
// merge-insert and our merge agree on the key.
var primaryKeyMeta = arrow.NewMetadata(
	[]string{"lance-schema:unenforced-primary-key", "lance-schema:unenforced-primary-key:position"},
	[]string{"true", "0"},
)

// Schema is the rollout table schema: columns, as Arrow fields. Columns
// are only ever added (as nullable), never changed or removed: stores
// opened by a newer version gain the new columns, and older rows read them
// as null.
var Schema = func() *arrow.Schema {
	fields := make([]arrow.Field, len(columns))
	for i, c := range columns {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: !c.required, Metadata: c.meta}
	}
	return arrow.NewSchema(fields, nil)
}()

// schemaIndex is each column's position in columns and Schema.
var schemaIndex = func() map[string]int {
	m := make(map[string]int, len(columns))
	for i, c := range columns {
		m[c.name] = i
	}
	return m
}()

// Positions of the columns the append paths name.
var (
	idCol      = schemaIndex[ColID]
	rolloutCol = schemaIndex[ColRolloutID]
	problemCol = schemaIndex[ColProblemID]
	payloadCol = schemaIndex[ColPayload]
	sizeCol    = schemaIndex[ColPayloadSize]
	sumCol     = schemaIndex[ColPayloadSum]
)

// isText reports whether c's values are strings or hold strings (as
// relationships do): validate checks them for UTF-8.
func isText(c *column) bool {
	if _, ref := c.field.(refField); ref {
		return false // the store's own key, never appended text
	}
	switch c.typ.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return true
	}
	return c.name == ColRelationships
}

// ListColumns returns, in a new slice, every column but the payload, its
// out-of-line reference and the store's own (lc_shard, lc_seq): what lists
// and record reads return. Payload bytes are fetched by id only.
func ListColumns() []string {
	var out []string
	for _, c := range columns {
		if _, sys := c.field.(systemField); !sys && c.name != ColPayload && c.name != ColPayloadRef {
			out = append(out, c.name)
		}
	}
	return out
}
