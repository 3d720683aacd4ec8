//go:build cgo

package sqlquery

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// checkGenerated refuses, before it runs, a statement whose plan has a
// source other than a store scan (range, generate_series, unnest of a
// literal, ...) that DuckDB expects to produce more rows than
// max_rows_scanned. Such rows are made by the engine, not read through a
// scan, so no scan counts them: SELECT count(*) FROM range(100000000000)
// ran on every engine thread until the time limit (23 s of CPU) before.
// DuckDB knows these sources' sizes exactly from their arguments, so the
// check is the plan's estimate, at planning cost. A plan it cannot read
// passes: the time and memory limits still bound the statement.
func checkGenerated(ctx context.Context, c *duckdb.Conn, q *query, text string) error {
	if inner, ok := stripExplain(text); ok {
		text = inner
	}
	// EXPLAIN binds the store scans again; the hints hold for a store
	// bound once by the statement itself (start), so the count is restored.
	q.mu.Lock()
	binds := maps.Clone(q.binds)
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.binds = binds
		q.mu.Unlock()
	}()
	rows, err := all(ctx, c, "EXPLAIN (FORMAT json) "+text)
	if err != nil || len(rows) == 0 || len(rows[0]) < 2 {
		return nil
	}
	plan, _ := rows[0][1].(string)
	var nodes []planNode
	if json.Unmarshal([]byte(plan), &nodes) != nil {
		return nil
	}
	if fn, n := largestGenerated(nodes); n > q.limits.MaxRowsScanned {
		return q.limits.exceeded("max_rows_scanned", fmt.Sprint(q.limits.MaxRowsScanned),
			fmt.Sprintf("%s would produce %d rows, and rows a query generates count as scanned; generate fewer", strings.ToLower(fn), n))
	}
	return nil
}

// planNode is one operator of DuckDB's JSON plan.
type planNode struct {
	Name      string         `json:"name"`
	Children  []planNode     `json:"children"`
	ExtraInfo map[string]any `json:"extra_info"`
}

// largestGenerated returns the leaf operator, other than a store scan, with
// the largest estimated cardinality, and that estimate.
func largestGenerated(nodes []planNode) (string, int64) {
	var name string
	var most int64
	var walk func(n planNode)
	walk = func(n planNode) {
		for _, ch := range n.Children {
			walk(ch)
		}
		if len(n.Children) > 0 {
			return
		}
		fn, _ := n.ExtraInfo["Function"].(string)
		if fn == "" {
			fn = n.Name
		}
		if strings.EqualFold(fn, scanFunc) || strings.EqualFold(fn, baseFunc) || strings.EqualFold(n.Name, "SEQ_SCAN") {
			return // a store scan (counted as it runs) or a temporary table of the charts
		}
		est, _ := n.ExtraInfo["Estimated Cardinality"].(string)
		v, err := strconv.ParseInt(strings.TrimLeft(est, "~"), 10, 64)
		if err == nil && v > most {
			name, most = fn, v
		}
	}
	for _, n := range nodes {
		walk(n)
	}
	return name, most
}
