package row

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// inCol is one column of a test input batch.
type inCol struct {
	name string
	arr  arrow.Array
}

// newBatch makes a batch of cols, taking over their references.
func newBatch(cols ...inCol) arrow.RecordBatch {
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.arr.DataType(), Nullable: true}
		arrs[i] = c.arr
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, -1)
	for _, a := range arrs {
		a.Release()
	}
	return rec
}

// js makes an array of dt from JSON (binary values in base64).
func js(mem memory.Allocator, dt arrow.DataType, text string) arrow.Array {
	a, _, err := array.FromJSON(mem, dt, strings.NewReader(text))
	if err != nil {
		panic(fmt.Sprintf("%s %s: %v", dt, text, err))
	}
	return a
}

// rawStrings makes a utf8 or large_utf8 array without any checks, for
// invalid UTF-8. An empty Go string of nulls marks a null.
func rawStrings(mem memory.Allocator, dt arrow.DataType, vals []string, nulls ...int) arrow.Array {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for i, v := range vals {
		if slices.Contains(nulls, i) {
			b.AppendNull()
		} else {
			appendString(b, v)
		}
	}
	return b.NewArray()
}

var (
	utf8T      = arrow.BinaryTypes.String
	largeUTF8T = arrow.BinaryTypes.LargeString
	int32T     = arrow.PrimitiveTypes.Int32
	testNow    = time.Date(2025, 3, 4, 5, 6, 7, 891011000, time.UTC)
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// viaRecords is the existing path: Records, applyDefaults, BuildBatch.
func viaRecords(in arrow.RecordBatch, now time.Time) (arrow.RecordBatch, error) {
	rs, err := FromArrow(in)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, Invalidf("no records: send at least one")
	}
	for i := range rs {
		if err := applyDefaults(&rs[i], i, now); err != nil {
			return nil, err
		}
	}
	return BuildBatch(rs), nil
}

