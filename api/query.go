package api

import (
	"encoding/json"
	"fmt"
)

// ArrowStream is the media type of an Arrow IPC stream: the body of an
// Arrow append, and a query result when the client sends it in Accept.
const ArrowStream = "application/vnd.apache.arrow.stream"

// Headers of a query answered as an Arrow stream, which has no envelope
// for them.
const (
	HeaderRowCount    = "X-Row-Count"
	HeaderTruncated   = "X-Truncated"
	HeaderRowsScanned = "X-Rows-Scanned"
)

// QueryRequest is the body of POST /api/v1/experiments/{name}/query: one
// read-only SQL statement where the store is the table records and other
// stores are tables of their own names. Source is fragments (default),
// wal or all. MaxRows > 0 truncates a result larger than the server's row
// limit to that many rows instead of failing.
type QueryRequest struct {
	SQL     string `json:"sql"`
	Source  Source `json:"source,omitempty"`
	MaxRows int    `json:"max_rows,omitempty"`
	// Version reads the store (table records) at that base version alone,
	// as a checkout of it does, without changing what other readers see: a
	// number or a tag name.
	Version VersionRef `json:"version,omitempty"`
}

// VersionRef names a base version: a number (12, or "12") or a tag name.
type VersionRef string

// UnmarshalJSON takes a JSON number or string.
func (v *VersionRef) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*v = VersionRef(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("version must be a number or a tag name, got %s", b)
	}
	*v = VersionRef(s)
	return nil
}

// QueryColumn names a result column and its DuckDB type.
type QueryColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// QueryScan says what one scan of a store read for a query: the columns
// it needed (projection pushdown), the rows read, the filters applied in
// the scan and the rows they kept.
type QueryScan struct {
	Store    string   `json:"store"`
	Source   string   `json:"source"`
	Columns  []string `json:"columns"`
	Filters  []string `json:"filters"`
	Rows     int64    `json:"rows"`
	RowsKept int64    `json:"rows_kept"`
}

// QueryResponse is a query result as JSON. Rows hold JSON values: numbers
// (64-bit integers exactly, when decoded with json.Decoder.UseNumber),
// strings (timestamps in RFC 3339), booleans, null, lists and objects.
type QueryResponse struct {
	Columns     []QueryColumn `json:"columns"`
	Rows        [][]any       `json:"rows"`
	RowCount    int           `json:"row_count"`
	Truncated   bool          `json:"truncated"`
	RowsScanned int64         `json:"rows_scanned"`
	ElapsedMS   float64       `json:"elapsed_ms"`
	Scans       []QueryScan   `json:"scans"`
}
