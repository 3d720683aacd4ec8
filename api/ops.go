package api

// The master's operations surface: the reference system's compact status,
// merge progress, repair records and scheduler views, with its field names.

// Compact job states (CompactJobStatus.State).
const (
	CompactQueued  = "queued"
	CompactRunning = "running"
	CompactDone    = "done"
	CompactFailed  = "failed"
	CompactNone    = "none"
)

// CompactJobStatus is the body of GET /api/v1/experiments/{name}/compact/status:
// the store's latest compact task. fragments_removed and fragments_added
// come with done, error with failed.
type CompactJobStatus struct {
	State            string `json:"state"`
	TaskID           string `json:"task_id,omitempty"`
	FragmentsRemoved *int   `json:"fragments_removed,omitempty"`
	FragmentsAdded   *int   `json:"fragments_added,omitempty"`
	Error            string `json:"error,omitempty"`
	// Detail is the task's one-line summary; DependsOn the tasks it waits
	// for (an optimize chain).
	Detail    string   `json:"detail,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
}

// Merge progress statuses (MergeProgress.Status).
const (
	// MergeProgressReported: a merge task runs and reports its progress.
	MergeProgressReported = "reported"
	// MergeProgressDetailsUnavailable: a merge task runs, and has reported
	// nothing yet.
	MergeProgressDetailsUnavailable = "progress_details_unavailable"
	// MergeProgressUnknown: a merge task is queued, not started.
	MergeProgressUnknown = "progress_unknown"
	// MergeProgressNoActiveRecord: no merge task is queued or running.
	MergeProgressNoActiveRecord = "no_active_record"
)

// MergeProgress is the body of GET /api/v1/merge-progress?target=NAME.
type MergeProgress struct {
	Target      string               `json:"target"`
	Status      string               `json:"status"`
	TaskID      string               `json:"task_id,omitempty"`
	TaskState   string               `json:"task_state,omitempty"`
	Progress    *MergeProgressDetail `json:"progress,omitempty"`
	SampledAtMS int64                `json:"sampled_at_ms"`
}

// MergeProgressDetail is what a running merge task has done so far.
type MergeProgressDetail struct {
	StartedAtMS int64 `json:"started_at_ms"`
	UpdatedAtMS int64 `json:"updated_at_ms"`
	// ShardsTotal shards had pending generations when the task started;
	// ShardsDone of them are merged.
	ShardsTotal int `json:"shards_total"`
	ShardsDone  int `json:"shards_done"`
	// PendingGenerations were pending when the task started; Generations
	// and Rows are what its passes have merged so far.
	PendingGenerations int    `json:"pending_generations"`
	Passes             int    `json:"passes"`
	Generations        int    `json:"generations"`
	Rows               int64  `json:"rows"`
	CurrentShard       string `json:"current_shard,omitempty"`
}

// RepairedFragment is one fragment a repair dropped.
type RepairedFragment struct {
	ID           uint64   `json:"id"`
	PhysicalRows uint64   `json:"physical_rows"`
	MissingFiles []string `json:"missing_files"`
}

// RepairRecord is a repair of a store's base table (GET
// /api/v1/scheduler/repairs, newest first): at_ms and fragments_dropped
// with a one-line detail, and the reference's repaired_at_ms,
// read_version, committed_version, triggered_by and dropped.
type RepairRecord struct {
	Target           string             `json:"target"`
	AtMS             int64              `json:"at_ms"`
	RepairedAtMS     int64              `json:"repaired_at_ms"`
	FragmentsDropped int                `json:"fragments_dropped"`
	RowsDropped      uint64             `json:"rows_dropped"`
	Detail           string             `json:"detail"`
	ReadVersion      uint64             `json:"read_version"`
	CommittedVersion uint64             `json:"committed_version"`
	TriggeredBy      string             `json:"triggered_by"`
	TaskID           string             `json:"task_id,omitempty"`
	Dropped          []RepairedFragment `json:"dropped"`
}

// SchedulerDemand is the body of GET /api/v1/scheduler/demand: the merge
// pressure of each store, highest score first.
type SchedulerDemand struct {
	Leader bool          `json:"leader"`
	Tables []DemandTable `json:"tables"`
}

// DemandTable is one store's merge pressure. Score is pending generations
// over the merge threshold plus merge lag over the merge age trigger: at
// 1 or more the scheduler merges the store.
type DemandTable struct {
	Target                string  `json:"target"`
	PendingWALGenerations int     `json:"pending_wal_generations"`
	PendingRows           int64   `json:"pending_rows"`
	MergeLagSeconds       float64 `json:"merge_lag_seconds"`
	Score                 float64 `json:"score"`
	Stale                 bool    `json:"stale"`
}

// RescanResponse is the body of POST /api/v1/rescan.
type RescanResponse struct {
	Scanned int `json:"scanned"`
}
