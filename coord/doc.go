// Package coord is the etcd side of lance-context: the store registry,
// worker membership, leader election among masters, and the maintenance
// task queue.
//
// Keys (under the prefix, default /lance-context):
//
//	/stores/{name}                 {"name","created_at"}: registered stores
//	/workers/{instance_id}         {"instance_id","shard_id","endpoint","version","registered_at"},
//	                               bound to the worker's lease: it disappears when the worker dies
//	/election/                     concurrency.Election keys of the masters
//	/tasks/{id}                    a task: {"id","kind","store","shard","state","attempts",...}
//	/tasks-live/{kind}/{store}     the id of the one queued or running task of (kind, store)
//	/tasks-claim/{id}              the claim on a running task (value: its attempt number),
//	                               bound to the runner's lease; Finish needs it
//	/tasks-cooldown/{kind}/{store} present (under a 10-minute lease) after a task failed for good
//
// An etcd lease never guards data on its own: a master that runs a merge of
// an orphan shard claims the shard's epoch in storage, which fences any
// writer that still believes it owns it (see package wal).
package coord
