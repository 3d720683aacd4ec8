package rollout

import (
	"slices"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/rollout/row"
)

// Schema and its columns are defined by the column table of package row.

// listColumns is what lists and record reads return (row.ListColumns).
var listColumns = row.ListColumns()

// genColumns is what the generation cache keeps of a generation:
// listColumns, then lc_seq (for the feed). Columns of listColumns are at
// the same positions.
var genColumns = append(slices.Clone(listColumns), ColSeq)

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