// TestConformArrowMatchesRecordPath conforms batches and compares them,
// value by value, with what the Record path builds from the same input.
func TestConformArrowMatchesRecordPath(t *testing.T) {
	relNamed := func(a, b, c string, nullable bool) arrow.DataType {
		return arrow.ListOfField(arrow.Field{Name: "element", Nullable: nullable, Type: arrow.StructOf(
			arrow.Field{Name: a, Type: utf8T, Nullable: nullable},
			arrow.Field{Name: b, Type: utf8T, Nullable: nullable},
			arrow.Field{Name: c, Type: arrow.PrimitiveTypes.Float32, Nullable: nullable},
		)})
	}
	for _, tc := range []struct {
		name  string
		cols  func(memory.Allocator) []inCol
		genID []int // rows whose id is generated
		slice [2]int64
	}{
		{name: "subset id rollout_id sequence_order content", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b","c"]`)},
				{"rollout_id", js(m, utf8T, `["r","r","q"]`)},
				{"sequence_order", js(m, int32T, `[0,1,2]`)},
				{"content", js(m, largeUTF8T, `["x",null,"zzz"]`)},
			}
		}},
		{name: "column order free", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"content", js(m, largeUTF8T, `["x",null]`)},
				{"sequence_order", js(m, int32T, `[5,1]`)},
				{"rollout_id", js(m, utf8T, `["r","q"]`)},
				{"id", js(m, utf8T, `["a","b"]`)},
			}
		}},
		{name: "defaults per row", genID: []int{0, 1}, cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `[null,"","c"]`)},
				{"rollout_id", js(m, utf8T, `["r","s","t"]`)},
				{"problem_id", js(m, utf8T, `[null,"","p"]`)},
				{"role", js(m, utf8T, `[null,"","user"]`)},
				{"content_type", js(m, utf8T, `[null,"image/png",""]`)},
				{"created_at", js(m, tsUTC, `[null,"1700000000000001",null]`)},
				{"sequence_order", js(m, int32T, `[null,3,0]`)},
			}
		}},
		{name: "rollout_id only", genID: []int{0, 1}, cols: func(m memory.Allocator) []inCol {
			return []inCol{{"rollout_id", js(m, utf8T, `["r","r"]`)}}
		}},
		{name: "large_utf8 for utf8 and utf8 for large_utf8", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, largeUTF8T, `["a","b"]`)},
				{"rollout_id", js(m, largeUTF8T, `["r","r"]`)},
				{"role", js(m, largeUTF8T, `[null,"tool"]`)},
				{"dataset", js(m, largeUTF8T, `["d",null]`)},
				{"content", js(m, utf8T, `["é€😀",null]`)},
				{"metadata", js(m, utf8T, `["{\"a\":1}",null]`)},
			}
		}},
		{name: "timestamp ms without zone", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b"]`)},
				{"rollout_id", js(m, utf8T, `["r","r"]`)},
				{"created_at", js(m, &arrow.TimestampType{Unit: arrow.Millisecond}, `["1700000000123",null]`)},
			}
		}},
		{name: "timestamp ns in another zone, before 1970", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b"]`)},
				{"rollout_id", js(m, utf8T, `["r","r"]`)},
				{"created_at", js(m, &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"}, `["-1500","1700000000123456789"]`)},
			}
		}},
		{name: "timestamp s and us without zone", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a"]`)},
				{"rollout_id", js(m, utf8T, `["r"]`)},
				{"created_at", js(m, &arrow.TimestampType{Unit: arrow.Second}, `["1700000000"]`)},
			}
		}},
		{name: "payload size and checksum computed", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b","c"]`)},
				{"rollout_id", js(m, utf8T, `["r","r","r"]`)},
				{ColPayload, js(m, arrow.BinaryTypes.LargeBinary, `["`+b64("abc")+`",null,""]`)},
			}
		}},
		{name: "binary payload, given size and prefixed checksum", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b","c"]`)},
				{"rollout_id", js(m, utf8T, `["r","r","r"]`)},
				{ColPayload, js(m, arrow.BinaryTypes.Binary, `["`+b64("abc")+`",null,"`+b64("xy")+`"]`)},
				{ColPayloadSize, js(m, arrow.PrimitiveTypes.Int64, `[3,7,null]`)},
				{ColPayloadSum, js(m, utf8T, `["sha256:`+sha("abc")+`","keep","`+sha("xy")+`"]`)},
			}
		}},
		{name: "every column", cols: func(m memory.Allocator) []inCol {
			var cols []inCol
			for _, f := range Schema.Fields() {
				var text string
				switch f.Name {
				case "id":
					text = `["a","b"]`
				case "sequence_order", "num_input_tokens", "num_output_tokens":
					text = `[1,2]`
				case "role":
					text = `["user","grade"]`
				case "created_at":
					text = `["1700000000000000","1700000000000002"]`
				case "metadata":
					text = `["[1,2]","\"s\""]`
				case "input_tokens", "output_tokens", "loss_mask":
					text = `[[1,2,3],[]]`
				case "output_logprobs", "input_logprobs", "ref_logprobs":
					text = `[[-0.5],null]`
				case "advantage", "reward", "raw_reward", "score":
					text = `[1.5,null]`
				case "include_in_training":
					text = `[true,false]`
				case "relationships":
					text = `[[{"target_id":"x","relation":"follows","weight":0.5},{"target_id":null,"relation":"r","weight":null}],null]`
				case ColPayload:
					text = `["` + b64("png") + `",null]`
				case ColPayloadSize:
					text = `[3,null]`
				case ColPayloadSum:
					text = `["` + sha("png") + `",null]`
				case ColShard, ColSeq:
					text = `[7,null]` // set by the store: dropped
				case ColPayloadRef:
					text = `["_lc_blobs/elsewhere",null]` // set by the store: dropped
				default:
					text = `["` + f.Name + `",null]`
					if !f.Nullable {
						text = `["` + f.Name + `","v"]`
					}
				}
				cols = append(cols, inCol{f.Name, js(m, f.Type, text)})
			}
			slices.Reverse(cols) // order is free
			return cols
		}},
		{name: "list items named and nullable otherwise", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b"]`)},
				{"rollout_id", js(m, utf8T, `["r","r"]`)},
				{"input_tokens", js(m, arrow.ListOfNonNullable(int32T), `[[1,2],null]`)},
				{"loss_mask", js(m, arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int8}), `[[1],[0,1]]`)},
				{"relationships", js(m, relNamed("t", "r", "w", false), `[null,[{"t":"x","r":"y","w":1}]]`)},
			}
		}},
		{name: "sliced at a bit offset", slice: [2]int64{3, 17}, cols: func(m memory.Allocator) []inCol {
			var ids, content, roles []string
			for i := range 20 {
				ids = append(ids, fmt.Sprintf(`"id%d"`, i))
				content = append(content, fmt.Sprintf(`"c%d"`, i))
				roles = append(roles, `"tool"`)
				if i%3 == 0 {
					content[i], roles[i] = "null", "null"
				}
			}
			return []inCol{
				{"id", js(m, largeUTF8T, "["+strings.Join(ids, ",")+"]")},
				{"rollout_id", js(m, largeUTF8T, "["+strings.Repeat(`"r",`, 19)+`"r"]`)},
				{"content", js(m, utf8T, "["+strings.Join(content, ",")+"]")},
				{"role", js(m, largeUTF8T, "["+strings.Join(roles, ",")+"]")},
			}
		}},
		{name: "sliced at a byte offset", slice: [2]int64{8, 12}, cols: func(m memory.Allocator) []inCol {
			var content []string
			for i := range 12 {
				content = append(content, fmt.Sprintf(`"c%d"`, i))
				if i%3 == 0 {
					content[i] = "null"
				}
			}
			return []inCol{
				{"id", js(m, utf8T, `["0","1","2","3","4","5","6","7","8","9","10","11"]`)},
				{"rollout_id", js(m, utf8T, "["+strings.Repeat(`"r",`, 11)+`"r"]`)},
				{"content", js(m, utf8T, "["+strings.Join(content, ",")+"]")},
				{ColPayload, js(m, arrow.BinaryTypes.Binary, "["+strings.Repeat(`"`+b64("p")+`",`, 11)+`null]`)},
			}
		}},
		{name: "fixed_size_binary payload", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b"]`)},
				{"rollout_id", js(m, utf8T, `["r","r"]`)},
				{ColPayload, js(m, &arrow.FixedSizeBinaryType{ByteWidth: 2}, `["`+b64("xy")+`",null]`)},
			}
		}},
		{name: "string_view content", cols: func(m memory.Allocator) []inCol {
			return []inCol{
				{"id", js(m, utf8T, `["a","b"]`)},
				{"rollout_id", js(m, utf8T, `["r","r"]`)},
				{"content", js(m, arrow.BinaryTypes.StringView, `["a longer string than twelve bytes",null]`)},
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			in := newBatch(tc.cols(mem)...)
			if tc.slice != [2]int64{} {
				s := in.NewSlice(tc.slice[0], tc.slice[1])
				in.Release()
				in = s
			}
			defer in.Release()

			want, err := viaRecords(in, testNow)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Release()
			got, ids, err := conformArrow(mem, in, testNow, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if got.Schema() != Schema || got.NumRows() != in.NumRows() {
				t.Fatalf("schema %s, %d rows", got.Schema(), got.NumRows())
			}
			for i, f := range Schema.Fields() {
				if i == idCol && tc.genID != nil {
					continue
				}
				if !array.Equal(got.Column(i), want.Column(i)) {
					t.Errorf("column %s:\n got %s\nwant %s", f.Name, got.Column(i), want.Column(i))
				}
			}
			gotIDs := got.Column(idCol).(*array.String)
			wantIDs := want.Column(idCol).(*array.String)
			if len(ids) != gotIDs.Len() {
				t.Fatalf("%d ids for %d rows", len(ids), gotIDs.Len())
			}
			for i, id := range ids {
				if id != gotIDs.Value(i) {
					t.Errorf("id %d: returned %q, stored %q", i, id, gotIDs.Value(i))
				}
				if slices.Contains(tc.genID, i) {
					if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
						t.Errorf("generated id %d %q: %v", i, id, err)
					}
				} else if id != wantIDs.Value(i) {
					t.Errorf("id %d: %q, want %q", i, id, wantIDs.Value(i))
				}
			}
		})
	}
}

