package api

import "strings"

// Source selects which tier a record listing reads.
type Source string

const (
	// SourceFragments reads the merged base table only: fast, may lag the
	// most recent un-merged writes.
	SourceFragments Source = "fragments"
	// SourceWAL reads only sealed generations not yet merged.
	SourceWAL Source = "wal"
	// SourceAll reads both, one row per id, the newest write winning.
	SourceAll Source = "all"
)

// FilterColumns are the columns a listing accepts equality filters on,
// as query parameters of their own or in one filters={...} JSON object.
var FilterColumns = []string{"id", "rollout_id", "problem_id", "dataset", "role", "content_type", "policy_version", "artifact_type", "include_in_training"}

// AppendRequest is the JSON body of POST .../records (and the "metadata"
// part of a multipart append).
type AppendRequest struct {
	Records []Record `json:"records"`
}

// AppendResponse answers an append. Version is the base table's version as
// the worker last saw it: appends go to the WAL and do not advance it (the
// reference sends the same). Flushed says the rows were sealed before the
// answer, so they are readable now.
type AppendResponse struct {
	Version uint64   `json:"version"`
	IDs     []string `json:"ids"`
	Count   int      `json:"count"`
	Flushed bool     `json:"flushed"`
}

// ListResponse is one page of a record listing. NextCursor, when not
// empty, fetches the page after this one: following cursors to the end
// returns every row that existed when the listing began exactly once,
// whatever merges and compactions run in between. Offsets are for page
// numbers and are approximate while merges run.
type ListResponse struct {
	Records    []Record `json:"records"`
	HasMore    bool     `json:"has_more"`
	Limit      int      `json:"limit"`
	Offset     int      `json:"offset"`
	Source     Source   `json:"source"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// GetRecordResponse answers GET .../records/{id}: the record, or null when
// no record has that id.
type GetRecordResponse struct {
	Record *Record `json:"record"`
}

// TrajectoryResponse is a rollout's records in (sequence_order, id) order.
type TrajectoryResponse struct {
	RolloutID string   `json:"rollout_id"`
	Records   []Record `json:"records"`
	Count     int      `json:"count"`
}

// FlushResponse answers POST .../flush.
type FlushResponse struct {
	Flushed bool `json:"flushed"`
}

// WantsFlush reports whether a raw query string opts in to a flush before
// the answer: flush=true in any case, flush=1, or a bare flush. Any other
// value (flush=false, a typo) leaves the append asynchronous, so a mistake
// cannot make every append pay for a seal.
func WantsFlush(rawQuery string) bool {
	for _, p := range strings.Split(rawQuery, "&") {
		k, v, hasValue := strings.Cut(p, "=")
		if k != "flush" {
			continue
		}
		if !hasValue || v == "1" || strings.EqualFold(v, "true") {
			return true
		}
	}
	return false
}
