package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/objstore"
)

// TestColumnsDefineSchema: Schema is the column table, field by field, and
// every column's field has the views its checks and defaults use.
func TestColumnsDefineSchema(t *testing.T) {
	if Schema.NumFields() != len(columns) {
		t.Fatalf("Schema has %d fields, the table %d columns", Schema.NumFields(), len(columns))
	}
	for i, c := range columns {
		f := Schema.Field(i)
		if f.Name != c.name || !arrow.TypeEqual(f.Type, c.typ) || f.Nullable == c.required {
			t.Errorf("Schema field %d is %s, the table says %s %s required=%v", i, f, c.name, c.typ, c.required)
		}
		if isText(&c) && c.name != ColRelationships && textFields[i] == nil {
			t.Errorf("text column %s: its field has no text view", c.name)
		}
		switch c.def.kind {
		case defaultNewID, defaultText, defaultCopy, defaultSum:
			if textFields[i] == nil || c.typ.ID() != arrow.STRING {
				t.Errorf("column %s: a text default on a %s field %T", c.name, c.typ, c.field)
			}
		case defaultSize:
			if int64Fields[i] == nil {
				t.Errorf("column %s: a size default on a field without an int64 view", c.name)
			}
		}
		if c.def.kind == defaultCopy && schemaIndex[c.def.from] >= i {
			t.Errorf("column %s copies %s, which comes later", c.name, c.def.from)
		}
	}
	if md := Schema.Field(idCol).Metadata; md.FindKey("lance-schema:unenforced-primary-key") < 0 {
		t.Errorf("id lost its primary-key metadata: %v", md)
	}
}

// appendBoth appends recs through Store.Append (the JSON path) and, as an
// Arrow batch of the same values, through Store.AppendArrow, and returns
// both errors. The batch is what buildBatch makes of recs before any
// default (absent values are nulls, as a client's batch would have them).
func appendBoth(t *testing.T, s *Store, recs []Record) (jsonErr, arrowErr error) {
	t.Helper()
	batch := buildBatch(slices.Clone(recs))
	defer batch.Release()
	_, jsonErr = s.Append(context.Background(), cloneRecords(recs))
	_, arrowErr = s.AppendArrow(context.Background(), batch)
	return jsonErr, arrowErr
}

func cloneRecords(recs []Record) []Record {
	out := slices.Clone(recs)
	for i := range out {
		out[i].Relationships = slices.Clone(out[i].Relationships)
	}
	return out
}