// TestConformArrowSlicedLists: list columns of a sliced batch keep their
// rows. (Not compared with the Record path: FromBatch reads list
// offsets without the array's offset.)
func TestConformArrowSlicedLists(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	full := newBatch(
		inCol{"rollout_id", js(mem, utf8T, `["r","r","r","r","r"]`)},
		inCol{"input_tokens", js(mem, arrow.ListOfNonNullable(int32T), `[[0],[1,1],null,[3],[4,4,4]]`)},
		inCol{"output_tokens", js(mem, arrow.ListOf(int32T), `[[0],[1,1],null,[3],[4,4,4]]`)},
		inCol{"relationships", js(mem, arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "a", Type: utf8T}, arrow.Field{Name: "b", Type: utf8T}, arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Float32})),
			`[[{"a":"0","b":"0","c":0}],null,[{"a":"2","b":"2","c":2}],[],[{"a":"4","b":"4","c":4}]]`)},
	)
	defer full.Release()
	in := full.NewSlice(1, 5)
	defer in.Release()
	out, _, err := conformArrow(mem, in, testNow, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	for _, name := range []string{"input_tokens", "output_tokens"} {
		l := out.Column(schemaIndex[name]).(*array.List)
		if got := l.String(); got != "[[1 1] (null) [3] [4 4 4]]" {
			t.Errorf("%s: %s", name, got)
		}
	}
	l := out.Column(schemaIndex["relationships"]).(*array.List)
	if got := l.String(); got != `[(null) {["2"] ["2"] [2]} {[] [] []} {["4"] ["4"] [4]}]` {
		t.Errorf("relationships: %s", got)
	}
}

