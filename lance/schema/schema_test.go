package schema

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestDictionaryAndNaiveTimestampTypes: the column types of tables the
// reference system creates (a dictionary-encoded string, a timestamp
// without a time zone) map to Lance's logical type strings and back, and a
// new dictionary field is written as Lance writes one (encoding 3 with an
// empty dictionary message, field 8).
func TestDictionaryAndNaiveTimestampTypes(t *testing.T) {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	naive := &arrow.TimestampType{Unit: arrow.Microsecond}
	as := arrow.NewSchema([]arrow.Field{
		{Name: "role", Type: dict},
		{Name: "created_at", Type: naive},
		{Name: "bad", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Float64}, Nullable: true},
	}, nil)
	if _, err := FromArrow(as, 0); err == nil {
		t.Fatal("a dictionary of float64 was accepted")
	}
	as = arrow.NewSchema(as.Fields()[:2], nil)
	s, err := FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Field("role").LogicalType; got != "dict:string:int8:false" {
		t.Errorf("role logical type %q", got)
	}
	if got := s.Field("created_at").LogicalType; got != "timestamp:us:-" {
		t.Errorf("created_at logical type %q", got)
	}
	p := s.Proto()
	if p[0].GetEncoding() != 3 || string(p[0].ProtoReflect().GetUnknown()) != "\x42\x00" {
		t.Errorf("role field: encoding %d, unknown fields %x", p[0].GetEncoding(), p[0].ProtoReflect().GetUnknown())
	}
	back, err := FromProto(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !arrow.TypeEqual(back.Field("role").Type, dict) || !arrow.TypeEqual(back.Field("created_at").Type, naive) {
		t.Errorf("read back as %s and %s", back.Field("role").Type, back.Field("created_at").Type)
	}
	if _, err := FromProto(p[:1], nil); err != nil {
		t.Fatal(err)
	}
	p[0].LogicalType = "dict:string:double:false"
	if _, err := FromProto(p[:1], nil); err == nil {
		t.Error("dictionary with float keys was accepted")
	}
}

// TestEvolveAcceptsCompatibleVariants: a table whose role is a dictionary
// of strings and whose created_at has no time zone accepts the plain
// string / UTC schema: Evolve keeps the table's types and adds only the
// missing column; an incompatible type is still refused.
func TestEvolveAcceptsCompatibleVariants(t *testing.T) {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	table, err := FromArrow(arrow.NewSchema([]arrow.Field{
		{Name: "role", Type: dict},
		{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
	}, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := arrow.NewSchema([]arrow.Field{
		{Name: "role", Type: arrow.BinaryTypes.String},
		{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	out, changed, err := table.Evolve(ours)
	if err != nil || !changed {
		t.Fatalf("Evolve: changed %v, %v", changed, err)
	}
	if out.Field("role").LogicalType != "dict:string:int8:false" || out.Field("created_at").LogicalType != "timestamp:us:-" || out.Field("extra") == nil || out.Field("extra").ID != 2 {
		t.Fatalf("evolved schema: %s", out.Arrow())
	}
	if Compatible(dict, arrow.BinaryTypes.LargeString) {
		t.Error("large_utf8 accepted for dictionary<int8, utf8>")
	}
	if _, _, err := table.Evolve(arrow.NewSchema([]arrow.Field{{Name: "role", Type: arrow.PrimitiveTypes.Int32}}, nil)); err == nil {
		t.Error("int32 role accepted")
	}
	if _, _, err := table.Evolve(arrow.NewSchema([]arrow.Field{{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}}}, nil)); err == nil {
		t.Error("a timestamp of another unit accepted")
	}
	if !Compatible(arrow.BinaryTypes.String, dict) {
		t.Error("utf8 table column does not accept dictionary<int8, utf8>")
	}
}
