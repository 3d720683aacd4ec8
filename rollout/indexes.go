package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
)

// DefaultIndexColumns are the columns a store keeps BTree indexes on: the
// keys reads name (get and blob by id, trajectory by rollout_id, filters by
// problem_id) and the merge's superseded-row check (id).
var DefaultIndexColumns = []string{ColID, ColRolloutID, ColProblemID}

// IndexColumnsEnv overrides the indexed columns of a process: a comma
// separated list of string columns, or "none" (read by internal/config
// into Options.IndexColumns).
const IndexColumnsEnv = "LC_INDEX_COLUMNS"

// ParseIndexColumns parses an IndexColumnsEnv value: "" means the
// defaults, "none" no indexes. Every column must be a string column of the
// rollout schema.
func ParseIndexColumns(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "":
		return DefaultIndexColumns, nil
	case "none":
		return []string{}, nil
	}
	var out []string
	for _, c := range strings.Split(v, ",") {
		c = strings.TrimSpace(c)
		f, _ := Schema.FieldsByName(c)
		if len(f) == 0 || f[0].Type.ID() != arrow.STRING {
			return nil, fmt.Errorf("%s: %q is not a string column of the rollout schema", IndexColumnsEnv, c)
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *Store) indexColumns() []string {
	if s.opts.IndexColumns == nil {
		return DefaultIndexColumns
	}
	return s.opts.IndexColumns
}

// finder is the index lookup reads and merges pass to table scans; nil
// when the store keeps no indexes (scans then read every fragment).
func (s *Store) finder() table.RowFinder {
	if len(s.indexColumns()) == 0 {
		return nil
	}
	return s.opts.Indexes
}

// indexBatchSize is the rows per index page of the indexes a store builds
// (0: index.DefaultBatchSize); tests lower it to get many pages.
var indexBatchSize = 0

// IndexResult says what an index pass did, per column.
type IndexResult struct {
	Columns  []*index.Result `json:"columns"`
	Duration time.Duration   `json:"duration_ns"`
}

// Index brings every indexed column's BTree index up to date with the base
// table as one segment: it builds missing indexes, merges the fragments an
// index does not cover yet (after merges and compaction) and consolidates
// delta segments. It is the scheduler's index task; merges and compaction
// call it too. Readers stay correct at every step: a fragment outside an
// index's bitmap is scanned.
func (s *Store) Index(ctx context.Context) (*IndexResult, error) {
	return s.index(ctx, false)
}

// index updates every indexed column; delta adds a segment over the new
// fragments instead of rewriting the index (cost O(new rows)); at
// IndexMaxSegments segments it folds all but the largest into the new one.
func (s *Store) index(ctx context.Context, delta bool) (*IndexResult, error) {
	defer s.noteCommit() // ends snapshot reuse (snapshot.go)
	start := time.Now()
	ds, err := table.Open(ctx, s.root)
	if err != nil {
		return nil, err
	}
	// The build reads this version's fragments: keep them from cleanup.
	defer s.hold(ds.Version())()
	var cols []string
	for _, col := range s.indexColumns() {
		if ds.Schema().Field(col) != nil { // a store created before the column existed has none
			cols = append(cols, col)
		}
	}
	// One commit for every column's new index.
	rs, err := index.UpdateColumns(ctx, s.root, cols, index.BuildOptions{Delta: delta, MaxSegments: s.opts.IndexMaxSegments, TempDir: s.opts.IndexTempDir, BatchSize: indexBatchSize, KeyColumns: []string{ColID}, Cache: s.opts.IndexCache})
	if err != nil {
		return nil, fmt.Errorf("rollout: index %v: %w", cols, err)
	}
	return &IndexResult{Columns: rs, Duration: time.Since(start)}, nil
}

// indexAfter keeps the indexes up with a merge or a compaction. The data
// commit is already durable: an index left behind by an error only costs
// speed (uncovered fragments are scanned) and the next pass catches up.
func (s *Store) indexAfter(ctx context.Context, what string, delta bool) {
	if len(s.indexColumns()) == 0 {
		return
	}
	res, err := s.index(ctx, delta)
	if err != nil {
		s.opts.Logger.Warn("rollout: index maintenance failed; uncovered fragments are scanned until the next pass", "store", s.name, "after", what, "err", err)
		return
	}
	s.opts.Logger.Debug("rollout: indexes updated", "store", s.name, "after", what, "took", res.Duration)
}
