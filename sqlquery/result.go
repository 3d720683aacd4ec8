//go:build cgo

package sqlquery

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// JSONRows returns the rows as values encoding/json writes faithfully:
// NaN and infinities become null (JSON has neither), times RFC 3339 text,
// HUGEINT an integer when it fits, DECIMAL a float.
func (r *Result) JSONRows() [][]any {
	out := make([][]any, len(r.Rows))
	for i, row := range r.Rows {
		o := make([]any, len(row))
		for j, v := range row {
			o[j] = jsonValue(v)
		}
		out[i] = o
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		return x.String()
	case duckdb.Decimal:
		f := x.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case duckdb.UUID:
		return x.String()
	case duckdb.Interval:
		return fmt.Sprintf("%d months %d days %d us", x.Months, x.Days, x.Micros)
	case []any:
		o := make([]any, len(x))
		for i, e := range x {
			o[i] = jsonValue(e)
		}
		return o
	case map[string]any:
		o := make(map[string]any, len(x))
		for k, e := range x {
			o[k] = jsonValue(e)
		}
		return o
	case duckdb.Map:
		o := make(map[string]any, len(x))
		for k, e := range x {
			o[fmt.Sprint(jsonValue(k))] = jsonValue(e)
		}
		return o
	}
	return v
}

// arrowType maps a DuckDB result type to the Arrow type of the IPC result.
// Nested and rare types travel as their JSON text.
func arrowType(duck string) arrow.DataType {
	switch strings.ToUpper(duck) {
	case "BOOLEAN":
		return arrow.FixedWidthTypes.Boolean
	case "TINYINT":
		return arrow.PrimitiveTypes.Int8
	case "SMALLINT":
		return arrow.PrimitiveTypes.Int16
	case "INTEGER":
		return arrow.PrimitiveTypes.Int32
	case "BIGINT", "HUGEINT":
		return arrow.PrimitiveTypes.Int64
	case "UTINYINT":
		return arrow.PrimitiveTypes.Uint8
	case "USMALLINT":
		return arrow.PrimitiveTypes.Uint16
	case "UINTEGER":
		return arrow.PrimitiveTypes.Uint32
	case "UBIGINT":
		return arrow.PrimitiveTypes.Uint64
	case "FLOAT":
		return arrow.PrimitiveTypes.Float32
	case "DOUBLE":
		return arrow.PrimitiveTypes.Float64
	case "VARCHAR":
		return arrow.BinaryTypes.String
	case "BLOB":
		return arrow.BinaryTypes.Binary
	case "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	case "TIMESTAMP", "DATE":
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	}
	if strings.HasPrefix(strings.ToUpper(duck), "DECIMAL") {
		return arrow.PrimitiveTypes.Float64
	}
	return arrow.BinaryTypes.String
}

// Arrow returns the result as one Arrow record.
func (r *Result) Arrow() (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(r.Columns))
	for i, c := range r.Columns {
		fields[i] = arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: true}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, row := range r.Rows {
		for j, v := range row {
			if err := appendValue(b.Field(j), v); err != nil {
				return nil, fmt.Errorf("sqlquery: column %s: %w", r.Columns[j].Name, err)
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// WriteArrow writes the result as an Arrow IPC stream.
func (r *Result) WriteArrow(w io.Writer) error {
	rec, err := r.Arrow()
	if err != nil {
		return err
	}
	defer rec.Release()
	iw := ipc.NewWriter(w, ipc.WithSchema(rec.Schema()))
	if err := iw.Write(rec); err != nil {
		return err
	}
	return iw.Close()
}

func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	toInt := func() (int64, bool) {
		switch x := v.(type) {
		case int8:
			return int64(x), true
		case int16:
			return int64(x), true
		case int32:
			return int64(x), true
		case int64:
			return x, true
		case uint8:
			return int64(x), true
		case uint16:
			return int64(x), true
		case uint32:
			return int64(x), true
		case uint64:
			return int64(x), true
		case *big.Int:
			if x.IsInt64() {
				return x.Int64(), true
			}
		}
		return 0, false
	}
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		x, ok := v.(bool)
		if !ok {
			return fmt.Errorf("got %T for BOOLEAN", v)
		}
		bb.Append(x)
	case *array.Int8Builder, *array.Int16Builder, *array.Int32Builder, *array.Int64Builder,
		*array.Uint8Builder, *array.Uint16Builder, *array.Uint32Builder, *array.Uint64Builder:
		n, ok := toInt()
		if !ok {
			b.AppendNull() // a HUGEINT beyond int64
			return nil
		}
		switch ib := b.(type) {
		case *array.Int8Builder:
			ib.Append(int8(n))
		case *array.Int16Builder:
			ib.Append(int16(n))
		case *array.Int32Builder:
			ib.Append(int32(n))
		case *array.Int64Builder:
			ib.Append(n)
		case *array.Uint8Builder:
			ib.Append(uint8(n))
		case *array.Uint16Builder:
			ib.Append(uint16(n))
		case *array.Uint32Builder:
			ib.Append(uint32(n))
		case *array.Uint64Builder:
			ib.Append(uint64(n))
		}
	case *array.Float32Builder:
		x, ok := v.(float32)
		if !ok {
			return fmt.Errorf("got %T for FLOAT", v)
		}
		bb.Append(x)
	case *array.Float64Builder:
		switch x := v.(type) {
		case float64:
			bb.Append(x)
		case duckdb.Decimal:
			bb.Append(x.Float64())
		default:
			return fmt.Errorf("got %T for DOUBLE", v)
		}
	case *array.BinaryBuilder:
		x, ok := v.([]byte)
		if !ok {
			return fmt.Errorf("got %T for BLOB", v)
		}
		bb.Append(x)
	case *array.TimestampBuilder:
		x, ok := v.(time.Time)
		if !ok {
			return fmt.Errorf("got %T for TIMESTAMP", v)
		}
		bb.Append(arrow.Timestamp(x.UnixMicro()))
	case *array.StringBuilder:
		if s, ok := v.(string); ok {
			bb.Append(s)
			return nil
		}
		j, err := json.Marshal(jsonValue(v))
		if err != nil {
			return err
		}
		bb.Append(string(j))
	default:
		return fmt.Errorf("no builder for %T", b)
	}
	return nil
}
