package api

import "time"

// CreateStoreRequest is the body of POST /api/v1/rollouts.
type CreateStoreRequest struct {
	Name string `json:"name"`
	// StorageOptions are per-store storage settings. The reference sends
	// them on every create; null and {} are accepted, and every option this
	// service cannot honour per store is refused with a 400 that names it
	// (storage is configured per deployment: LC_DATA_DIR and its env).
	StorageOptions map[string]string `json:"storage_options,omitempty"`
}

// StoreInfo identifies a store. Version is the base table's version; lists
// leave it out (they are served without opening each store).
type StoreInfo struct {
	Name    string  `json:"name"`
	URI     string  `json:"uri"`
	Version *uint64 `json:"version,omitempty"`
}

// ListStoresResponse is the body of GET /api/v1/rollouts.
type ListStoresResponse struct {
	Stores []StoreInfo `json:"stores"`
	Count  int         `json:"count"`
}

// ShardStats describes one writer shard's un-merged tail.
type ShardStats struct {
	ShardID            string    `json:"shard_id"`
	PendingGenerations int       `json:"pending_generations"`
	PendingRows        int64     `json:"pending_rows"`
	Epoch              uint64    `json:"epoch"`
	Watermark          uint64    `json:"watermark"`
	UpdatedAt          time.Time `json:"updated_at"`
	// OldestPendingAt is when the oldest pending generation was sealed:
	// the base lags this shard's tail by now minus it.
	OldestPendingAt *time.Time `json:"oldest_pending_at,omitempty"`
}

// Stats describes a store, from manifests only (no data is read). It is
// the body of GET /api/v1/rollouts/{name}: a superset of StoreInfo.
type Stats struct {
	Name     string `json:"name"`
	URI      string `json:"uri"`
	Rows     int64  `json:"rows"` // base rows + pending rows (a retried id may count twice until merged)
	BaseRows int64  `json:"base_rows"`
	// DeletedRows are rows of the base's fragments that deletion files
	// mark (old versions of rewritten ids): bytes a compaction reclaims.
	DeletedRows        int64        `json:"deleted_rows"`
	PendingRows        int64        `json:"pending_rows"`
	Fragments          int          `json:"fragments"`
	Version            uint64       `json:"version"`
	PendingGenerations int          `json:"pending_generations"`
	Shards             []ShardStats `json:"shards"`
	UnflushedRows      int64        `json:"unflushed_rows"` // the answering worker's shard only
	LastUpdated        *time.Time   `json:"last_updated"`
	LastCompaction     *time.Time   `json:"last_compaction"`
	// MergeLagSeconds is the age of the oldest pending generation (0 with
	// none): how far the base table, what LanceDB reads, lags the tail.
	MergeLagSeconds float64 `json:"merge_lag_seconds"`
	// PinnedVersion is set while a checkout pins this worker's reads of the
	// store to an older base version.
	PinnedVersion *uint64 `json:"pinned_version,omitempty"`
}

// CheckoutRequest is the body of POST .../checkout.
type CheckoutRequest struct {
	Version uint64 `json:"version"`
}

// VersionResponse answers a checkout: the base version reads now see.
type VersionResponse struct {
	Version uint64 `json:"version"`
}

// MergeResult reports one merge pass of one shard.
type MergeResult struct {
	Shard       string `json:"shard"`
	Generations int    `json:"generations"` // merged in this pass
	Rows        int64  `json:"rows"`        // rows added to the base table
	Replaced    int64  `json:"replaced"`    // base rows superseded by newer writes of their id
	Watermark   uint64 `json:"watermark"`
	Remaining   int    `json:"remaining"` // pending generations left for later passes
	BaseVersion uint64 `json:"base_version"`
}

// CompactRequest is the body of POST .../compact; every field is optional
// (an empty body compacts with the defaults).
type CompactRequest struct {
	TargetRowsPerFragment *int64 `json:"target_rows_per_fragment,omitempty"`
	MaterializeDeletions  *bool  `json:"materialize_deletions,omitempty"`
}

