package api

import "time"

// StorageFull says that writes to a store fail because the disk (or
// quota) holding it is full: they answer 507 INSUFFICIENT_STORAGE, store
// nothing, and resume by themselves once space is freed.
type StorageFull struct {
	Store string    `json:"store"`
	Since time.Time `json:"since"`
	Error string    `json:"error"`
}

// ShardConflict says that another live process holds this worker's shard
// of a store: two workers run with one instance id. The worker refuses
// writes to the store (503 SHARD_CLAIMED_ELSEWHERE) instead of taking the
// shard back at every write, and takes it over only once the other stops
// renewing its heartbeat.
type ShardConflict struct {
	Store          string    `json:"store"`
	Shard          string    `json:"shard"`
	InstanceID     string    `json:"instance_id,omitempty"`
	HolderHost     string    `json:"holder_host,omitempty"`
	HolderPID      int       `json:"holder_pid,omitempty"`
	HolderInstance string    `json:"holder_instance,omitempty"`
	Epoch          uint64    `json:"epoch"`
	LastHeartbeat  time.Time `json:"last_heartbeat"` // by the holder's clock
	Since          time.Time `json:"since"`
	Message        string    `json:"message"`
}
