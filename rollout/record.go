package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

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

func invalid(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...)}
}

// Defaults of the role and content type, for JSON and Arrow appends alike.
const (
	defaultRole        = "assistant"
	defaultContentType = "text/plain"
)

// applyDefaults fills server-side defaults and checks required fields.
// index is the record's position in its request, for messages.
func applyDefaults(r *Record, index int, now time.Time) error {
	if r.ID == "" {
		r.ID = uuid.Must(uuid.NewV7()).String()
	}
	if r.RolloutID == "" {
		return invalid("record %d: rollout_id is required", index)
	}
	if r.ProblemID == "" {
		r.ProblemID = r.RolloutID
	}
	if r.Role == "" {
		r.Role = defaultRole
	}
	if r.ContentType == "" {
		r.ContentType = defaultContentType
	}
	if r.CreatedAt == nil {
		t := now
		r.CreatedAt = &t
	}
	if r.SequenceOrder < 0 {
		return invalid("record %d: sequence_order must be >= 0", index)
	}
	if r.BinaryPayload != nil {
		n := int64(len(r.BinaryPayload))
		if r.PayloadSize != nil && *r.PayloadSize != n {
			return invalid("record %d: payload_size %d does not match the %d payload bytes", index, *r.PayloadSize, n)
		}
		r.PayloadSize = &n
		sum := sha256.Sum256(r.BinaryPayload)
		hexSum := hex.EncodeToString(sum[:])
		if r.PayloadChecksum != nil && *r.PayloadChecksum != hexSum && *r.PayloadChecksum != "sha256:"+hexSum {
			return invalid("record %d: payload_checksum does not match the payload (sha256 %s)", index, hexSum)
		}
		r.PayloadChecksum = &hexSum
	}
	if r.Metadata != nil && !json.Valid([]byte(*r.Metadata)) {
		return invalid("record %d: metadata must be JSON", index)
	}
	return nil
}

// recordColumn builds one column of Schema from records: null reports a
// record without a value (never, for a required column), add appends the
// record's value (or null) to the column's builder.
type recordColumn struct {
	null func(r *Record) bool
	add  func(b array.Builder, r *Record)
}

func never(*Record) bool { return false }

