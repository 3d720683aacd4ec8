package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/rollout"
)

// Table is one store as the engine reads it.
type Table interface {
	Scan(ctx context.Context, o rollout.ScanOptions, fn func(arrow.RecordBatch) error) error
}

// Opener returns the store of a name; an error wrapping rollout.ErrNotFound
// when there is none.
type Opener func(ctx context.Context, name string) (Table, error)

// FromCatalog opens stores of a rollout catalog.
func FromCatalog(c *rollout.Catalog) Opener {
	return func(ctx context.Context, name string) (Table, error) {
		s, err := c.Open(ctx, name)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Limits bound one query. A zero field takes the default.
type Limits struct {
	MaxRowsScanned  int64         // rows read from stores, all scans of the query together
	MaxRowsReturned int           // result rows
	MaxTime         time.Duration // wall time, planning included
	MaxMemoryMB     int           // DuckDB memory_limit
	Threads         int           // DuckDB threads
	// Settings names, per limit (max_rows_scanned, ...), the setting that
	// raises it, for the LimitError's message; DefaultSettings fills the
	// ones missing.
	Settings map[string]string
}

// DefaultSettings are the environment variables a master reads the query
// limits from (see `lance-context master --help`).
var DefaultSettings = map[string]string{
	"max_rows_scanned":  "LC_SQL_MAX_ROWS_SCANNED",
	"max_rows_returned": "LC_SQL_MAX_ROWS_RETURNED",
	"max_query_time":    "LC_SQL_TIMEOUT_SECS",
	"max_memory":        "LC_SQL_MEMORY_MB",
}

// exceeded is the LimitError of limit at value, naming its setting.
func (l Limits) exceeded(limit, value, hint string) *LimitError {
	setting := l.Settings[limit]
	if setting == "" {
		setting = DefaultSettings[limit]
	}
	return &LimitError{Limit: limit, Value: value, Setting: setting, Hint: hint}
}

// Defaults of Limits. Rows scanned are the rows the scans hand to DuckDB
// after index lookups and scan filters: the default lets an aggregate over
// a store of tens of millions of rows run, bounded by the time and memory
// limits; the result bound is a browser console's.
const (
	DefaultMaxRowsScanned  = 100_000_000
	DefaultMaxRowsReturned = 10_000
	DefaultMaxTime         = 30 * time.Second
	DefaultMaxMemoryMB     = 512
	DefaultThreads         = 2
)

func (l Limits) withDefaults(d Limits) Limits {
	if l.MaxRowsScanned <= 0 {
		l.MaxRowsScanned = d.MaxRowsScanned
	}
	if l.MaxRowsReturned <= 0 {
		l.MaxRowsReturned = d.MaxRowsReturned
	}
	if l.MaxTime <= 0 {
		l.MaxTime = d.MaxTime
	}
	if l.MaxMemoryMB <= 0 {
		l.MaxMemoryMB = d.MaxMemoryMB
	}
	if l.Threads <= 0 {
		l.Threads = d.Threads
	}
	if l.Settings == nil {
		l.Settings = d.Settings
	}
	return l
}

// DefaultLimits are the limits of an Engine built with a zero Limits.
var DefaultLimits = Limits{
	MaxRowsScanned: DefaultMaxRowsScanned, MaxRowsReturned: DefaultMaxRowsReturned,
	MaxTime: DefaultMaxTime, MaxMemoryMB: DefaultMaxMemoryMB, Threads: DefaultThreads,
}

// Engine runs read-only SQL over the stores.
type Engine struct {
	open   Opener
	limits Limits
	bases  chartBases // the charts' cached base tables; off unless CacheChartBases
}

// chartBases are the cached chart bases, one per store, at most capBytes
// together (an estimate of DuckDB's storage of them).
type chartBases struct {
	mu       sync.Mutex
	capBytes int64
	used     int64
	m        map[string]*chartBase // by store
	tick     uint64                // use counter, for least recently used eviction
}

// CacheChartBases keeps, per store, the base table's part of the charts'
// inputs (a few columns of each row) in memory, at most capBytes for all
// stores together, so charts after a change of the WAL alone read only the
// pending rows. Zero or less turns the cache off (the default). Call it
// before the engine serves charts.
func (e *Engine) CacheChartBases(capBytes int64) {
	e.bases.mu.Lock()
	defer e.bases.mu.Unlock()
	e.bases.capBytes = capBytes
}

// New returns an engine reading stores through open, with limits (zero
// fields take DefaultLimits).
func New(open Opener, limits Limits) *Engine {
	return &Engine{open: open, limits: limits.withDefaults(DefaultLimits)}
}

// Limits returns the engine's limits.
func (e *Engine) Limits() Limits { return e.limits }

// Request is one query.
type Request struct {
	Store  string         // the store named records
	SQL    string         // one SELECT (or EXPLAIN of one)
	Source rollout.Source // tier of every store read; "" is fragments
	// Version, when not 0, reads the store named records at that base
	// version alone (as a checkout of it does, without changing what other
	// readers see); other stores are read at their latest.
	Version uint64
	// MaxRows, when > 0, truncates the result to that many rows (at most
	// the engine's MaxRowsReturned) and sets Truncated. When 0, a result
	// larger than MaxRowsReturned is an error naming the limit.
	MaxRows int
	// Limits overrides the engine's limits where set.
	Limits Limits
}

// Column is one result column: its name and DuckDB type.
type Column = api.QueryColumn

// ScanStat says what one scan of a store read (api.QueryScan: the columns
// the query needed, the rows read, the filters applied in the scan, see
// hint, and the rows they kept, which DuckDB received).
type ScanStat struct {
	api.QueryScan

	late bool // the scan read the filter columns first (lateBase)
}

// Result is a query result. Rows hold the driver's Go values; JSONRows
// converts them for encoding/json and Arrow builds an Arrow record.
type Result struct {
	Columns     []Column
	Rows        [][]any
	Truncated   bool
	RowsScanned int64
	Elapsed     time.Duration
	Scans       []ScanStat
}

// ErrUnavailable is returned by a binary built without cgo, which has no
// DuckDB.
var ErrUnavailable = errors.New("the SQL engine is not in this binary (built with CGO_ENABLED=0); build with cgo")

// ErrInvalid marks a request the engine refuses: bad SQL, a statement
// other than SELECT, an unknown source. The message says what to fix.
var ErrInvalid = errors.New("invalid query")

// LimitError is a query stopped by one of its limits.
type LimitError struct {
	Limit   string // max_rows_scanned, max_rows_returned, max_query_time, max_memory
	Value   string
	Setting string // the setting that raises it (LC_SQL_MAX_ROWS_SCANNED, ...), or ""
	Hint    string
}

func (e *LimitError) Error() string {
	if e.Setting == "" {
		return fmt.Sprintf("query exceeded %s=%s; %s", e.Limit, e.Value, e.Hint)
	}
	return fmt.Sprintf("query exceeded %s=%s (set by %s); %s", e.Limit, e.Value, e.Setting, e.Hint)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
