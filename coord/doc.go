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
//	/tasks-cooldown/{kind}/{store} {"kind","target","failures","until_ms","last_error",...}: failed
//	                               attempts in a row; from the 3rd the scheduler leaves (kind, store)
//	                               alone until until_ms (600 s doubling to 6 h); a success deletes it
//	/tasks-lock/{store}            the id of the running task of a store, bound to its runner's
//	                               lease: taken with the claim, so one task per store runs at a time
//	/tasks-progress/{id}           how far a running task has got (a merge's passes), for any master
//	/stats/{store}                 {"stats","fetched_at"}: a store's last statistics, restored (stale)
//	                               by a master that restarts
//	/repairs/{store}/{at_ms}       a repair's record (fragments dropped), the newest 20 per store
//
// A task with depends_on is claimed only when every task it names is done,
// and fails (naming it) when one failed or is gone; it is not deduplicated
// through /tasks-live.
//
// An etcd lease never guards data on its own: a master that runs a merge of
// an orphan shard claims the shard's epoch in storage, which fences any
// writer that still believes it owns it (see package wal).
package coord