// recordColumns are Schema's columns, in order.
var recordColumns = []recordColumn{
	{never, func(b array.Builder, r *Record) { str(b, &r.ID) }},
	{never, func(b array.Builder, r *Record) { str(b, &r.RolloutID) }},
	{never, func(b array.Builder, r *Record) { str(b, &r.ProblemID) }},
	{func(r *Record) bool { return r.Dataset == nil }, func(b array.Builder, r *Record) { str(b, r.Dataset) }},
	{never, func(b array.Builder, r *Record) { b.(*array.Int32Builder).Append(r.SequenceOrder) }},
	{never, func(b array.Builder, r *Record) { str(b, &r.Role) }},
	{never, func(b array.Builder, r *Record) {
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(r.CreatedAt.UnixMicro()))
	}},
	{func(r *Record) bool { return r.Content == nil }, func(b array.Builder, r *Record) { str(b, r.Content) }},
	{never, func(b array.Builder, r *Record) { str(b, &r.ContentType) }},
	{func(r *Record) bool { return r.ModelInputString == nil }, func(b array.Builder, r *Record) { str(b, r.ModelInputString) }},
	{func(r *Record) bool { return r.ModelOutputString == nil }, func(b array.Builder, r *Record) { str(b, r.ModelOutputString) }},
	{func(r *Record) bool { return r.Rationale == nil }, func(b array.Builder, r *Record) { str(b, r.Rationale) }},
	{func(r *Record) bool { return r.ProblemText == nil }, func(b array.Builder, r *Record) { str(b, r.ProblemText) }},
	{func(r *Record) bool { return r.UserMetadata == nil }, func(b array.Builder, r *Record) { str(b, r.UserMetadata) }},
	{func(r *Record) bool { return r.InputTokens == nil }, func(b array.Builder, r *Record) { int32List(b, r.InputTokens) }},
	{func(r *Record) bool { return r.OutputTokens == nil }, func(b array.Builder, r *Record) { int32List(b, r.OutputTokens) }},
	{func(r *Record) bool { return r.NumInputTokens == nil }, func(b array.Builder, r *Record) { optInt32(b, r.NumInputTokens) }},
	{func(r *Record) bool { return r.NumOutputTokens == nil }, func(b array.Builder, r *Record) { optInt32(b, r.NumOutputTokens) }},
	{func(r *Record) bool { return r.OutputLogprobs == nil }, func(b array.Builder, r *Record) { f32List(b, r.OutputLogprobs) }},
	{func(r *Record) bool { return r.InputLogprobs == nil }, func(b array.Builder, r *Record) { f32List(b, r.InputLogprobs) }},
	{func(r *Record) bool { return r.RefLogprobs == nil }, func(b array.Builder, r *Record) { f32List(b, r.RefLogprobs) }},
	{func(r *Record) bool { return r.LossMask == nil }, func(b array.Builder, r *Record) { int8List(b, r.LossMask) }},
	{func(r *Record) bool { return r.Advantage == nil }, func(b array.Builder, r *Record) { optF32(b, r.Advantage) }},
	{func(r *Record) bool { return r.Reward == nil }, func(b array.Builder, r *Record) { optF32(b, r.Reward) }},
	{func(r *Record) bool { return r.RawReward == nil }, func(b array.Builder, r *Record) { optF32(b, r.RawReward) }},
	{func(r *Record) bool { return r.Score == nil }, func(b array.Builder, r *Record) { optF32(b, r.Score) }},
	{func(r *Record) bool { return r.GraderID == nil }, func(b array.Builder, r *Record) { str(b, r.GraderID) }},
	{func(r *Record) bool { return r.IncludeInTraining == nil }, func(b array.Builder, r *Record) {
		if bb := b.(*array.BooleanBuilder); r.IncludeInTraining == nil {
			bb.AppendNull()
		} else {
			bb.Append(*r.IncludeInTraining)
		}
	}},
	{func(r *Record) bool { return r.ExcludeReason == nil }, func(b array.Builder, r *Record) { str(b, r.ExcludeReason) }},
	{func(r *Record) bool { return r.PolicyVersion == nil }, func(b array.Builder, r *Record) { str(b, r.PolicyVersion) }},
	{func(r *Record) bool { return r.Relationships == nil }, func(b array.Builder, r *Record) { relations(b, r.Relationships) }},
	{func(r *Record) bool { return r.BinaryPayload == nil }, func(b array.Builder, r *Record) {
		if pb := b.(*array.BinaryBuilder); r.BinaryPayload == nil {
			pb.AppendNull()
		} else {
			pb.Append(r.BinaryPayload)
		}
	}},
	{func(r *Record) bool { return r.PayloadSize == nil }, func(b array.Builder, r *Record) {
		if ib := b.(*array.Int64Builder); r.PayloadSize == nil {
			ib.AppendNull()
		} else {
			ib.Append(*r.PayloadSize)
		}
	}},
	{func(r *Record) bool { return r.PayloadChecksum == nil }, func(b array.Builder, r *Record) { str(b, r.PayloadChecksum) }},
	{func(r *Record) bool { return r.ArtifactType == nil }, func(b array.Builder, r *Record) { str(b, r.ArtifactType) }},
	{func(r *Record) bool { return r.Metadata == nil }, func(b array.Builder, r *Record) { str(b, r.Metadata) }},
}

// columnBuilders are builders for Schema's columns, made on first use and
// pooled: an array built hands its buffers over and leaves the builder
// empty and ready for reuse.
type columnBuilders []array.Builder

var builders = sync.Pool{New: func() any { return make(columnBuilders, len(recordColumns)) }}

func (cb columnBuilders) get(i int) array.Builder {
	if cb[i] == nil {
		cb[i] = array.NewBuilder(memory.DefaultAllocator, Schema.Field(i).Type)
	}
	return cb[i]
}

var payloadCol = Schema.FieldIndices(ColPayload)[0]

// columnBytes gives, for the big text columns (by position in Schema), the
// bytes a record adds, so that buildBatch sizes their value buffers once
// instead of growing them by doubling (a copy and a zeroed allocation each
// time).
var columnBytes = func() []func(r *Record) int {
	out := make([]func(r *Record) int, Schema.NumFields())
	out[Schema.FieldIndices(ColID)[0]] = func(r *Record) int { return len(r.ID) }
	out[Schema.FieldIndices("content")[0]] = func(r *Record) int {
		if r.Content == nil {
			return 0
		}
		return len(*r.Content)
	}
	out[payloadCol] = func(r *Record) int { return len(r.BinaryPayload) }
	return out
}()

