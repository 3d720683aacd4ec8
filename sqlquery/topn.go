//go:build cgo

package sqlquery

import (
	"container/heap"
	"encoding/json"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// topN is a query's ORDER BY column [DESC] LIMIT n [OFFSET m] when the scan
// can bound it: a late scan then takes the other columns only for the rows
// that can still be among the first n+m, not for every row the WHERE keeps.
//
// The bound is the (n+m)-th best value of the sort column among rows that
// certainly pass the whole WHERE (every conjunct a hint, evaluated without
// its tolerance; see certain). At least n+m result rows sort at or before
// it, so a row whose value sorts strictly after it cannot be in the result;
// ties are kept for DuckDB's further sort keys. NULLs sort last (DuckDB's
// default) and NaN above every number, as DuckDB orders them.
//
// Only the plainest shape qualifies: the hints' shape (one store, no join,
// CTE or sample), a select list of bare, unaliased columns, no DISTINCT, GROUP BY,
// HAVING or QUALIFY, and constant LIMIT and OFFSET.
type topN struct {
	Column string
	Desc   bool
	N      int
}

// maxTopN is the largest n+m the scan bounds; beyond it the bound prunes
// little and costs a large heap.
const maxTopN = 100_000

type astTop struct {
	Statements []struct {
		Node struct {
			Modifiers []struct {
				Type   string `json:"type"`
				Orders []struct {
					Type       string `json:"type"`
					NullOrder  string `json:"null_order"`
					Expression *expr  `json:"expression"`
				} `json:"orders"`
				Limit  *expr `json:"limit"`
				Offset *expr `json:"offset"`
			} `json:"modifiers"`
			SelectList        []*expr           `json:"select_list"`
			GroupExpressions  []json.RawMessage `json:"group_expressions"`
			GroupSets         []json.RawMessage `json:"group_sets"`
			AggregateHandling string            `json:"aggregate_handling"`
			Having            json.RawMessage   `json:"having"`
			Qualify           json.RawMessage   `json:"qualify"`
			Where             *expr             `json:"where_clause"`
			FromTable         *struct {
				TableName string `json:"table_name"`
				Alias     string `json:"alias"`
			} `json:"from_table"`
		} `json:"node"`
	} `json:"statements"`
}

// topFromAST returns the bound of a statement whose WHERE gave hints (every
// conjunct of it, when there is one), or nil. table is the store's name as
// hintsFromAST checked it.
func topFromAST(raw []byte, hints int) *topN {
	var a astTop
	if json.Unmarshal(raw, &a) != nil || len(a.Statements) != 1 {
		return nil
	}
	n := a.Statements[0].Node
	if n.FromTable == nil || len(n.GroupExpressions) > 0 || len(n.GroupSets) > 0 || n.AggregateHandling != "STANDARD_HANDLING" ||
		!isNull(n.Having) || !isNull(n.Qualify) || len(n.Modifiers) != 2 ||
		n.Modifiers[0].Type != "ORDER_MODIFIER" || n.Modifiers[1].Type != "LIMIT_MODIFIER" {
		return nil
	}
	if n.Where != nil {
		conj := []*expr{n.Where}
		if n.Where.Class == "CONJUNCTION" && n.Where.Type == "CONJUNCTION_AND" {
			conj = n.Where.Children
		}
		if len(conj) != hints {
			return nil
		}
	}
	for _, e := range n.SelectList {
		// A bare column under its own name: an alias could rename another
		// column to the sort column's name, and * REPLACE rewrite it.
		if e == nil || e.Class != "COLUMN_REF" || e.Alias != "" {
			return nil
		}
	}
	ord := n.Modifiers[0].Orders
	if len(ord) == 0 || (ord[0].NullOrder != "ORDER_DEFAULT" && ord[0].NullOrder != "NULLS_LAST" && ord[0].NullOrder != "NULLS LAST") {
		return nil
	}
	col, ok := columnName(ord[0].Expression, n.FromTable.TableName, n.FromTable.Alias)
	if !ok {
		return nil
	}
	i := slices.IndexFunc(scanColumns, func(f arrow.Field) bool { return f.Name == col })
	switch scanColumns[i].Type.(type) {
	case *arrow.Float32Type, *arrow.Float64Type, *arrow.Int32Type, *arrow.Int64Type:
	default:
		return nil
	}
	limit, ok := intConst(n.Modifiers[1].Limit)
	if !ok {
		return nil
	}
	offset := int64(0)
	if o := n.Modifiers[1].Offset; o != nil {
		if offset, ok = intConst(o); !ok {
			return nil
		}
	}
	if limit+offset > maxTopN {
		return nil
	}
	var desc bool
	switch ord[0].Type {
	case "DESCENDING":
		desc = true
	case "ASCENDING", "ORDER_DEFAULT":
	default:
		return nil
	}
	return &topN{Column: col, Desc: desc, N: int(limit + offset)}
}

func intConst(e *expr) (int64, bool) {
	if e == nil || e.Class != "CONSTANT" || e.Value == nil || e.Value.IsNull {
		return 0, false
	}
	switch e.Value.Type.ID {
	case "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "UINTEGER", "UBIGINT", "USMALLINT", "UTINYINT", "HUGEINT":
	default:
		return 0, false
	}
	var v int64
	if json.Unmarshal(e.Value.Value, &v) != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// topBound tracks the best N certain values of one scan.
type topBound struct {
	t    *topN
	best keyHeap // the worst of the best N on top
}

// key orders a value so that greater is better: NaN above every number, as
// DuckDB sorts it.
func (b *topBound) key(v float64) float64 {
	if math.IsNaN(v) {
		v = math.Inf(1)
	}
	if !b.t.Desc {
		v = -v
	}
	return v
}

// prune returns the rows of sel (indices into rec, whose columns are cols)
// that can still be among the first N: it adds the rows that certainly
// pass every hint to the bound, then drops rows sorting after it.
func (b *topBound) prune(hs []hint, cols []string, rec arrow.RecordBatch, sel []int) []int {
	ci := slices.Index(cols, b.t.Column)
	if ci < 0 || b.t.N == 0 {
		if b.t.N == 0 {
			return sel[:0]
		}
		return sel
	}
	col := rec.Column(ci)
	value := numeric(col)
	if value == nil {
		return sel
	}
	sure := certain(hs, cols, rec, sel)
	for k, i := range sel {
		if !sure[k] || col.IsNull(i) {
			continue
		}
		v := b.key(value(i))
		if len(b.best) < b.t.N {
			heap.Push(&b.best, v)
		} else if v > b.best[0] {
			b.best[0] = v
			heap.Fix(&b.best, 0)
		}
	}
	if len(b.best) < b.t.N {
		return sel
	}
	bound := b.best[0]
	out := sel[:0]
	for _, i := range sel {
		if !col.IsNull(i) && b.key(value(i)) >= bound {
			out = append(out, i)
		}
	}
	return out
}

func numeric(arr arrow.Array) func(int) float64 {
	switch a := arr.(type) {
	case *array.Float32:
		return func(i int) float64 { return float64(a.Value(i)) }
	case *array.Float64:
		return a.Value
	case *array.Int32:
		return func(i int) float64 { return float64(a.Value(i)) }
	case *array.Int64:
		return func(i int) float64 { return float64(a.Value(i)) }
	}
	return nil
}

// certain reports, for each row of sel, whether it passes every hint with
// a margin: numbers beyond the hint's tolerance (never NaN), strings and
// IS NULL exactly. Such a row passes the WHERE whatever types DuckDB
// compares in.
func certain(hs []hint, cols []string, rec arrow.RecordBatch, sel []int) []bool {
	out := make([]bool, len(sel))
	for k := range out {
		out[k] = true
	}
	for _, h := range hs {
		ci := slices.Index(cols, h.Column)
		if ci < 0 {
			for k := range out {
				out[k] = false
			}
			return out
		}
		arr := rec.Column(ci)
		value := numeric(arr)
		for k, i := range sel {
			if !out[k] {
				continue
			}
			switch {
			case h.Op == opIsNull:
				out[k] = arr.IsNull(i)
			case arr.IsNull(i):
				out[k] = false
			case h.IsStr:
				out[k] = stringAt(arr, i) == h.Str
			case value == nil:
				out[k] = false
			default:
				v, tol := value(i), tolerance(h.Num)
				switch h.Op {
				case ">", ">=":
					out[k] = v >= h.Num+tol
				case "<", "<=":
					out[k] = v <= h.Num-tol
				default:
					out[k] = false
				}
			}
		}
	}
	return out
}

func stringAt(arr arrow.Array, i int) string {
	switch a := arr.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	}
	return "\x00not a string"
}

// keyHeap is a min-heap of keys.
type keyHeap []float64

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