// TestOneRuleBothPaths: every rule of the column table refuses the same
// bad value with the same message whether the row came as JSON records or
// as an Arrow batch, and neither path stores anything.
func TestOneRuleBothPaths(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "a", quiet(Options{})), "rules")
	ok := func() Record { return Record{RolloutID: "r"} }
	with := func(f func(r *Record)) []Record {
		recs := []Record{ok(), ok(), ok()}
		f(&recs[1])
		return recs
	}
	type tc struct {
		name string
		recs []Record
		want string
	}
	cases := []tc{
		{"rollout_id missing", with(func(r *Record) { r.RolloutID = "" }), "record 1: rollout_id is required"},
		{"sequence_order negative", with(func(r *Record) { r.SequenceOrder = -3 }), "record 1: sequence_order must be >= 0"},
		{"payload_size wrong", with(func(r *Record) { r.BinaryPayload, r.PayloadSize = []byte("abc"), ptr[int64](4) }),
			"record 1: payload_size 4 does not match the 3 payload bytes"},
		{"payload_checksum wrong", with(func(r *Record) { r.BinaryPayload, r.PayloadChecksum = []byte("abc"), ptr("sha256:00") }),
			"record 1: payload_checksum does not match the payload (sha256 " + sha("abc") + ")"},
		{"metadata not JSON", with(func(r *Record) { r.Metadata = ptr("{") }), "record 1: metadata must be JSON"},
		{"relationship target_id not UTF-8", with(func(r *Record) {
			r.Relationships = []Relationship{{TargetID: ptr("ok")}, {Relation: ptr("ok"), TargetID: ptr("\xff")}}
		}), `record 1: column "relationships": target_id is not valid UTF-8`},
		{"relationship relation not UTF-8", with(func(r *Record) { r.Relationships = []Relationship{{Relation: ptr("a\xc3(")}} }),
			`record 1: column "relationships": relation is not valid UTF-8`},
		// The order of rules: the lowest row, then the table's order.
		{"lowest row first", func() []Record {
			recs := with(func(r *Record) { r.Metadata = ptr("{") })
			recs[2].SequenceOrder = -1
			return recs
		}(), "record 1: metadata must be JSON"},
		{"same row, checks in table order", with(func(r *Record) { r.Metadata, r.SequenceOrder = ptr("{"), -1 }),
			"record 1: sequence_order must be >= 0"},
		{"same row, UTF-8 before checks", with(func(r *Record) { r.Metadata, r.SequenceOrder, r.Content = ptr("{"), -1, ptr("\xff") }),
			`record 1: column "content" is not valid UTF-8`},
		{"same row, text in table order", with(func(r *Record) { r.Metadata, r.Content = ptr("\xff"), ptr("\xff") }),
			`record 1: column "content" is not valid UTF-8`},
		{"same row, required first", with(func(r *Record) { r.RolloutID, r.ID = "", "\xff" }), "record 1: rollout_id is required"},
	}
	// Every text column refuses text that is not UTF-8.
	for i, c := range columns {
		if tf := textFields[i]; tf != nil {
			cases = append(cases, tc{c.name + " not UTF-8", with(func(r *Record) { tf.setText(r, "ok \xe2\x82") }),
				fmt.Sprintf("record 1: column %q is not valid UTF-8", c.name)})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jsonErr, arrowErr := appendBoth(t, s, c.recs)
			var ve *ValidationError
			if !errors.As(jsonErr, &ve) || jsonErr.Error() != c.want {
				t.Errorf("JSON path: %v, want %q", jsonErr, c.want)
			}
			if !errors.As(arrowErr, &ve) || arrowErr.Error() != c.want {
				t.Errorf("Arrow path: %v, want %q", arrowErr, c.want)
			}
		})
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := listIDs(t, s, ListOptions{Source: SourceAll}); len(ids) != 0 {
		t.Fatalf("refused appends stored %v", ids)
	}
	// The same rows without their faults are stored by both paths.
	jsonErr, arrowErr := appendBoth(t, s, []Record{ok(), ok()})
	if jsonErr != nil || arrowErr != nil {
		t.Fatalf("good rows refused: JSON %v, Arrow %v", jsonErr, arrowErr)
	}
}

