package api

import "time"

// SnapshotRequest is the body of POST /api/v1/rollouts/{name}/snapshots
// and of POST .../snapshots/{id}/renew (which reads only ttl_seconds).
type SnapshotRequest struct {
	TTLSeconds int64  `json:"ttl_seconds,omitempty"` // default 3600, at most 7 days
	Holder     string `json:"holder,omitempty"`      // who holds it (free text, at most 256 bytes)
}

// Snapshot is one base version of a store that holds everything the
// answering worker acknowledged before the call, named by a tag in Lance's
// format and kept from cleanup and compaction by a lease. Any Lance engine
// reads it: uri at version (or at tag). It carries no credentials: each
// engine brings its own access to the object store.
type Snapshot struct {
	ID      string        `json:"id"`  // the snapshot's id: its lease's id
	URI     string        `json:"uri"` // the Lance dataset (the store's base table)
	Version uint64        `json:"version"`
	Tag     string        `json:"tag"` // SnapshotTagPrefix + id
	Lease   SnapshotLease `json:"lease"`
	Holder  string        `json:"holder,omitempty"`
	// ExcludedShards (only in the answer that made the snapshot) are the
	// shards of other live workers whose rows merged after the call, or
	// still pending in their WAL, the version may lack. With etcd, the
	// worker asks the other live workers (their registered endpoints) to
	// seal and merge first, and lists only those it could not reach (with
	// the reason); without, it cannot seal another live worker's memtable
	// and lists every live shard with pending generations. Empty in a
	// one-worker deployment. Snapshot every listed worker to cover them
	// (deploy/SCALING.md).
	ExcludedShards []SnapshotShard `json:"excluded_shards,omitempty"`
}

// SnapshotLease is the lease that keeps a snapshot's version.
type SnapshotLease struct {
	ID        string    `json:"id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SnapshotShard is a shard a snapshot did not fold into its version.
type SnapshotShard struct {
	ShardID            string `json:"shard_id"`
	InstanceID         string `json:"instance_id,omitempty"` // its owner's, when the owner records it
	PendingGenerations int    `json:"pending_generations"`   // sealed, not merged, at the call
	PendingRows        int64  `json:"pending_rows"`          // their rows; unsealed rows are not counted
	// Reason, when the worker asked the shard's owner to seal and merge
	// (it runs with etcd), says why that failed; the owner's unsealed rows
	// are then missing too.
	Reason string `json:"reason,omitempty"`
}

// SnapshotsResponse is the body of GET .../snapshots: the live snapshots,
// oldest version first.
type SnapshotsResponse struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// SnapshotTagPrefix starts the name of every snapshot's tag; the rest is
// the snapshot's (its lease's) id. Tags with this prefix are the
// snapshots': cleanup deletes those whose lease expired or was released.
const SnapshotTagPrefix = "lc-snapshot-"

// ExportRowsTrailer is the HTTP trailer of GET .../export: the rows the
// stream holds, sent after its last byte. A stream without it was cut
// short (the server also aborts the connection on a failure mid-stream).
const ExportRowsTrailer = "X-Export-Rows"

// ParquetFile is the content type of GET .../export?format=parquet: one
// Parquet file, written as the export runs (its footer last).
const ParquetFile = "application/vnd.apache.parquet"
