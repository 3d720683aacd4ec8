// Package worker is the data-plane HTTP service: the rollout API for this
// process's shard of every store, the flush, merge and cleanup sweepers, and
// /metrics.
package worker

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lance-context/lance-context/internal/config"
	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/wal"
)

// The values of Config.ReadyWarm (LC_READY_WARM).
const (
	ReadyWarmAuto = "auto"
	ReadyWarmFull = "full"
	ReadyWarmOpen = "open"
)

// Config is the worker's configuration. FromEnv documents every variable
// and its default.
type Config struct {
	DataDir    string   // DATA_DIR, default ./lance-data; a path or s3://bucket/prefix
	Listen     string   // LISTEN, default 127.0.0.1:3000
	InstanceID string   // INSTANCE_ID, else HOSTNAME, else "default"
	APIToken   string   // LC_API_TOKEN; when set every route but health needs it
	Advertise  string   // LC_ADVERTISE_URL: the URL masters use to reach this worker; default http://LISTEN
	Etcd       []string // ETCD_ENDPOINTS (comma-separated); empty: run without etcd

	FlushInterval         time.Duration // ROLLOUT_FLUSH_INTERVAL_SECS, default 30 (0 disables the sweeper)
	MergeAfterGenerations int           // ROLLOUT_MERGE_AFTER_GENERATIONS, default 0 (off)
	MergeMaxGenerations   int           // ROLLOUT_MERGE_MAX_GENERATIONS, default 1024 (0: no cap)
	MergeMaxBytes         int64         // ROLLOUT_MERGE_MAX_BYTES, default an eighth of the memory budget, at most 1073741824 (0: no cap)
	// LC_MEMTABLE_BUDGET_BYTES: the memtables of all stores together; past
	// it the largest is sealed. Default an eighth of the memory budget.
	MemtableBudget  int64
	CleanupInterval time.Duration // ROLLOUT_CLEANUP_INTERVAL_SECS, default 0 (off): fold the whole WAL tail on this period
	MergeAfterAge   time.Duration // LC_MERGE_AFTER_AGE_SECS, default 60: merge when the oldest pending generation is older (0 off)
	// LC_VERSION_CLEANUP_INTERVAL_SECS: remove old base versions on this
	// period; default 600 without etcd, 0 with it (the master schedules).
	VersionCleanupInterval time.Duration
	// LC_COMPACT_MIN_FRAGMENTS: compact a store once its merges have added
	// this many base fragments since its last compaction here, or its
	// deleted rows outnumber its live ones; default 16 without etcd, 0
	// (off) with it (the master schedules).
	CompactMinFragments int
	// Retention: LC_CLEANUP_OLDER_THAN_SECS (7200) and
	// LC_CLEANUP_READ_GRACE_SECS (180), for every cleanup of this worker.
	Retention    rollout.CleanupOptions
	PendingWarn  int      // ROLLOUT_WAL_PENDING_WARN_GENERATIONS, default 256
	PendingMax   int      // ROLLOUT_WAL_PENDING_MAX_GENERATIONS, default 4096
	IndexColumns []string // LC_INDEX_COLUMNS: BTree-indexed columns, default id,rollout_id,problem_id ("none": no indexes)
	// ROLLOUT_READ_CONSISTENCY_INTERVAL (a Go duration), default 0: every
	// read sees every commit that finished before it began; N > 0: reads
	// may reuse snapshot metadata validated less than N ago (this
	// process's own commits are still seen at once).
	ReadConsistencyInterval time.Duration
	// LC_SHARD_HEARTBEAT_SECS (3) is how often the worker renews the
	// heartbeat of its shard of each store it writes, and
	// LC_SHARD_HEARTBEAT_TTL_SECS (8, more than the interval) how long
	// another process with its INSTANCE_ID waits without a renewal before
	// it takes the shard over (a restart after kill -9 waits that long at
	// most; see rollout's claimguard.go).
	ShardHeartbeat, ShardHeartbeatTTL time.Duration

	MaxBodyBytes    int64 // LC_MAX_BODY_BYTES, default 67108864 (64 MiB)
	MaxRecords      int   // LC_MAX_RECORDS_PER_REQUEST, default 10000
	MaxPayloadBytes int64 // LC_MAX_PAYLOAD_BYTES, default 33554432 (32 MiB) per record
	// LC_INFLIGHT_BODY_BYTES: append bodies being read at once (by their
	// Content-Length, or the body limit when unknown); past it an append
	// answers 503 OVERLOADED. Default an eighth of the memory budget, at
	// least LC_MAX_BODY_BYTES.
	InflightBodyBytes int64
	// Large payloads (multipart parts) are streamed into objects of their
	// own (rollout/blob.go) instead of through the WAL and the memtable:
	// LC_BLOB_INLINE_BYTES (8 MiB, at most LC_MAX_PAYLOAD_BYTES) is the
	// largest part kept inline, LC_MAX_BLOB_BYTES (1 GiB) the largest part
	// accepted, and LC_INFLIGHT_BLOB_BYTES (4 GiB) the multipart bodies
	// being uploaded at once (by Content-Length, or LC_MAX_BLOB_BYTES when
	// unknown); past it a multipart append answers 503 with Retry-After.
	BlobInlineBytes, MaxBlobBytes, InflightBlobBytes int64
	// LC_BLOB_TIMEOUT_SECS (1800) replaces the read timeout for a
	// multipart append: a 1 GiB part takes longer than 60 s below
	// ~17 MB/s.
	BlobTimeout time.Duration
	// LC_STORE_IDLE_CLOSE_SECS (900) closes a store nobody used for that
	// long once it holds nothing unsealed or unmerged of this worker (its
	// shard writer stops renewing its heartbeat); LC_MAX_OPEN_STORES (2000,
	// the reference's ROLLOUT_CACHE_CAPACITY) closes the least recently
	// used past that many. 0 turns either off.
	StoreIdleClose time.Duration
	MaxOpenStores  int

	// LC_READY_WARM_SECS (60): at start the worker warms the caches of
	// its stores in the background (warm.go), and /readyz answers 503
	// until that is done or this long has passed; 0: /readyz is ready at
	// once (the warm still runs). Reads are served throughout.
	// LC_WARM_MAX_STORES (32) bounds the stores warmed (in the catalog's
	// order): thousands of stores would push each other out of the caches
	// and hold readiness for nothing; 0 warms none.
	// LC_READY_WARM (auto): what /readyz waits for of each store's warm.
	// "full": all of it; "open": its open part (metadata: snapshot, data
	// files' footers and deletion files, index lookup tables, pending
	// generations), the rest (offsets buffers and index pages read ahead)
	// running after readiness; "auto": full on local disk, open on object
	// stores, where the rest is a download (584 MB at 10M rows).
	ReadyWarmWait time.Duration
	ReadyWarm     string
	WarmMaxStores int

	// LC_WAL_DIRECT_IO (on): a segment log on local disk writes its frames
	// by direct IO where the file system allows it (wal/direct.go); "off"
	// writes them through the page cache.
	WALDirectIO bool

	ReadTimeout  time.Duration // LC_HTTP_READ_TIMEOUT_SECS, default 60
	WriteTimeout time.Duration // LC_HTTP_WRITE_TIMEOUT_SECS, default 120
	IdleTimeout  time.Duration // LC_HTTP_IDLE_TIMEOUT_SECS, default 120
}