// TestOneDefaultBothPaths: a row without a value in a column with a
// default gets the same value from both paths (ids aside, which are new
// UUIDs either way), and a row with values keeps them.
func TestOneDefaultBothPaths(t *testing.T) {
	now := time.Date(2026, 2, 3, 4, 5, 6, 789000, time.UTC)
	given := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := []Record{
		{RolloutID: "r0"},
		{ID: "x", RolloutID: "r1", ProblemID: "p", Role: "user", ContentType: "text/markdown", CreatedAt: &given, SequenceOrder: 7,
			BinaryPayload: []byte("abc"), PayloadChecksum: ptr("sha256:" + sha("abc"))},
		{RolloutID: "r2", BinaryPayload: []byte{}},
	}
	raw := buildBatch(slices.Clone(recs))
	defer raw.Release()
	viaArrow, _, err := conformArrow(memory.DefaultAllocator, raw, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer viaArrow.Release()
	defaulted := cloneRecords(recs)
	if err := prepareRecords(defaulted, 0, now); err != nil {
		t.Fatal(err)
	}
	viaJSON := buildBatch(defaulted)
	defer viaJSON.Release()
	for i, c := range columns {
		a, b := viaJSON.Column(i), viaArrow.Column(i)
		if i == idCol {
			for r := range a.Len() {
				ja, jb := a.(*array.String).Value(r), b.(*array.String).Value(r)
				if (r == 1) != (ja == "x") || (r == 1) != (jb == "x") || len(ja) != 36 && r != 1 || len(jb) != 36 && r != 1 {
					t.Errorf("row %d ids: JSON %q, Arrow %q", r, ja, jb)
				}
			}
			continue
		}
		if !array.Equal(a, b) {
			t.Errorf("column %s: JSON path %v, Arrow path %v", c.name, a, b)
		}
	}
	for _, chk := range []struct {
		col  string
		want string
	}{
		{ColProblemID, `["r0" "p" "r2"]`},
		{ColRole, `["assistant" "user" "assistant"]`},
		{ColContentType, `["text/plain" "text/markdown" "text/plain"]`},
		{ColSequenceOrder, `[0 7 0]`},
		{ColPayloadSize, `[(null) 3 0]`},
		{ColPayloadSum, `[(null) "` + sha("abc") + `" "` + sha("") + `"]`},
	} {
		if got := fmt.Sprint(viaArrow.Column(schemaIndex[chk.col])); got != chk.want {
			t.Errorf("%s = %s, want %s", chk.col, got, chk.want)
		}
	}
	ts := viaArrow.Column(schemaIndex[ColCreatedAt]).(*array.Timestamp)
	if ts.Value(0) != arrow.Timestamp(now.UnixMicro()) || ts.Value(1) != arrow.Timestamp(given.UnixMicro()) {
		t.Errorf("created_at %v: want now, then the given time", ts)
	}
}

// TestOneConversionBothPaths: the types a column is read in are the types
// it is appended in. A batch in the reference system's types (role a
// dictionary, created_at a timestamp without a zone, content large_utf8 as
// utf8) is accepted by AppendArrow and decoded by RecordsFromArrow to the
// same values.
func TestOneConversionBothPaths(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db := array.NewDictionaryBuilder(mem, refRole).(*array.BinaryDictionaryBuilder)
	for _, r := range []string{"tool", "user", "tool"} {
		if err := db.AppendString(r); err != nil {
			t.Fatal(err)
		}
	}
	roles := db.NewArray()
	db.Release()
	in := newBatch(
		inCol{ColRolloutID, js(mem, utf8T, `["r","r","r"]`)},
		inCol{ColRole, roles},
		inCol{ColCreatedAt, js(mem, refCreated, `[1700000000000001, null, 5]`)},
		inCol{"content", js(mem, utf8T, `["a", null, "c"]`)},
	)
	defer in.Release()
	now := time.Unix(1800000000, 0).UTC()
	out, _, err := conformArrow(mem, in, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	recs, err := RecordsFromArrow(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareRecords(recs, 0, now); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		role := out.Column(schemaIndex[ColRole]).(*array.String).Value(i)
		at := out.Column(schemaIndex[ColCreatedAt]).(*array.Timestamp).Value(i)
		if r.Role != role || arrow.Timestamp(r.CreatedAt.UnixMicro()) != at {
			t.Errorf("row %d: records %s %v, batch %s %v", i, r.Role, r.CreatedAt, role, at)
		}
	}
	if got := fmt.Sprint(out.Column(schemaIndex[ColRole])); got != `["tool" "user" "tool"]` {
		t.Errorf("roles %s", got)
	}
	if ts := out.Column(schemaIndex[ColCreatedAt]).(*array.Timestamp); ts.Value(1) != arrow.Timestamp(now.UnixMicro()) || ts.Value(2) != 5 {
		t.Errorf("created_at %v", ts)
	}
	if c := out.Column(schemaIndex["content"]); c.DataType().ID() != arrow.LARGE_STRING || !strings.Contains(fmt.Sprint(c), `"c"`) {
		t.Errorf("content %s %v", c.DataType(), c)
	}
}
