package file

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestReadSchemaMemo: a Reader builds the schema of a field list once per
// option, and every batch's schema names its fields in the order asked
// with its columns' types: a dictionary field read as a dictionary, then
// plain, then as a dictionary again.
func TestReadSchemaMemo(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dictInt8}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	keys := make([]int, 10)
	for i := range keys {
		keys[i] = i % 3
	}
	v := dictArray(t, strs("a", "b", "c"), keys)
	nb := array.NewInt64Builder(mem)
	for i := range 10 {
		nb.Append(int64(i))
	}
	n := nb.NewArray()
	nb.Release()
	rec := array.NewRecordBatch(as, []arrow.Array{v, n}, 10)
	v.Release()
	n.Release()
	data, _ := writeFile(t, as, WriterOptions{}, rec)
	rec.Release()
	r, _ := openBytes(t, data)

	read := func(ids []int32, plain bool, wantNames string) *arrow.Schema {
		t.Helper()
		rec, err := r.ReadWith(context.Background(), ids, 0, 10, ReadOptions{PlainDictionaries: plain})
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		s := rec.Schema()
		var names []string
		for i := range s.NumFields() {
			names = append(names, s.Field(i).Name)
			if !arrow.TypeEqual(s.Field(i).Type, rec.Column(i).DataType()) {
				t.Fatalf("fields %v plain=%v: schema says %s for a %s column", ids, plain, s.Field(i).Type, rec.Column(i).DataType())
			}
		}
		if got := strings.Join(names, ","); got != wantNames {
			t.Fatalf("fields %v: schema names %s, want %s", ids, got, wantNames)
		}
		return s
	}
	dict := read([]int32{0, 1}, false, "v,n")
	if dict.Field(0).Type.ID() != arrow.DICTIONARY {
		t.Fatalf("a dictionary read gave %s", dict.Field(0).Type)
	}
	plain := read([]int32{0, 1}, true, "v,n")
	if plain.Field(0).Type.ID() != arrow.STRING {
		t.Fatalf("a plain read gave %s", plain.Field(0).Type)
	}
	if read([]int32{0, 1}, false, "v,n") != dict || read([]int32{0, 1}, true, "v,n") != plain {
		t.Fatal("the same fields and options built a second schema")
	}
	read([]int32{1, 0}, true, "n,v")
	read([]int32{1}, false, "n")
}
