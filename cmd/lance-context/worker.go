package main

import (
	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/worker"
)

func newWorkerCmd() *cobra.Command {
	var dataDir, listen, instanceID string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Serve the rollout API for this instance's shard (flags also from DATA_DIR, LISTEN, INSTANCE_ID)",
		Long: `Serve the rollout API. Appends are durable on return and readable after a flush.

Environment (defaults): DATA_DIR (./lance-data), LISTEN (127.0.0.1:3000),
INSTANCE_ID (HOSTNAME, else "default"), LC_API_TOKEN (unset: no auth),
ROLLOUT_FLUSH_INTERVAL_SECS (30), ROLLOUT_MERGE_AFTER_GENERATIONS (0 = off),
ROLLOUT_MERGE_MAX_GENERATIONS (1024), ROLLOUT_MERGE_MAX_BYTES (1073741824),
ROLLOUT_CLEANUP_INTERVAL_SECS (0 = off: fold the whole WAL tail on this period),
LC_MERGE_AFTER_AGE_SECS (60: merge when the oldest pending generation is older; 0 = off),
LC_VERSION_CLEANUP_INTERVAL_SECS (600 without etcd, 0 with it: the master schedules cleanups),
LC_COMPACT_MIN_FRAGMENTS (16 without etcd, 0 with it: compact a store once its merges added this many base fragments since its last compaction here, or its deleted rows outnumber its live ones),
LC_CLEANUP_OLDER_THAN_SECS (7200: superseded base versions stay this long),
LC_CLEANUP_READ_GRACE_SECS (180: versions superseded this recently stay for reads that opened them),
ROLLOUT_WAL_PENDING_WARN_GENERATIONS (256),
ROLLOUT_WAL_PENDING_MAX_GENERATIONS (4096),
ROLLOUT_READ_CONSISTENCY_INTERVAL (0 = every read sees every commit finished before it;
a Go duration such as 1s: reads may reuse metadata checked less than that ago, own writes still seen at once),
LC_MAX_BODY_BYTES (67108864),
LC_MAX_RECORDS_PER_REQUEST (10000), LC_MAX_PAYLOAD_BYTES (33554432),
LC_HTTP_READ_TIMEOUT_SECS (60), LC_HTTP_WRITE_TIMEOUT_SECS (120), LC_HTTP_IDLE_TIMEOUT_SECS (120),
LC_INDEX_COLUMNS (id,rollout_id,problem_id; "none": no BTree indexes),
LC_METADATA_CACHE_BYTES (a sixteenth of the budget, at most 1073741824: manifests, file metadata, offsets, local directory listings),
LC_INDEX_CACHE_BYTES (1073741824, at most a quarter of GOMEMLIMIT: decoded BTree index pages, one cache per process),
LC_INDEX_PREWARM (on: an index is read whole into that cache, in the background, on its first point lookup, when at most half the cache and an eighth of GOMEMLIMIT; "off"), LC_IO_CONCURRENCY (32 range reads in flight per read),
LC_MEMORY_BUDGET_BYTES (3/4 of the container's memory limit, cgroup v2 or v1, else of the machine's memory:
the process's budget; it sets GOMEMLIMIT, and the caches, memtables, merges and request bodies take shares of it),
LC_MEMTABLE_BUDGET_BYTES (an eighth of the budget: memtables of all stores together; past it the largest is sealed),
LC_WAL_DIRECT_IO (on: on local disk the WAL's segment files are written by direct IO where the file system takes it; "off": through the page cache),
LC_INFLIGHT_BODY_BYTES (an eighth of the budget: append bodies being read at once; past it appends answer 503 OVERLOADED),
LC_BLOB_INLINE_BYTES (8388608: a larger multipart payload part streams into an object of its own, _lc_blobs/),
LC_MAX_BLOB_BYTES (1073741824: the largest payload part), LC_INFLIGHT_BLOB_BYTES (4294967296: multipart uploads at once,
by Content-Length; past it 503), LC_BLOB_TIMEOUT_SECS (1800: the read timeout of a multipart append),
LC_STORE_IDLE_CLOSE_SECS (900: a store unused this long, with nothing unsealed or unmerged here, is closed; 0 = never),
LC_MAX_OPEN_STORES (2000, or ROLLOUT_CACHE_CAPACITY: past it the least recently used idle stores close),
LC_READY_WARM_SECS (60: /readyz answers 503 while the start-up warm of the stores' caches runs, at most this long; 0 = ready at once),
LC_READY_WARM (auto: what /readyz waits for of each store's warm; full = all of it, open = its metadata, the data read ahead after; auto = full on local disk, open on object stores),
LC_WARM_MAX_STORES (32: the stores the start-up warm reads ahead; 0 = none),
LC_DEBUG_LISTEN (unset: none; an address such as 127.0.0.1:6060 serves Go's profiles at /debug/pprof/),
GOGC (300), GOMEMLIMIT (the budget).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The budget first: the configuration's defaults are shares of it.
			if err := gctune.Tune(); err != nil {
				return err
			}
			cfg, err := worker.FromEnv()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("data-dir") {
				cfg.DataDir = dataDir
			}
			if cmd.Flags().Changed("listen") {
				cfg.Listen = listen
			}
			if cmd.Flags().Changed("instance-id") {
				cfg.InstanceID = instanceID
			}
			return worker.Run(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./lance-data", "data directory: a path or s3://bucket/prefix (env DATA_DIR)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:3000", "address to serve on (env LISTEN)")
	cmd.Flags().StringVar(&instanceID, "instance-id", "", "this worker's instance id; its shard derives from it (env INSTANCE_ID, else HOSTNAME)")
	return cmd
}