// TestConformArrowLongColumns: columns longer than the batch's row count
// are cut to it.
func TestConformArrowLongColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	id, ro := js(mem, utf8T, `["a","b","c"]`), js(mem, utf8T, `["r","r",""]`)
	in := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: utf8T}, {Name: "rollout_id", Type: utf8T}}, nil), []arrow.Array{id, ro}, 2)
	id.Release()
	ro.Release()
	defer in.Release()
	out, ids, err := conformArrow(mem, in, testNow, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !slices.Equal(ids, []string{"a", "b"}) || out.NumRows() != 2 || out.Column(idCol).Len() != 2 {
		t.Fatalf("ids %v, %d rows", ids, out.NumRows())
	}
}

func TestConformArrowPayload(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := newBatch(
		inCol{"rollout_id", js(mem, utf8T, `["r","r"]`)},
		inCol{ColPayload, js(mem, arrow.BinaryTypes.LargeBinary, `["`+b64("hello")+`",null]`)},
	)
	defer in.Release()
	out, _, err := conformArrow(mem, in, testNow, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	size := out.Column(sizeCol).(*array.Int64)
	sum := out.Column(sumCol).(*array.String)
	if size.Value(0) != 5 || sum.Value(0) != sha("hello") || size.IsValid(1) || sum.IsValid(1) {
		t.Fatalf("size %s, checksum %s", size, sum)
	}
}

// TestConformArrowReuses: columns needing nothing are the input's arrays.
func TestConformArrowReuses(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := newBatch(
		inCol{"content", js(mem, largeUTF8T, `["hello","world"]`)},
		inCol{"id", js(mem, utf8T, `["a","b"]`)},
		inCol{"rollout_id", js(mem, utf8T, `["r","r"]`)},
		inCol{"role", js(mem, utf8T, `["user","tool"]`)},
		inCol{"content_type", js(mem, utf8T, `["text/plain","text/plain"]`)},
		inCol{"created_at", js(mem, tsUTC, `["1","2"]`)},
		inCol{"sequence_order", js(mem, int32T, `[0,1]`)},
		inCol{ColPayload, js(mem, arrow.BinaryTypes.LargeBinary, `["`+b64("p")+`",null]`)},
		inCol{ColPayloadSize, js(mem, arrow.PrimitiveTypes.Int64, `[1,null]`)},
		inCol{ColPayloadSum, js(mem, utf8T, `["`+sha("p")+`",null]`)},
		inCol{"metadata", js(mem, largeUTF8T, `["{}",null]`)},
		inCol{"input_tokens", js(mem, arrow.ListOf(int32T), `[[1],null]`)},
	)
	defer in.Release()
	out, _, err := conformArrow(mem, in, testNow, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	for ci, f := range in.Schema().Fields() {
		got, want := out.Column(schemaIndex[f.Name]), in.Column(ci)
		if got != want || got.Data().Buffers()[1] != want.Data().Buffers()[1] {
			t.Errorf("column %s was copied", f.Name)
		}
	}
	if out.Column(problemCol) != in.Column(2) {
		t.Error("problem_id does not share rollout_id")
	}
}

func TestConformArrowErrors(t *testing.T) {
	lt := func(m memory.Allocator, dt arrow.DataType, text string) arrow.Array { return js(m, dt, text) }
	r2 := func(m memory.Allocator) inCol { return inCol{"rollout_id", js(m, utf8T, `["r","r"]`)} }
	for _, tc := range []struct {
		name string
		cols func(memory.Allocator) []inCol
		want string
		// same: the Record path (FromArrow, then the JSON path's
		// validation) fails with the same message: one conversion and one
		// validation serve both
		same bool
	}{
		{"no rows", func(m memory.Allocator) []inCol { return []inCol{{"rollout_id", js(m, utf8T, `[]`)}} }, "no records: send at least one", true},
		{"no rows, no buffers", func(m memory.Allocator) []inCol {
			bare := func(dt arrow.DataType) arrow.Array {
				d := array.NewData(dt, 0, []*memory.Buffer{nil, nil, nil}, nil, 0, 0)
				defer d.Release()
				return array.MakeFromData(d)
			}
			return []inCol{{"rollout_id", bare(largeUTF8T)}, {"content", bare(utf8T)}, {ColPayload, bare(arrow.BinaryTypes.Binary)}}
		}, "no records: send at least one", true},
		{"no rollout_id column", func(m memory.Allocator) []inCol { return []inCol{{"id", js(m, utf8T, `["a"]`)}} }, "record 0: rollout_id is required", true},
		{"null rollout_id", func(m memory.Allocator) []inCol { return []inCol{{"rollout_id", js(m, utf8T, `["r",null]`)}} }, "record 1: rollout_id is required", true},
		{"empty rollout_id", func(m memory.Allocator) []inCol { return []inCol{{"rollout_id", js(m, utf8T, `["r","r",""]`)}} }, "record 2: rollout_id is required", true},
		{"negative sequence_order", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {"sequence_order", js(m, int32T, `[0,-1]`)}}
		}, "record 1: sequence_order must be >= 0", true},
		{"payload_size mismatch", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {ColPayload, js(m, arrow.BinaryTypes.LargeBinary, `[null,"`+b64("abc")+`"]`)}, {ColPayloadSize, js(m, arrow.PrimitiveTypes.Int64, `[9,4]`)}}
		}, "record 1: payload_size 4 does not match the 3 payload bytes", true},
		{"payload_checksum mismatch", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {ColPayload, js(m, arrow.BinaryTypes.LargeBinary, `["`+b64("abc")+`",null]`)}, {ColPayloadSum, js(m, utf8T, `["sha256:00",null]`)}}
		}, "record 0: payload_checksum does not match the payload (sha256 " + sha("abc") + ")", true},
		{"metadata not JSON", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {"metadata", js(m, largeUTF8T, `["{\"a\":1}","{"]`)}}
		}, "record 1: metadata must be JSON", true},
		{"lowest row first", func(m memory.Allocator) []inCol {
			return []inCol{{"rollout_id", js(m, utf8T, `["r","r","r"]`)}, {"role", js(m, utf8T, `["user","user","x"]`)}, {"sequence_order", js(m, int32T, `[0,-1,0]`)}}
		}, "record 1: sequence_order must be >= 0", true},
		{"same row, applyDefaults order", func(m memory.Allocator) []inCol {
			return []inCol{{"metadata", js(m, largeUTF8T, `["{"]`)}, {"sequence_order", js(m, int32T, `[-1]`)}, {"role", js(m, utf8T, `["x"]`)}, {"rollout_id", js(m, utf8T, `["r"]`)}}
		}, `record 0: sequence_order must be >= 0`, true},
		{"unknown column", func(m memory.Allocator) []inCol { return []inCol{r2(m), {"bogus", js(m, utf8T, `["a","b"]`)}} }, `unknown column "bogus"`, true},
		{"duplicate column", func(m memory.Allocator) []inCol { return []inCol{r2(m), r2(m)} }, `column "rollout_id" appears twice`, false},
		{"int64 sequence_order", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {"sequence_order", js(m, arrow.PrimitiveTypes.Int64, `[1,2]`)}}
		}, `column "sequence_order": want int32, got int64`, true},
		{"int content", func(m memory.Allocator) []inCol { return []inCol{r2(m), {"content", js(m, int32T, `[1,2]`)}} }, `column "content": want utf8 or large_utf8, got int32`, true},
		{"binary rollout_id", func(m memory.Allocator) []inCol {
			return []inCol{{"rollout_id", js(m, arrow.BinaryTypes.Binary, `["`+b64("r")+`"]`)}}
		}, `column "rollout_id": want utf8 or large_utf8, got binary`, true},
		{"string created_at", func(m memory.Allocator) []inCol { return []inCol{r2(m), {"created_at", js(m, utf8T, `["x","y"]`)}} }, `column "created_at": want timestamp`, true},
		{"string payload", func(m memory.Allocator) []inCol { return []inCol{r2(m), {ColPayload, js(m, utf8T, `["x","y"]`)}} }, `column "binary_payload": want large_binary or binary, got utf8`, true},
		{"list of int64 tokens", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {"input_tokens", lt(m, arrow.ListOf(arrow.PrimitiveTypes.Int64), `[[1],[2]]`)}}
		}, `column "input_tokens": want list<item: int32, nullable>, got list<item: int64, nullable>`, true},
		{"tokens not a list", func(m memory.Allocator) []inCol { return []inCol{r2(m), {"input_tokens", js(m, int32T, `[1,2]`)}} }, `column "input_tokens": want list<item: int32`, true},
		{"relationships of another struct", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {"relationships", lt(m, arrow.ListOf(arrow.StructOf(arrow.Field{Name: "target_id", Type: utf8T})), `[null,null]`)}}
		}, `column "relationships": want list<struct<target_id: utf8, relation: utf8, weight: float32>>`, true},
		{"invalid UTF-8", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {"content", rawStrings(m, largeUTF8T, []string{"ok", "bad \xff"})}}
		}, `record 1: column "content" is not valid UTF-8`, true},
		{"rune split across values", func(m memory.Allocator) []inCol {
			// Together the bytes are "€": only the values are invalid.
			return []inCol{{"rollout_id", rawStrings(m, utf8T, []string{"a\xe2\x82", "\xac"})}}
		}, `record 0: column "rollout_id" is not valid UTF-8`, true},
		{"invalid UTF-8 converted to utf8", func(m memory.Allocator) []inCol {
			return []inCol{r2(m), {"role", rawStrings(m, largeUTF8T, []string{"user", "\xc3("})}}
		}, `record 1: column "role" is not valid UTF-8`, true},
		{"invalid UTF-8 in a relationship", func(m memory.Allocator) []inCol {
			b := array.NewListBuilder(m, relationsTy)
			defer b.Release()
			sb := b.ValueBuilder().(*array.StructBuilder)
			for _, target := range [][]string{{"ok"}, {"ok", "ok"}, {"ok", "\xff"}} {
				b.Append(true)
				for _, s := range target {
					sb.Append(true)
					sb.FieldBuilder(0).(*array.StringBuilder).Append(s)
					sb.FieldBuilder(1).AppendNull()
					sb.FieldBuilder(2).AppendNull()
				}
			}
			return []inCol{{"rollout_id", js(m, utf8T, `["r","r","r"]`)}, {"relationships", b.NewArray()}}
		}, `record 2: column "relationships": target_id is not valid UTF-8`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			in := newBatch(tc.cols(mem)...)
			defer in.Release()
			out, ids, err := conformArrow(mem, in, testNow, 0)
			if err == nil && out == nil {
				_, _, err = Conform(in, testNow) // the no-rows error is Conform's
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				if out != nil {
					out.Release()
				}
				t.Fatalf("got %v (%T), ids %v; want a ValidationError with %q", err, err, ids, tc.want)
			}
			if tc.same {
				want, werr := viaRecords(in, testNow)
				if want != nil {
					want.Release()
				}
				if werr == nil || werr.Error() != err.Error() {
					t.Errorf("Record path: %v; conform: %v", werr, err)
				}
			}
		})
	}
}