// MaintainPolicy is the upkeep this worker runs on its shard.
func (c Config) MaintainPolicy() rollout.MaintainPolicy {
	return rollout.MaintainPolicy{
		FlushInterval: c.FlushInterval, MergeAfterGenerations: c.MergeAfterGenerations, MergeAfterAge: c.MergeAfterAge,
		DrainInterval: c.CleanupInterval, CleanupInterval: c.VersionCleanupInterval, Retention: c.Retention,
		CleanupAfterCompact: true, CompactMinFragments: c.CompactMinFragments, MemtableBudget: c.MemtableBudget,
		IdleClose: c.StoreIdleClose, MaxOpenStores: c.MaxOpenStores,
	}
}

// FromEnv reads the configuration from the environment, with defaults.
func FromEnv() (Config, error) {
	c := Config{
		DataDir:    envStr("DATA_DIR", "./lance-data"),
		Listen:     envStr("LISTEN", "127.0.0.1:3000"),
		InstanceID: os.Getenv("INSTANCE_ID"),
		APIToken:   os.Getenv("LC_API_TOKEN"),
	}
	if c.InstanceID == "" {
		c.InstanceID = envStr("HOSTNAME", "default")
	}
	c.Advertise = os.Getenv("LC_ADVERTISE_URL")
	if v := os.Getenv("ETCD_ENDPOINTS"); v != "" {
		c.Etcd = strings.Split(v, ",")
	}
	var err error
	secs := func(name string, def int) time.Duration {
		n := envInt(name, int64(def), &err)
		return time.Duration(n) * time.Second
	}
	c.FlushInterval = secs("ROLLOUT_FLUSH_INTERVAL_SECS", 30)
	c.MergeAfterGenerations = int(envInt("ROLLOUT_MERGE_AFTER_GENERATIONS", 0, &err))
	c.MergeMaxGenerations = int(envInt("ROLLOUT_MERGE_MAX_GENERATIONS", rollout.DefaultMergeMaxGenerations, &err))
	c.MergeMaxBytes = envInt("ROLLOUT_MERGE_MAX_BYTES", gctune.Share(8, 1<<30), &err)
	c.MemtableBudget = envInt("LC_MEMTABLE_BUDGET_BYTES", gctune.Share(8, 4<<30), &err)
	c.CleanupInterval = secs("ROLLOUT_CLEANUP_INTERVAL_SECS", 0)
	c.MergeAfterAge = secs("LC_MERGE_AFTER_AGE_SECS", 60)
	if len(c.Etcd) > 0 {
		c.VersionCleanupInterval = secs("LC_VERSION_CLEANUP_INTERVAL_SECS", 0)
		c.CompactMinFragments = int(envInt("LC_COMPACT_MIN_FRAGMENTS", 0, &err))
	} else {
		c.VersionCleanupInterval = secs("LC_VERSION_CLEANUP_INTERVAL_SECS", 600)
		c.CompactMinFragments = int(envInt("LC_COMPACT_MIN_FRAGMENTS", 16, &err))
	}
	if ret, rerr := config.Retention(); rerr != nil && err == nil {
		err = rerr
	} else {
		c.Retention = ret
	}
	c.PendingWarn = int(envInt("ROLLOUT_WAL_PENDING_WARN_GENERATIONS", 256, &err))
	c.PendingMax = int(envInt("ROLLOUT_WAL_PENDING_MAX_GENERATIONS", 4096, &err))
	c.MaxBodyBytes = envInt("LC_MAX_BODY_BYTES", 64<<20, &err)
	c.MaxRecords = int(envInt("LC_MAX_RECORDS_PER_REQUEST", 10000, &err))
	c.MaxPayloadBytes = envInt("LC_MAX_PAYLOAD_BYTES", 32<<20, &err)
	// A body of the largest size allowed must always fit.
	c.InflightBodyBytes = max(envInt("LC_INFLIGHT_BODY_BYTES", gctune.Share(8, 4<<30), &err), c.MaxBodyBytes)
	c.MaxBlobBytes = envInt("LC_MAX_BLOB_BYTES", 1<<30, &err)
	c.BlobInlineBytes = min(envInt("LC_BLOB_INLINE_BYTES", 8<<20, &err), c.MaxPayloadBytes)
	c.InflightBlobBytes = max(envInt("LC_INFLIGHT_BLOB_BYTES", 4<<30, &err), c.MaxBlobBytes)
	c.BlobTimeout = secs("LC_BLOB_TIMEOUT_SECS", 1800)
	c.StoreIdleClose = secs("LC_STORE_IDLE_CLOSE_SECS", 900)
	c.MaxOpenStores = int(envInt("LC_MAX_OPEN_STORES", envInt("ROLLOUT_CACHE_CAPACITY", 2000, &err), &err))
	c.ReadyWarmWait = secs("LC_READY_WARM_SECS", 60)
	c.WarmMaxStores = int(envInt("LC_WARM_MAX_STORES", 32, &err))
	switch c.ReadyWarm = os.Getenv("LC_READY_WARM"); c.ReadyWarm {
	case "", ReadyWarmAuto:
		c.ReadyWarm = ReadyWarmAuto
	case ReadyWarmFull, ReadyWarmOpen:
	default:
		if err == nil {
			err = fmt.Errorf("environment variable LC_READY_WARM=%q: want auto, full or open", c.ReadyWarm)
		}
	}
	switch v := os.Getenv("LC_WAL_DIRECT_IO"); v {
	case "", "on":
		c.WALDirectIO = true
	case "off":
	default:
		if err == nil {
			err = fmt.Errorf("environment variable LC_WAL_DIRECT_IO=%q: want on or off", v)
		}
	}
	c.ReadTimeout = secs("LC_HTTP_READ_TIMEOUT_SECS", 60)
	c.WriteTimeout = secs("LC_HTTP_WRITE_TIMEOUT_SECS", 120)
	c.IdleTimeout = secs("LC_HTTP_IDLE_TIMEOUT_SECS", 120)
	c.ShardHeartbeat = secs("LC_SHARD_HEARTBEAT_SECS", int(wal.DefaultHeartbeatInterval/time.Second))
	c.ShardHeartbeatTTL = secs("LC_SHARD_HEARTBEAT_TTL_SECS", int(wal.DefaultHeartbeatTTL/time.Second))
	if (c.ShardHeartbeat == 0 || c.ShardHeartbeatTTL <= c.ShardHeartbeat) && err == nil {
		err = fmt.Errorf("LC_SHARD_HEARTBEAT_SECS=%d and LC_SHARD_HEARTBEAT_TTL_SECS=%d: want an interval of at least 1 and a TTL longer than it",
			c.ShardHeartbeat/time.Second, c.ShardHeartbeatTTL/time.Second)
	}
	if d, derr := config.ReadConsistencyInterval(); derr != nil && err == nil {
		err = derr
	} else {
		c.ReadConsistencyInterval = d
	}
	if cols, ierr := config.IndexColumns(); ierr != nil && err == nil {
		err = ierr
	} else {
		c.IndexColumns = cols
	}
	return c, err
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int64, errp *error) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		if *errp == nil {
			*errp = fmt.Errorf("environment variable %s=%q: want a non-negative integer", name, v)
		}
		return def
	}
	return n
}
