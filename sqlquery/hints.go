//go:build cgo

package sqlquery

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// A hint is one conjunct of a query's WHERE, column op constant, that the
// scan applies to each batch before copying it into DuckDB (DuckDB's C API
// gives table functions no filter pushdown). Hints are conservative: a hint
// drops only rows the WHERE certainly drops, and DuckDB still evaluates the
// whole WHERE, so a result never depends on them; they only save copying
// rows DuckDB would discard.
//
// They come from DuckDB's own parse tree (json_serialize_sql), and only
// from the simplest shape: one SELECT of one store (no join, set operation,
// CTE or sample), top-level AND conjuncts comparing a scalar column to a
// literal. Numbers compare with a small tolerance widening the kept range
// (the engine may compare in FLOAT where the hint compares in float64);
// strings only for equality (byte-wise, as DuckDB's default collation).
type hint struct {
	Column string
	Op     string // "=", ">", ">=", "<", "<=", or "IS NULL"
	Num    float64
	Str    string
	IsStr  bool
}

func (h hint) String() string {
	if h.Op == opIsNull {
		return h.Column + " IS NULL"
	}
	if h.IsStr {
		return fmt.Sprintf("%s %s %q", h.Column, h.Op, h.Str)
	}
	return fmt.Sprintf("%s %s %v", h.Column, h.Op, h.Num)
}

// queryHints returns the scan hints of text, by table name (as the
// replacement scan sees it), or nil, and its top-N bound, or nil. Any
// parse surprise means neither.
func queryHints(ctx context.Context, c *duckdb.Conn, text string) (string, []hint, *topN) {
	rows, err := c.QueryContext(ctx, "SELECT json_serialize_sql(CAST($1 AS VARCHAR))", []driver.NamedValue{{Ordinal: 1, Value: text}})
	if err != nil {
		return "", nil, nil
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil && !errors.Is(err, io.EOF) {
		return "", nil, nil
	}
	var raw []byte
	switch x := v[0].(type) {
	case string:
		raw = []byte(x)
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "", nil, nil
		}
		raw = b
	}
	table, hs := hintsFromAST(raw)
	if table == "" {
		return "", nil, nil
	}
	top := topFromAST(raw, len(hs))
	if len(hs) == 0 && top == nil {
		return "", nil, nil
	}
	return table, hs, top
}

type astNode struct {
	Error      bool `json:"error"`
	Statements []struct {
		Node struct {
			Type   string `json:"type"`
			CTEMap struct {
				Map []json.RawMessage `json:"map"`
			} `json:"cte_map"`
			FromTable *struct {
				Type      string          `json:"type"`
				TableName string          `json:"table_name"`
				Schema    string          `json:"schema_name"`
				Catalog   string          `json:"catalog_name"`
				Alias     string          `json:"alias"`
				Sample    json.RawMessage `json:"sample"`
				AtClause  json.RawMessage `json:"at_clause"`
			} `json:"from_table"`
			Sample json.RawMessage `json:"sample"`
			Where  *expr           `json:"where_clause"`
		} `json:"node"`
	} `json:"statements"`
}

