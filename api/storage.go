package api

// WorkerStorage is one worker's storage metrics, read by the master from
// the worker's /metrics (the lance_context_wal_* families): counts since
// the worker started, means over them. An element of
// WorkerStorageList, the body of GET /api/v1/workers/storage.
type WorkerStorage struct {
	InstanceID string `json:"instance_id"`
	ShardID    string `json:"shard_id"`
	Endpoint   string `json:"endpoint"`
	// Error says why the worker's metrics could not be read; the other
	// fields are then zero.
	Error string `json:"error,omitempty"`

	WALPuts            int64            `json:"wal_puts"`            // WAL entry objects put
	WALPutMeanMS       float64          `json:"wal_put_mean_ms"`     // mean put-if-absent time
	WALSyncs           int64            `json:"wal_syncs"`           // local segment log writes flushed
	WALSyncMeanMS      float64          `json:"wal_sync_mean_ms"`    // mean write + fdatasync time
	Seals              map[string]int64 `json:"seals"`               // memtables sealed, by cause
	SealMeanMS         float64          `json:"seal_mean_ms"`        // mean seal time to its commit
	FencedWriters      int64            `json:"fenced_writers"`      // writers stopped by a newer claim
	FailedWriters      int64            `json:"failed_writers"`      // writers stopped by a failed log write
	ReplayCorruptions  int64            `json:"replay_corruptions"`  // claims refused on a corrupt log
	PendingGenerations int64            `json:"pending_generations"` // sealed, not yet merged (its shards)
	UnsealedRows       int64            `json:"unsealed_rows"`       // acknowledged, not yet sealed
	EntryRowsTotal     int64            `json:"entry_rows_total"`    // rows made durable in WAL entries
}

// WorkerStorageList is the body of GET /api/v1/workers/storage.
type WorkerStorageList struct {
	Workers []WorkerStorage `json:"workers"`
}
