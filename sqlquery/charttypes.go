package sqlquery

// DefaultChartsMaxRowsScanned bounds the rows the charts of one store read.
const DefaultChartsMaxRowsScanned = 10_000_000

// Charts are the overview charts of a store. Every series is an array,
// empty when there is no data; no value is NaN.
type Charts struct {
	RewardByPolicyVersion []PolicyPoint `json:"reward_by_policy_version"`
	RewardOverTime        []TimePoint   `json:"reward_over_time"`
	LengthHist            []Bin         `json:"length_hist"`
	LengthOverTime        []LengthPoint `json:"length_over_time"`
	IngestRate            []RatePoint   `json:"ingest_rate"`
	Pending               Pending       `json:"pending"`
	BucketSeconds         int64         `json:"bucket_seconds"` // width of the time buckets
	RowsScanned           int64         `json:"rows_scanned"`   // rows read, from storage or from the cached base
	ElapsedMS             float64       `json:"elapsed_ms"`

	Base BaseSource `json:"-"` // where the base table's rows came from
}

// BaseSource says how a computation of the charts read the base table.
type BaseSource string

const (
	BaseScanned BaseSource = "scanned" // the store was scanned (no cache, or the cache could not serve)
	BaseCached  BaseSource = "cached"  // from the cached base of this base table version
	BaseBuilt   BaseSource = "built"   // scanned into a new cached base
)

// PolicyPoint is the reward of one policy_version (a string column; ordered
// numerically when it is a number).
type PolicyPoint struct {
	PolicyVersion string  `json:"policy_version"`
	Mean          float64 `json:"mean"`
	P10           float64 `json:"p10"`
	P90           float64 `json:"p90"`
	Count         int64   `json:"count"`
}

// TimePoint is the reward of one time bucket (by created_at).
type TimePoint struct {
	T     string  `json:"t"` // RFC 3339 bucket start, UTC
	Mean  float64 `json:"mean"`
	P10   float64 `json:"p10"`
	P90   float64 `json:"p90"`
	Count int64   `json:"count"`
}

// Bin is one bar of the length histogram: lo <= length < hi.
type Bin struct {
	Lo    int64 `json:"lo"`
	Hi    int64 `json:"hi"`
	Count int64 `json:"count"`
}

// LengthPoint is the response length of one time bucket.
type LengthPoint struct {
	T    string  `json:"t"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
}

// RatePoint is the rows created in one time bucket.
type RatePoint struct {
	T    string `json:"t"`
	Rows int64  `json:"rows"`
}

// Pending is the WAL backlog (from manifests; filled in by the caller).
type Pending struct {
	WALRows     int64 `json:"wal_rows"`
	Generations int   `json:"generations"`
}
