package row

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

func cloneRecords(recs []Record) []Record {
	out := slices.Clone(recs)
	for i := range out {
		out[i].Relationships = slices.Clone(out[i].Relationships)
	}
	return out
}

// TestTextColumnsRefuseBadUTF8: every text column refuses text that is
// not UTF-8 with the same message on both paths: Prepare on Records, and
// Conform on the batch BuildBatch makes of them before any default (absent
// values are nulls, as a client's batch would have them).
func TestTextColumnsRefuseBadUTF8(t *testing.T) {
	now := time.Now()
	n := 0
	for i, c := range columns {
		tf := textFields[i]
		if tf == nil {
			continue
		}
		n++
		t.Run(c.name, func(t *testing.T) {
			recs := []Record{{RolloutID: "r"}, {RolloutID: "r"}, {RolloutID: "r"}}
			tf.setText(&recs[1], "ok \xe2\x82")
			want := fmt.Sprintf("record 1: column %q is not valid UTF-8", c.name)
			batch := BuildBatch(slices.Clone(recs))
			defer batch.Release()
			out, _, arrowErr := Conform(batch, now)
			if out != nil {
				out.Release()
			}
			jsonErr := Prepare(recs, 0, now)
			var ve *ValidationError
			if !errors.As(jsonErr, &ve) || jsonErr.Error() != want {
				t.Errorf("Records: %v, want %q", jsonErr, want)
			}
			if !errors.As(arrowErr, &ve) || arrowErr.Error() != want {
				t.Errorf("Arrow: %v, want %q", arrowErr, want)
			}
		})
	}
	if n < 10 {
		t.Fatalf("%d text columns: the table lost its text views", n)
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
	raw := BuildBatch(slices.Clone(recs))
	defer raw.Release()
	viaArrow, _, err := conformArrow(memory.DefaultAllocator, raw, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer viaArrow.Release()
	defaulted := cloneRecords(recs)
	if err := Prepare(defaulted, 0, now); err != nil {
		t.Fatal(err)
	}
	viaJSON := BuildBatch(defaulted)
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

// The reference system's types of role and created_at (reftypes.go).
var (
	refRole    = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	refCreated = &arrow.TimestampType{Unit: arrow.Microsecond}
)

// TestOneConversionBothPaths: the types a column is read in are the types
// it is appended in. A batch in the reference system's types (role a
// dictionary, created_at a timestamp without a zone, content large_utf8 as
// utf8) is accepted by Conform (AppendArrow's conversion) and decoded by
// FromArrow to the same values.
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
	recs, err := FromArrow(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := Prepare(recs, 0, now); err != nil {
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

// TestBuildBatchTextColumns: every text column BuildBatch makes holds
// each record's text, a null where a nullable column has no value, and
// an empty string where a required one has none (its values are built
// without a builder; see buildText).
func TestBuildBatchTextColumns(t *testing.T) {
	for i, c := range columns {
		tf := textFields[i]
		if tf == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			recs := []Record{{RolloutID: "r"}, {RolloutID: "r"}, {RolloutID: "r"}, {RolloutID: "r"}}
			tf.setText(&recs[0], "first")
			tf.setText(&recs[2], "")
			tf.setText(&recs[3], strings.Repeat("é", 300))
			batch := BuildBatch(slices.Clone(recs))
			defer batch.Release()
			col := batch.Column(i)
			nullable := Schema.Field(i).Nullable
			for r := range recs {
				absent := c.field.null(&recs[r])
				if col.IsNull(r) != (nullable && absent) {
					t.Fatalf("row %d: null %v, want %v", r, col.IsNull(r), nullable && absent)
				}
				if col.IsNull(r) {
					continue
				}
				want := ""
				if !absent || !nullable {
					if !c.field.null(&recs[r]) {
						want = tf.text(&recs[r])
					}
				}
				var got string
				switch a := col.(type) {
				case *array.String:
					got = a.Value(r)
				case *array.LargeString:
					got = a.Value(r)
				default:
					t.Fatalf("column is %T", col)
				}
				if got != want {
					t.Fatalf("row %d: %q, want %q", r, got, want)
				}
			}
			if v, ok := col.(interface{ ValidateFull() error }); ok {
				if err := v.ValidateFull(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