type expr struct {
	Alias       string   `json:"alias"`
	Class       string   `json:"class"`
	Type        string   `json:"type"`
	Children    []*expr  `json:"children"`
	Left        *expr    `json:"left"`
	Right       *expr    `json:"right"`
	ColumnNames []string `json:"column_names"`
	Value       *struct {
		IsNull bool `json:"is_null"`
		Type   struct {
			ID       string `json:"id"`
			TypeInfo *struct {
				Scale int `json:"scale"`
			} `json:"type_info"`
		} `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"value"`
}

func isNull(m json.RawMessage) bool {
	s := strings.TrimSpace(string(m))
	return s == "" || s == "null"
}

func hintsFromAST(raw []byte) (string, []hint) {
	var a astNode
	if json.Unmarshal(raw, &a) != nil || a.Error || len(a.Statements) != 1 {
		return "", nil
	}
	n := a.Statements[0].Node
	ft := n.FromTable
	if n.Type != "SELECT_NODE" || len(n.CTEMap.Map) > 0 || ft == nil || ft.Type != "BASE_TABLE" ||
		ft.Schema != "" || ft.Catalog != "" || !isNull(ft.Sample) || !isNull(ft.AtClause) || !isNull(n.Sample) {
		return "", nil
	}
	if n.Where == nil {
		return ft.TableName, nil
	}
	var conj []*expr
	if n.Where.Class == "CONJUNCTION" && n.Where.Type == "CONJUNCTION_AND" {
		conj = n.Where.Children
	} else {
		conj = []*expr{n.Where}
	}
	var out []hint
	for _, e := range conj {
		if h, ok := comparison(e, ft.TableName, ft.Alias); ok {
			out = append(out, h)
		}
	}
	return ft.TableName, out
}

// opIsNull is the operator of a hint column IS NULL.
const opIsNull = "IS NULL"

var flipped = map[string]string{"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}

var compareOps = map[string]string{
	"COMPARE_EQUAL": "=", "COMPARE_GREATERTHAN": ">", "COMPARE_GREATERTHANOREQUALTO": ">=",
	"COMPARE_LESSTHAN": "<", "COMPARE_LESSTHANOREQUALTO": "<=",
}

func comparison(e *expr, table, alias string) (hint, bool) {
	if e == nil {
		return hint{}, false
	}
	if e.Class == "OPERATOR" && e.Type == "OPERATOR_IS_NULL" && len(e.Children) == 1 {
		name, ok := columnName(e.Children[0], table, alias)
		if !ok {
			return hint{}, false
		}
		return hint{Column: name, Op: opIsNull}, true
	}
	op, ok := compareOps[e.Type]
	if e.Class != "COMPARISON" || !ok || e.Left == nil || e.Right == nil {
		return hint{}, false
	}
	col, lit := e.Left, e.Right
	if col.Class == "CONSTANT" && lit.Class == "COLUMN_REF" {
		col, lit, op = lit, col, flipped[op]
	}
	if col.Class != "COLUMN_REF" || lit.Class != "CONSTANT" || lit.Value == nil || lit.Value.IsNull {
		return hint{}, false
	}
	name, ok := columnName(col, table, alias)
	if !ok {
		return hint{}, false
	}
	i := slices.IndexFunc(scanColumns, func(f arrow.Field) bool { return f.Name == name })
	h := hint{Column: name, Op: op}
	switch scanColumns[i].Type.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		var s string
		if op != "=" || lit.Value.Type.ID != "VARCHAR" || json.Unmarshal(lit.Value.Value, &s) != nil {
			return hint{}, false
		}
		h.Str, h.IsStr = s, true
	case *arrow.Float32Type, *arrow.Float64Type, *arrow.Int32Type, *arrow.Int64Type:
		if op == "=" {
			return hint{}, false
		}
		var f float64
		switch lit.Value.Type.ID {
		case "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT":
			if json.Unmarshal(lit.Value.Value, &f) != nil {
				return hint{}, false
			}
		case "DECIMAL":
			var unscaled float64
			if lit.Value.Type.TypeInfo == nil || json.Unmarshal(lit.Value.Value, &unscaled) != nil {
				return hint{}, false
			}
			f = unscaled / math.Pow10(lit.Value.Type.TypeInfo.Scale)
		default:
			return hint{}, false
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return hint{}, false
		}
		h.Num = f
	default:
		return hint{}, false
	}
	return h, true
}

// columnName is the scan column a COLUMN_REF names (bare, or qualified by
// the table's name or alias).
func columnName(col *expr, table, alias string) (string, bool) {
	if col == nil || col.Class != "COLUMN_REF" {
		return "", false
	}
	var name string
	switch len(col.ColumnNames) {
	case 1:
		name = col.ColumnNames[0]
	case 2:
		q := col.ColumnNames[0]
		if !strings.EqualFold(q, table) && (alias == "" || !strings.EqualFold(q, alias)) {
			return "", false
		}
		name = col.ColumnNames[1]
	default:
		return "", false
	}
	name = strings.ToLower(name)
	if !slices.ContainsFunc(scanColumns, func(f arrow.Field) bool { return f.Name == name }) {
		return "", false
	}
	return name, true
}

// tolerance widens numeric hints: the engine may compare a FLOAT column
// with the literal rounded to float32.
func tolerance(c float64) float64 { return 1e-6 * max(1, math.Abs(c)) }

// keptRows is selection as the row indices a late scan's Keep returns
// (every row when the hints keep all).
func keptRows(hs []hint, cols []string, b arrow.RecordBatch) []int {
	sel := selection(hs, cols, b)
	if sel == nil {
		out := make([]int, b.NumRows())
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, len(sel))
	for k, i := range sel {
		out[k] = int(i)
	}
	return out
}

// selection returns the rows of b every hint keeps (nil: all of them).
// cols are b's column names. A hint on a column b lacks is ignored.
func selection(hs []hint, cols []string, b arrow.RecordBatch) []int32 {
	n := int(b.NumRows())
	var keep []bool
	for _, h := range hs {
		ci := slices.Index(cols, h.Column)
		if ci < 0 {
			continue
		}
		if keep == nil {
			keep = make([]bool, n)
			for i := range keep {
				keep[i] = true
			}
		}
		applyHint(h, b.Column(ci), keep)
	}
	if keep == nil {
		return nil
	}
	sel := make([]int32, 0, n/4)
	for i, k := range keep {
		if k {
			sel = append(sel, int32(i))
		}
	}
	return sel
}

func applyHint(h hint, arr arrow.Array, keep []bool) {
	if h.Op == opIsNull {
		for i := range keep {
			keep[i] = keep[i] && arr.IsNull(i)
		}
		return
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	switch h.Op {
	case ">", ">=":
		lo = h.Num - tolerance(h.Num)
	case "<", "<=":
		hi = h.Num + tolerance(h.Num)
	}
	switch a := arr.(type) {
	case *array.Float32:
		keepRange(a.Float32Values(), a, keep, lo, hi)
	case *array.Float64:
		keepRange(a.Float64Values(), a, keep, lo, hi)
	case *array.Int32:
		keepRange(a.Int32Values(), a, keep, lo, hi)
	case *array.Int64:
		keepRange(a.Int64Values(), a, keep, lo, hi)
	case *array.String:
		for i := range keep {
			keep[i] = keep[i] && !a.IsNull(i) && a.Value(i) == h.Str
		}
	case *array.LargeString:
		for i := range keep {
			keep[i] = keep[i] && !a.IsNull(i) && a.Value(i) == h.Str
		}
	}
}

// keepRange keeps the rows of vals within [lo, hi]; NaN, which sorts above
// every number in DuckDB, is kept; NULL is not.
func keepRange[T float32 | float64 | int32 | int64](vals []T, arr arrow.Array, keep []bool, lo, hi float64) {
	nulls := arr.NullN() > 0
	for i, v := range vals {
		if !keep[i] {
			continue
		}
		if nulls && arr.IsNull(i) {
			keep[i] = false
			continue
		}
		f := float64(v)
		keep[i] = f != f || (f >= lo && f <= hi)
	}
}