// buildBatch converts records (already defaulted) to one batch with Schema,
// column by column. A column no record has a value in is a slice of a
// shared null column: building the 30 unused columns of a sparse record
// one null at a time cost more than the rest of the batch.
func buildBatch(recs []Record) arrow.RecordBatch {
	n := len(recs)
	cb := builders.Get().(columnBuilders)
	cols := make([]arrow.Array, len(recordColumns))
	for i, c := range recordColumns {
		present := false
		for j := range recs {
			if !c.null(&recs[j]) {
				present = true
				break
			}
		}
		if !present {
			cols[i] = nullColumn(i, n)
			continue
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
			c.add(b, &recs[j])
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

// nullCols holds the all-null columns buildBatch uses: base, per column of
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
		nullCols.base = make([]arrow.Array, len(recordColumns))
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
			cols = make([]arrow.Array, len(recordColumns))
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

func str(b array.Builder, v *string) {
	if v == nil {
		b.AppendNull()
		return
	}
	switch sb := b.(type) {
	case *array.StringBuilder:
		sb.Append(*v)
	case *array.LargeStringBuilder:
		sb.Append(*v)
	}
}

func optInt32(b array.Builder, v *int32) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.(*array.Int32Builder).Append(*v)
}

func optF32(b array.Builder, v *float32) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.(*array.Float32Builder).Append(*v)
}

func int32List(b array.Builder, v []int32) {
	lb := b.(*array.ListBuilder)
	if v == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	lb.ValueBuilder().(*array.Int32Builder).AppendValues(v, nil)
}

func int8List(b array.Builder, v []int8) {
	lb := b.(*array.ListBuilder)
	if v == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	lb.ValueBuilder().(*array.Int8Builder).AppendValues(v, nil)
}

func f32List(b array.Builder, v []float32) {
	lb := b.(*array.ListBuilder)
	if v == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	lb.ValueBuilder().(*array.Float32Builder).AppendValues(v, nil)
}

func relations(b array.Builder, v []Relationship) {
	lb := b.(*array.ListBuilder)
	if v == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	for _, r := range v {
		sb.Append(true)
		str(sb.FieldBuilder(0), r.TargetID)
		str(sb.FieldBuilder(1), r.Relation)
		optF32(sb.FieldBuilder(2), r.Weight)
	}
}

// RecordsFromArrow decodes an appended Arrow batch: any subset of Schema's
// columns, by name and type. Unknown columns and wrong types are
// ValidationErrors.
func RecordsFromArrow(rec arrow.RecordBatch) ([]Record, error) {
	rs, err := recordsFromBatch(rec)
	var ve *ValidationError
	if err != nil && !errors.As(err, &ve) {
		return nil, &ValidationError{Msg: err.Error()}
	}
	return rs, err
}

// recordsFromBatch decodes rows of a batch with any subset of Schema's
// columns (by name); absent columns stay zero.
func recordsFromBatch(rec arrow.RecordBatch) ([]Record, error) {
	n := int(rec.NumRows())
	out := make([]Record, n)
	for ci, f := range rec.Schema().Fields() {
		set, ok := setters[f.Name]
		if !ok {
			return nil, invalid("unknown column %q: the rollout schema has no such column", f.Name)
		}
		col := asSchemaType(f.Name, rec.Column(ci)) // a reference table's role and created_at
		err := set(col, out)
		col.Release()
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return out, nil
}

type setter func(col arrow.Array, out []Record) error

func strSetter(get func(*Record) **string) setter {
	return func(col arrow.Array, out []Record) error {
		sv, ok := col.(interface {
			IsNull(int) bool
			Value(int) string
		})
		if !ok {
			return invalid("want a string column, got %s", col.DataType())
		}
		for i := range out {
			if !sv.IsNull(i) {
				s := strings.Clone(sv.Value(i))
				*get(&out[i]) = &s
			}
		}
		return nil
	}
}

func reqStrSetter(get func(*Record) *string) setter {
	return func(col arrow.Array, out []Record) error {
		sv, ok := col.(interface {
			IsNull(int) bool
			Value(int) string
		})
		if !ok {
			return invalid("want a string column, got %s", col.DataType())
		}
		for i := range out {
			if !sv.IsNull(i) {
				*get(&out[i]) = strings.Clone(sv.Value(i))
			}
		}
		return nil
	}
}

func int32Setter(get func(*Record) **int32) setter {
	return func(col arrow.Array, out []Record) error {
		a, ok := col.(*array.Int32)
		if !ok {
			return invalid("want int32, got %s", col.DataType())
		}
		for i := range out {
			if !a.IsNull(i) {
				v := a.Value(i)
				*get(&out[i]) = &v
			}
		}
		return nil
	}
}

func f32Setter(get func(*Record) **float32) setter {
	return func(col arrow.Array, out []Record) error {
		a, ok := col.(*array.Float32)
		if !ok {
			return invalid("want float32, got %s", col.DataType())
		}
		for i := range out {
			if !a.IsNull(i) {
				v := a.Value(i)
				*get(&out[i]) = &v
			}
		}
		return nil
	}
}

func listSetter[T any](get func(*Record) *[]T, values func(arrow.Array) ([]T, bool)) setter {
	return func(col arrow.Array, out []Record) error {
		l, ok := col.(*array.List)
		if !ok {
			return invalid("want a list, got %s", col.DataType())
		}
		vals, ok := values(l.ListValues())
		if !ok {
			return invalid("want list items of another type, got %s", l.ListValues().DataType())
		}
		for i := range out {
			if l.IsNull(i) {
				continue
			}
			// ValueOffsets, not Offsets()[i]: the batch may be a slice.
			s, e := l.ValueOffsets(i)
			*get(&out[i]) = append(make([]T, 0, e-s), vals[s:e]...)
		}
		return nil
	}
}

var setters = map[string]setter{
	"id":         reqStrSetter(func(r *Record) *string { return &r.ID }),
	"rollout_id": reqStrSetter(func(r *Record) *string { return &r.RolloutID }),
	"problem_id": reqStrSetter(func(r *Record) *string { return &r.ProblemID }),
	"dataset":    strSetter(func(r *Record) **string { return &r.Dataset }),
	"sequence_order": func(col arrow.Array, out []Record) error {
		a, ok := col.(*array.Int32)
		if !ok {
			return invalid("want int32, got %s", col.DataType())
		}
		for i := range out {
			out[i].SequenceOrder = a.Value(i)
		}
		return nil
	},
	"role": reqStrSetter(func(r *Record) *string { return &r.Role }),
	"created_at": func(col arrow.Array, out []Record) error {
		a, ok := col.(*array.Timestamp)
		if !ok {
			return invalid("want timestamp[us, UTC], got %s", col.DataType())
		}
		unit := a.DataType().(*arrow.TimestampType).Unit
		for i := range out {
			if !a.IsNull(i) {
				t := a.Value(i).ToTime(unit).UTC()
				out[i].CreatedAt = &t
			}
		}
		return nil
	},
	"content":             strSetter(func(r *Record) **string { return &r.Content }),
	"content_type":        reqStrSetter(func(r *Record) *string { return &r.ContentType }),
	"model_input_string":  strSetter(func(r *Record) **string { return &r.ModelInputString }),
	"model_output_string": strSetter(func(r *Record) **string { return &r.ModelOutputString }),
	"rationale":           strSetter(func(r *Record) **string { return &r.Rationale }),
	"problem_text":        strSetter(func(r *Record) **string { return &r.ProblemText }),
	"user_metadata":       strSetter(func(r *Record) **string { return &r.UserMetadata }),
	"input_tokens":        listSetter(func(r *Record) *[]int32 { return &r.InputTokens }, int32Values),
	"output_tokens":       listSetter(func(r *Record) *[]int32 { return &r.OutputTokens }, int32Values),
	"num_input_tokens":    int32Setter(func(r *Record) **int32 { return &r.NumInputTokens }),
	"num_output_tokens":   int32Setter(func(r *Record) **int32 { return &r.NumOutputTokens }),
	"output_logprobs":     listSetter(func(r *Record) *[]float32 { return &r.OutputLogprobs }, f32Values),
	"input_logprobs":      listSetter(func(r *Record) *[]float32 { return &r.InputLogprobs }, f32Values),
	"ref_logprobs":        listSetter(func(r *Record) *[]float32 { return &r.RefLogprobs }, f32Values),
	"loss_mask":           listSetter(func(r *Record) *[]int8 { return &r.LossMask }, int8Values),
	"advantage":           f32Setter(func(r *Record) **float32 { return &r.Advantage }),
	"reward":              f32Setter(func(r *Record) **float32 { return &r.Reward }),
	"raw_reward":          f32Setter(func(r *Record) **float32 { return &r.RawReward }),
	"score":               f32Setter(func(r *Record) **float32 { return &r.Score }),
	"grader_id":           strSetter(func(r *Record) **string { return &r.GraderID }),
	"include_in_training": func(col arrow.Array, out []Record) error {
		a, ok := col.(*array.Boolean)
		if !ok {
			return invalid("want bool, got %s", col.DataType())
		}
		for i := range out {
			if !a.IsNull(i) {
				v := a.Value(i)
				out[i].IncludeInTraining = &v
			}
		}
		return nil
	},
	"exclude_reason": strSetter(func(r *Record) **string { return &r.ExcludeReason }),
	"policy_version": strSetter(func(r *Record) **string { return &r.PolicyVersion }),
	"relationships": func(col arrow.Array, out []Record) error {
		l, ok := col.(*array.List)
		if !ok {
			return invalid("want list<struct>, got %s", col.DataType())
		}
		st, ok := l.ListValues().(*array.Struct)
		if !ok || st.NumField() != 3 {
			return invalid("want list<struct<target_id, relation, weight>>, got %s", col.DataType())
		}
		tgt, ok1 := st.Field(0).(*array.String)
		rel, ok2 := st.Field(1).(*array.String)
		w, ok3 := st.Field(2).(*array.Float32)
		if !ok1 || !ok2 || !ok3 {
			return invalid("want list<struct<target_id utf8, relation utf8, weight float32>>, got %s", col.DataType())
		}
		for i := range out {
			if l.IsNull(i) {
				continue
			}
			s, e := l.ValueOffsets(i) // the batch may be a slice
			rs := make([]Relationship, 0, e-s)
			for j := int(s); j < int(e); j++ {
				var r Relationship
				if !tgt.IsNull(j) {
					s := strings.Clone(tgt.Value(j))
					r.TargetID = &s
				}
				if !rel.IsNull(j) {
					s := strings.Clone(rel.Value(j))
					r.Relation = &s
				}
				if !w.IsNull(j) {
					v := w.Value(j)
					r.Weight = &v
				}
				rs = append(rs, r)
			}
			out[i].Relationships = rs
		}
		return nil
	},
	ColPayload: func(col arrow.Array, out []Record) error {
		bv, ok := col.(interface {
			IsNull(int) bool
			Value(int) []byte
		})
		if !ok {
			return invalid("want large_binary, got %s", col.DataType())
		}
		for i := range out {
			if !bv.IsNull(i) {
				out[i].BinaryPayload = append([]byte{}, bv.Value(i)...)
			}
		}
		return nil
	},
	ColPayloadSize: func(col arrow.Array, out []Record) error {
		a, ok := col.(*array.Int64)
		if !ok {
			return invalid("want int64, got %s", col.DataType())
		}
		for i := range out {
			if !a.IsNull(i) {
				v := a.Value(i)
				out[i].PayloadSize = &v
			}
		}
		return nil
	},
	ColPayloadSum:   strSetter(func(r *Record) **string { return &r.PayloadChecksum }),
	"artifact_type": strSetter(func(r *Record) **string { return &r.ArtifactType }),
	"metadata":      strSetter(func(r *Record) **string { return &r.Metadata }),
}

func int32Values(a arrow.Array) ([]int32, bool) {
	v, ok := a.(*array.Int32)
	if !ok {
		return nil, false
	}
	return v.Int32Values(), true
}

func int8Values(a arrow.Array) ([]int8, bool) {
	v, ok := a.(*array.Int8)
	if !ok {
		return nil, false
	}
	return v.Int8Values(), true
}

func f32Values(a arrow.Array) ([]float32, bool) {
	v, ok := a.(*array.Float32)
	if !ok {
		return nil, false
	}
	return v.Float32Values(), true
}