// CompactResponse reports a compaction.
type CompactResponse struct {
	FragmentsRemoved int    `json:"fragments_removed"`
	FragmentsAdded   int    `json:"fragments_added"`
	FilesRemoved     int    `json:"files_removed"`
	FilesAdded       int    `json:"files_added"`
	Version          uint64 `json:"version"`
	// Cleanup is the cleanup that followed a compaction that rewrote
	// fragments (what the retention window already allowed to go).
	Cleanup *CleanupResponse `json:"cleanup,omitempty"`
}

// CompactStatsResponse is the body of GET .../compact/stats.
type CompactStatsResponse struct {
	TotalFragments   int        `json:"total_fragments"`
	IsCompacting     bool       `json:"is_compacting"`
	LastCompaction   *time.Time `json:"last_compaction,omitempty"`
	LastError        *string    `json:"last_error,omitempty"`
	TotalCompactions uint64     `json:"total_compactions"`
}

// Health is the body of GET /api/v1/health.
type Health struct {
	Status     string `json:"status"` // "ok", or "degraded" when a store is damaged, full or its shard held elsewhere
	Role       string `json:"role"`
	InstanceID string `json:"instance_id,omitempty"`
	ShardID    string `json:"shard_id,omitempty"`
	Version    string `json:"version,omitempty"`
	// DamagedStores lists the stores whose WAL is corrupt (they refuse
	// writes until repaired with lance-context wal repair).
	DamagedStores []StoreDamage `json:"damaged_stores,omitempty"`
	// StorageFull lists the stores whose writes find their disk full;
	// ShardConflicts those whose shard another live process holds.
	StorageFull    []StorageFull   `json:"storage_full,omitempty"`
	ShardConflicts []ShardConflict `json:"shard_conflicts,omitempty"`
}

// StoreDamage says where a store's shard WAL is corrupt: the store refuses
// writes until Repair is run, and reads go on.
type StoreDamage struct {
	Store    string    `json:"store"`
	Shard    string    `json:"shard"`
	Segment  string    `json:"segment"`
	Offset   int64     `json:"offset"`
	Position uint64    `json:"position"`
	Next     uint64    `json:"next_valid_position,omitempty"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	Repair   string    `json:"repair"`
}

// TaskResult is the result of a finished maintenance task, one shape for
// every kind: a merge fills the generation and row counts (summed over its
// passes), a compaction the fragment and file counts.
type TaskResult struct {
	Passes           int    `json:"passes"`
	Generations      int    `json:"generations"`
	Rows             int64  `json:"rows"`
	Replaced         int64  `json:"replaced"`
	FragmentsRemoved int    `json:"fragments_removed"`
	FragmentsAdded   int    `json:"fragments_added"`
	FilesRemoved     int    `json:"files_removed"`
	FilesAdded       int    `json:"files_added"`
	Version          uint64 `json:"version"` // the base table version after the task
	// A cleanup task's report (files_removed counts its files too).
	VersionsRemoved int   `json:"versions_removed,omitempty"`
	BytesRemoved    int64 `json:"bytes_removed,omitempty"`
	RowsExpired     int64 `json:"rows_expired,omitempty"` // by the store's row retention
	// An index task's report, one entry per indexed column.
	Indexes []IndexColumnResult `json:"indexes,omitempty"`
}

// IndexColumnResult is what an index task did to one column's BTree index.
type IndexColumnResult struct {
	Column   string `json:"column"`
	Built    bool   `json:"built"`    // a new index was committed
	Index    string `json:"index"`    // uuid of the index now covering the column
	Version  uint64 `json:"version"`  // table version committed (0 when nothing changed)
	NewRows  int64  `json:"new_rows"` // rows of fragments newly covered
	Replaced int    `json:"replaced"` // index segments replaced
}