// BenchmarkConformArrow conforms 1000 rows of ~1 KB text given as id,
// rollout_id, sequence_order and content.
func BenchmarkConformArrow(b *testing.B) {
	const rows = 1000
	mem := memory.DefaultAllocator
	ib, rb := array.NewStringBuilder(mem), array.NewStringBuilder(mem)
	sb, cb := array.NewInt32Builder(mem), array.NewLargeStringBuilder(mem)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23)[:1000]
	for i := range rows {
		ib.Append(uuid.Must(uuid.NewV7()).String())
		rb.Append(fmt.Sprintf("rollout-%d", i/50))
		sb.Append(int32(i % 50))
		cb.Append(text)
	}
	in := newBatch(inCol{"id", ib.NewArray()}, inCol{"rollout_id", rb.NewArray()}, inCol{"sequence_order", sb.NewArray()}, inCol{"content", cb.NewArray()})
	defer in.Release()
	now := time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(rows * len(text)))
	for b.Loop() {
		out, _, err := Conform(in, now)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
}

// TestRegression_MalformedArrowIsBadInput: an IPC stream's buffers are the
// client's; offsets that run backwards must give a ValidationError (HTTP
// 400), not a panic in the handler.
func TestRegression_MalformedArrowIsBadInput(t *testing.T) {
	mk := func(offsets []int32, data string) arrow.Array {
		ob := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))
		d := array.NewData(arrow.BinaryTypes.String, len(offsets)-1, []*memory.Buffer{nil, ob, memory.NewBufferBytes([]byte(data))}, nil, 0, 0)
		defer d.Release()
		return array.MakeFromData(d)
	}
	// (Offsets past the data never get here: arrow-go refuses to build such
	// an array, and its IPC reader turns that into a read error.)
	tokens := func() arrow.Array {
		vals := array.NewInt32Builder(memory.DefaultAllocator)
		defer vals.Release()
		vals.AppendValues([]int32{1, 2, 3}, nil)
		v := vals.NewArray()
		defer v.Release()
		ob := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 3, 1}))
		d := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int32), 2, []*memory.Buffer{nil, ob}, []arrow.ArrayData{v.Data()}, 0, 0)
		defer d.Release()
		return array.MakeFromData(d)
	}
	for name, col := range map[string]arrow.Array{
		"offsets run backwards":        mk([]int32{0, 2, 1}, "ab"),
		"offsets run backwards, later": mk([]int32{0, 1, 2, 0, 2}, "ab"),
		"list offsets run backwards":   tokens(),
	} {
		t.Run(name, func(t *testing.T) {
			fname := "rollout_id"
			if col.DataType().ID() == arrow.LIST {
				fname = "input_tokens"
			}
			schema := arrow.NewSchema([]arrow.Field{{Name: fname, Type: col.DataType()}}, nil)
			rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
			defer rec.Release()
			out, _, err := Conform(rec, time.Now())
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), "invalid Arrow data") {
				t.Fatalf("got %v, want a ValidationError about invalid Arrow data", err)
			}
			if out != nil {
				out.Release()
			}
		})
	}
}
