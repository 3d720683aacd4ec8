package api

// Charts is the answer of GET /api/v1/experiments/{name}/charts?source=:
// a store's overview charts, computed by the server's SQL engine. Every
// series is an array, empty when there is no data; no value is NaN.
type Charts struct {
	RewardByPolicyVersion []PolicyPoint  `json:"reward_by_policy_version"`
	RewardOverTime        []TimePoint    `json:"reward_over_time"`
	LengthHist            []LengthBin    `json:"length_hist"`
	LengthOverTime        []LengthPoint  `json:"length_over_time"`
	IngestRate            []RatePoint    `json:"ingest_rate"`
	Pending               PendingBacklog `json:"pending"`
	BucketSeconds         int64          `json:"bucket_seconds"` // width of the time buckets (by created_at)
	// IngestBucketSeconds is the width of the ingest rate's buckets (by
	// arrival, whose span may differ from created_at's).
	IngestBucketSeconds int64   `json:"ingest_bucket_seconds"`
	RowsScanned         int64   `json:"rows_scanned"` // rows the charts cover, read from storage or from the cached base
	ElapsedMS           float64 `json:"elapsed_ms"`
}

// Headers of a charts answer: whether it came from the cache of charts
// computed at the same store state (hit, miss) and, on a miss, how the
// base table's rows were read (scanned, cached, built, updated).
const (
	HeaderChartsCache = "X-Charts-Cache"
	HeaderChartsBase  = "X-Charts-Base"
)

// PolicyPoint is the reward of one policy_version (a string column), in
// natural order: runs of digits compare as numbers (step-2 before step-10).
// FirstSeen, the arrival of its first row (RFC 3339), orders them by first
// appearance instead.
type PolicyPoint struct {
	PolicyVersion string  `json:"policy_version"`
	Mean          float64 `json:"mean"`
	P10           float64 `json:"p10"`
	P90           float64 `json:"p90"`
	Count         int64   `json:"count"`
	FirstSeen     string  `json:"first_seen,omitempty"`
}

// TimePoint is the reward of one time bucket (by created_at).
type TimePoint struct {
	T     string  `json:"t"` // RFC 3339 bucket start, UTC
	Mean  float64 `json:"mean"`
	P10   float64 `json:"p10"`
	P90   float64 `json:"p90"`
	Count int64   `json:"count"`
}

// LengthBin is one bar of the response length histogram: lo <= length < hi.
type LengthBin struct {
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

// RatePoint is the rows that arrived in one time bucket: by the time in a
// UUIDv7 id (what the clients and the server give a record without an id),
// else by created_at.
type RatePoint struct {
	T    string `json:"t"`
	Rows int64  `json:"rows"`
}

// PendingBacklog is the store's WAL backlog, from its manifests.
type PendingBacklog struct {
	WALRows     int64 `json:"wal_rows"`
	Generations int   `json:"generations"`
}
