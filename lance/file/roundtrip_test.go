package file

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

var (
	structType = arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "v", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), Nullable: true},
	)
	roundTripTypes = []struct {
		name string
		dt   arrow.DataType
	}{
		{"bool", arrow.FixedWidthTypes.Boolean},
		{"int8", arrow.PrimitiveTypes.Int8},
		{"int16", arrow.PrimitiveTypes.Int16},
		{"int32", arrow.PrimitiveTypes.Int32},
		{"int64", arrow.PrimitiveTypes.Int64},
		{"uint8", arrow.PrimitiveTypes.Uint8},
		{"uint16", arrow.PrimitiveTypes.Uint16},
		{"uint32", arrow.PrimitiveTypes.Uint32},
		{"uint64", arrow.PrimitiveTypes.Uint64},
		{"float32", arrow.PrimitiveTypes.Float32},
		{"float64", arrow.PrimitiveTypes.Float64},
		{"date32", arrow.FixedWidthTypes.Date32},
		{"ts_s", &arrow.TimestampType{Unit: arrow.Second}},
		{"ts_ms", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}},
		{"ts_us_utc", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{"ts_ns", &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{"utf8", arrow.BinaryTypes.String},
		{"large_utf8", arrow.BinaryTypes.LargeString},
		{"binary", arrow.BinaryTypes.Binary},
		{"large_binary", arrow.BinaryTypes.LargeBinary},
		{"list_int32", arrow.ListOf(arrow.PrimitiveTypes.Int32)},
		{"list_float32", arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{"list_utf8", arrow.ListOf(arrow.BinaryTypes.String)},
		{"list_bool", arrow.ListOf(arrow.FixedWidthTypes.Boolean)},
		{"large_list_int64", arrow.LargeListOf(arrow.PrimitiveTypes.Int64)},
		{"large_list_large_utf8", arrow.LargeListOf(arrow.BinaryTypes.LargeString)},
		{"fsl_float32_4", arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
		{"fsl_int64_3", arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Int64)},
		{"fsl_uint8_5", arrow.FixedSizeListOf(5, arrow.PrimitiveTypes.Uint8)},
		{"fsl_bool_3", arrow.FixedSizeListOf(3, arrow.FixedWidthTypes.Boolean)},
		{"struct", structType},
		{"list_struct", arrow.ListOf(structType)},
		{"list_list_int32", arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int32))},
		{"list_fsl", arrow.ListOf(arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64))},
		{"dict_int8_utf8", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
		{"dict_uint16_utf8", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.BinaryTypes.String}},
		{"dict_int32_binary", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.Binary}},
	}
)

// TestRoundTripTypes writes every supported type with no nulls, some nulls
// and only nulls, in small and default pages, and reads it back whole and in
// row ranges.
func TestRoundTripTypes(t *testing.T) {
	for _, tc := range roundTripTypes {
		for _, nulls := range []struct {
			name string
			p    float64
		}{{"nonull", 0}, {"somenull", 0.2}, {"allnull", 1}} {
			for _, pageBytes := range []int{0, 256} {
				name := tc.name + "/" + nulls.name
				if pageBytes > 0 {
					name += "/smallpages"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					as := arrow.NewSchema([]arrow.Field{
						{Name: "id", Type: arrow.PrimitiveTypes.Int64},
						{Name: "x", Type: tc.dt, Nullable: true},
					}, nil)
					g := &gen{rng: rand.New(rand.NewPCG(1, uint64(len(name)))), nullP: nulls.p}
					var recs []arrow.RecordBatch
					for _, n := range []int{1, 700, 0, 1300} {
						var rec arrow.RecordBatch
						if nulls.p == 1 {
							ids := (&gen{rng: g.rng}).array(arrow.PrimitiveTypes.Int64, n)
							x := allNull(tc.dt, n)
							rec = array.NewRecordBatch(as, []arrow.Array{ids, x}, int64(n))
							ids.Release()
							x.Release()
						} else {
							rec = g.record(as, n)
						}
						recs = append(recs, rec)
					}
					b, info := writeFile(t, as, WriterOptions{PageBytes: pageBytes}, recs...)
					if info.Rows != 2001 {
						t.Fatalf("Info.Rows = %d", info.Rows)
					}
					r, _ := openBytes(t, b)
					if pages := len(r.top[1].col.pages); pageBytes > 0 && nulls.p < 1 && r.top[1].kind != kindStruct && pages < 2 {
						t.Fatalf("small pages: column has %d pages", pages)
					}
					want := structNoNulls(t, concatColumn(t, recs, 1))
					checkRanges(t, r, 1, want, [][2]int64{{0, 2001}, {0, 1}, {2000, 2001}, {1, 2}, {650, 1450}, {999, 1000}, {0, 0}, {2001, 2001}})
				})
			}
		}
	}
}

// checkRanges reads field id of r over each row range and compares it with
// the same rows of want.
func checkRanges(t testing.TB, r *Reader, id int32, want arrow.Array, ranges [][2]int64) {
	t.Helper()
	checkRangesVia(t, r, id, want, ranges)
	if r2 := withInto(r); r2 != nil {
		checkRangesVia(t, r2, id, want, ranges)
	}
}

func checkRangesVia(t testing.TB, r *Reader, id int32, want arrow.Array, ranges [][2]int64) {
	t.Helper()
	for _, rg := range ranges {
		rec, err := r.Read(context.Background(), []int32{id}, rg[0], rg[1])
		if err != nil {
			t.Fatalf("Read [%d, %d): %v", rg[0], rg[1], err)
		}
		if rec.NumRows() != rg[1]-rg[0] || rec.NumCols() != 1 {
			t.Fatalf("Read [%d, %d): %d rows, %d cols", rg[0], rg[1], rec.NumRows(), rec.NumCols())
		}
		w := array.NewSlice(want, rg[0], rg[1])
		assertEqualArrays(t, "rows "+rangeString(rg), w, rec.Column(0))
		if d, ok := rec.Column(0).(*array.Dictionary); ok {
			checkDictUnique(t, d)
			plain, err := r.ReadWith(context.Background(), []int32{id}, rg[0], rg[1], ReadOptions{PlainDictionaries: true})
			if err != nil {
				t.Fatalf("plain Read [%d, %d): %v", rg[0], rg[1], err)
			}
			assertEqualArrays(t, "plain rows "+rangeString(rg), dictDecoded(t, w), plain.Column(0))
			if !arrow.TypeEqual(plain.Schema().Field(0).Type, d.Dictionary().DataType()) {
				t.Fatalf("plain read schema %s", plain.Schema())
			}
			plain.Release()
		}
		if v, ok := rec.Column(0).(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				t.Fatalf("rows %s: invalid array: %v", rangeString(rg), err)
			}
		}
		w.Release()
		rec.Release()
	}
}

func rangeString(rg [2]int64) string {
	return "[" + strconv.FormatInt(rg[0], 10) + ", " + strconv.FormatInt(rg[1], 10) + ")"
}
