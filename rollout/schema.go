package rollout

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/rollout/row"
)

// Schema and its columns are defined by the column table of package row.

// listColumns is what lists and record reads return (row.ListColumns).
var listColumns = row.ListColumns()

// genColumns is what the generation cache keeps of a small generation
// (see GenCache): listColumns, then lc_seq (for the feed).
var genColumns = append(slices.Clone(listColumns), ColSeq)

// slimGenColumns is what it keeps of a large one: genColumns without the
// wide columns (long text and lists: content, tokens, logprobs,
// metadata), which reads fetch from the generation's file for the rows
// they return (pendingBatch).
var slimGenColumns = slices.DeleteFunc(slices.Clone(genColumns), isWide)

// isWide reports whether a column of Schema is wide: long text or a list,
// the columns that hold a record's bulk. No filter, key or order is on one.
func isWide(name string) bool {
	i := Schema.FieldIndices(name)
	if len(i) != 1 {
		return false
	}
	switch Schema.Field(i[0]).Type.ID() {
	case arrow.LARGE_STRING, arrow.LIST, arrow.LARGE_LIST:
		return true
	}
	return false
}

// feedColumns is what the feed returns: listColumns, then lc_shard and
// lc_seq.
var feedColumns = append(slices.Clone(listColumns), ColShard, ColSeq)

// FilterColumns are the columns List accepts equality filters on.
var FilterColumns = api.FilterColumns

// baseColumns returns the columns of cols that the base table d has: a
// store written before a column was added to Schema gains it only at its
// next write (a merge or compaction commits the new columns; reads never
// commit), and until then its rows read that column as null.
func baseColumns(d *table.Dataset, cols []string) []string {
	out := make([]string, 0, len(cols))
	for _, c := range cols {
		if d.Schema().Field(c) != nil {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = append(out, ColID) // the row count only
	}
	return out
}
