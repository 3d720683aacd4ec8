package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/objstore"
)

// The append paths' rules, defaults and conversions are package row's and
// tested there; these tests are what a Store adds: a refused append stores
// nothing, and a conformed batch goes through the WAL and back.

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

var (
	utf8T      = arrow.BinaryTypes.String
	largeUTF8T = arrow.BinaryTypes.LargeString
	int32T     = arrow.PrimitiveTypes.Int32
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

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
// as an Arrow batch, and neither path stores anything. (Every text
// column's UTF-8 rule: row's TestTextColumnsRefuseBadUTF8.)
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

func TestStoreAppendArrow(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "exp")
	mem := memory.DefaultAllocator
	b1 := newBatch(
		inCol{"id", js(mem, utf8T, `["a0","a1"]`)},
		inCol{"rollout_id", js(mem, utf8T, `["ra","ra"]`)},
		inCol{"content", js(mem, largeUTF8T, `["first",null]`)},
	)
	defer b1.Release()
	b2 := newBatch(
		inCol{"rollout_id", js(mem, largeUTF8T, `["rb","rb","rb"]`)},
		inCol{"id", js(mem, utf8T, `["b0",null,"b2"]`)},
		inCol{"sequence_order", js(mem, int32T, `[2,1,0]`)},
		inCol{ColPayload, js(mem, arrow.BinaryTypes.Binary, `[null,null,"`+b64("blob")+`"]`)},
	)
	defer b2.Release()
	empty := newBatch(inCol{"rollout_id", js(mem, utf8T, `[]`)})
	defer empty.Release()
	ids, err := s.AppendArrow(ctx, b1, empty, b2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 5 || ids[0] != "a0" || ids[1] != "a1" || ids[2] != "b0" || ids[4] != "b2" || ids[3] == "" {
		t.Fatalf("ids %v", ids)
	}

	// A bad batch stores nothing of the others; rows count across batches.
	bad := newBatch(inCol{"rollout_id", js(mem, utf8T, `["rc",""]`)})
	defer bad.Release()
	var ve *ValidationError
	if _, err := s.AppendArrow(ctx, b1, bad); !errors.As(err, &ve) || !strings.HasPrefix(err.Error(), "record 3: rollout_id is required") {
		t.Fatalf("bad second batch: %v", err)
	}
	if _, err := s.AppendArrow(ctx, empty); !errors.As(err, &ve) {
		t.Fatalf("no rows: %v", err)
	}
	if _, err := s.AppendArrow(ctx); !errors.As(err, &ve) {
		t.Fatalf("no batches: %v", err)
	}

	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := listIDs(t, s, ListOptions{Source: SourceAll})
	slices.Sort(got)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, appended %v", got, want)
	}
	r, err := s.Get(ctx, "a0")
	if err != nil || r.RolloutID != "ra" || r.ProblemID != "ra" || r.Role != "assistant" || r.ContentType != "text/plain" || r.CreatedAt == nil || *r.Content != "first" {
		t.Fatalf("a0: %+v %v", r, err)
	}
	r, err = s.Get(ctx, "b2")
	if err != nil || r.RolloutID != "rb" || r.SequenceOrder != 0 || *r.PayloadSize != 4 || *r.PayloadChecksum != sha("blob") {
		t.Fatalf("b2: %+v %v", r, err)
	}
	if data, _, err := s.Blob(ctx, "b2"); err != nil || string(data) != "blob" {
		t.Fatalf("blob %q %v", data, err)
	}
	if r, err := s.Get(ctx, ids[3]); err != nil || r.SequenceOrder != 1 {
		t.Fatalf("generated id %s: %+v %v", ids[3], r, err)
	}
}

// TestStoreAppendArrowReplay: conformed batches (shared, converted, sliced
// and null columns) survive the WAL's encoding: a crashed writer's rows are
// read back after replay.
func TestStoreAppendArrowReplay(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	s1 := mustStore(t, NewCatalog(root, ShardID("w"), Options{}), "crash")
	mem := memory.DefaultAllocator
	full := newBatch(
		inCol{"id", js(mem, largeUTF8T, `["x0","x1","x2","x3","x4","x5","x6","x7","x8","x9","x10"]`)},
		inCol{"rollout_id", js(mem, utf8T, `["r","r","r","r","r","r","r","r","r","r","r"]`)},
		inCol{"content", js(mem, utf8T, `["c0",null,"c2","c3",null,"c5","c6","c7","c8",null,"c10"]`)},
		inCol{"input_tokens", js(mem, arrow.ListOfNonNullable(int32T), `[[0],[1],[2],[3],[4],[5],[6],[7],[8],[9],[10]]`)},
	)
	defer full.Release()
	part := full.NewSlice(3, 11)
	defer part.Release()
	ids, err := s1.AppendArrow(ctx, part)
	if err != nil {
		t.Fatal(err)
	}
	crash(s1)

	s2 := mustStore(t, newCatalog(t, root, "w", Options{}), "crash")
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s2, ListOptions{Source: SourceWAL}); len(got) != len(ids) {
		t.Fatalf("after replay %v, appended %v", got, ids)
	}
	for i, id := range ids {
		r, err := s2.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		row := i + 3
		if id != fmt.Sprintf("x%d", row) {
			t.Fatalf("row %d: %+v", row, r)
		}
		if wantNull := row == 4 || row == 9; (r.Content == nil) != wantNull || (!wantNull && *r.Content != fmt.Sprintf("c%d", row)) {
			t.Fatalf("row %d content %v", row, r.Content)
		}
		if r.Dataset != nil || r.Reward != nil || r.Role != "assistant" || r.ProblemID != "r" {
			t.Fatalf("row %d defaults: %+v", row, r)
		}
	}
	// Lists are checked in the base table: reads of WAL rows decode lists
	// with recordsFromBatch, which ignores a slice's offset.
	if _, err := s2.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		r, err := s2.Get(ctx, id)
		if err != nil || !slices.Equal(r.InputTokens, []int32{int32(i + 3)}) {
			t.Fatalf("merged %s: %+v %v", id, r, err)
		}
	}
}
