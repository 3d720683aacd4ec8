package master

import (
	"os"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/internal/config"
	"github.com/lance-context/lance-context/rollout"
)

// Config tunes the master.
type Config struct {
	ID                  string        // this master's id (election candidate); default hostname + random
	RefreshInterval     time.Duration // statistics refresh; default 10 s
	StatsTimeout        time.Duration // per store per refresh; default 3 s
	Maintenance         bool          // run the scheduler (LC_MAINTENANCE=off disables)
	SchedulerInterval   time.Duration // default 15 s
	MergeThreshold      int           // pending generations that trigger a merge; default 8
	CompactMinFragments int           // fragments that trigger compaction; default 16
	// MergeAfterAge merges a store whose oldest pending generation is
	// older than this (LC_MERGE_AFTER_AGE_SECS, default 60; 0 there turns
	// it off, as a negative value here does).
	MergeAfterAge time.Duration
	// CleanupEvery enqueues a cleanup of each store on this period
	// (LC_CLEANUP_EVERY_SECS, default 3600), besides the one after each
	// compaction; Retention is what cleanups keep (config.Retention).
	CleanupEvery         time.Duration
	Retention            rollout.CleanupOptions
	WorkerLeaseTTLSecond int
	APIToken             string // LC_API_TOKEN: sent to workers when asking them to merge
	// TaskConcurrency is how many tasks this master runs at once
	// (LC_TASK_CONCURRENCY, or the reference's TASK_CONCURRENCY; default
	// 1). Two tasks of one store never run at once, whatever it is.
	TaskConcurrency int
	// Cooldown says when the scheduler leaves a failing (kind, store)
	// alone: LC_TASK_COOLDOWN_AFTER_FAILURES (3), LC_TASK_COOLDOWN_BASE_SECS
	// (600) and LC_TASK_COOLDOWN_MAX_SECS (21600), or the reference's names
	// without LC_.
	Cooldown coord.CooldownPolicy
	// StatsPersistEvery is how often unchanged statistics of a store are
	// written to etcd again (default 10 minutes; changed ones are written
	// at once), so that a restarted master serves them before it has read
	// every store.
	StatsPersistEvery time.Duration
	// Store tunes the stores the master opens (to read statistics, merge
	// orphan shards, compact and index): the ROLLOUT_* and LC_INDEX_COLUMNS
	// variables, as internal/config.StoreOptions reads them.
	Store rollout.Options
}

// ConfigFromEnv reads LC_MAINTENANCE (on|off), LC_MERGE_THRESHOLD_GENERATIONS
// (8), LC_MERGE_AFTER_AGE_SECS (60), LC_COMPACT_MIN_FRAGMENTS (16),
// LC_CLEANUP_EVERY_SECS (3600), LC_CLEANUP_OLDER_THAN_SECS (7200),
// LC_CLEANUP_READ_GRACE_SECS (180), LC_STATS_REFRESH_SECS (10),
// LC_TASK_CONCURRENCY (1), LC_TASK_COOLDOWN_AFTER_FAILURES (3),
// LC_TASK_COOLDOWN_BASE_SECS (600), LC_TASK_COOLDOWN_MAX_SECS (21600) (the
// last four also under the reference's names, without LC_), LC_API_TOKEN
// and the store options (internal/config.StoreOptions).
func ConfigFromEnv() (Config, error) {
	c := Config{Maintenance: os.Getenv("LC_MAINTENANCE") != "off", APIToken: os.Getenv("LC_API_TOKEN")}
	var err error
	c.Store, err = config.StoreOptions()
	c.MergeThreshold = envInt("LC_MERGE_THRESHOLD_GENERATIONS", 8)
	c.CompactMinFragments = envInt("LC_COMPACT_MIN_FRAGMENTS", 16)
	c.RefreshInterval = time.Duration(envInt("LC_STATS_REFRESH_SECS", 10)) * time.Second
	c.MergeAfterAge = time.Duration(envInt("LC_MERGE_AFTER_AGE_SECS", 60)) * time.Second
	if os.Getenv("LC_MERGE_AFTER_AGE_SECS") == "0" {
		c.MergeAfterAge = -1
	}
	c.CleanupEvery = time.Duration(envInt("LC_CLEANUP_EVERY_SECS", 3600)) * time.Second
	c.TaskConcurrency = envInt2("LC_TASK_CONCURRENCY", "TASK_CONCURRENCY", 1)
	c.Cooldown = coord.CooldownPolicy{
		AfterFailures: envInt2("LC_TASK_COOLDOWN_AFTER_FAILURES", "TASK_COOLDOWN_AFTER_FAILURES", 3),
		Base:          time.Duration(envInt2("LC_TASK_COOLDOWN_BASE_SECS", "TASK_COOLDOWN_BASE_SECS", 600)) * time.Second,
		Max:           time.Duration(envInt2("LC_TASK_COOLDOWN_MAX_SECS", "TASK_COOLDOWN_MAX_SECS", 21600)) * time.Second,
	}
	ret, rerr := config.Retention()
	if err == nil {
		err = rerr
	}
	c.Retention = ret
	return c, err
}

// envInt2 reads name, else the reference's alt, else def.
func envInt2(name, alt string, def int) int {
	if os.Getenv(name) == "" {
		name = alt
	}
	return envInt(name, def)
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func (c *Config) setDefaults() {
	if c.ID == "" {
		h, _ := os.Hostname()
		c.ID = h + "-" + uuid.NewString()[:8]
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = 10 * time.Second
	}
	if c.StatsTimeout <= 0 {
		c.StatsTimeout = 3 * time.Second
	}
	if c.SchedulerInterval <= 0 {
		c.SchedulerInterval = 15 * time.Second
	}
	if c.MergeThreshold <= 0 {
		c.MergeThreshold = 8
	}
	if c.CompactMinFragments <= 0 {
		c.CompactMinFragments = 16
	}
	if c.MergeAfterAge == 0 {
		c.MergeAfterAge = 60 * time.Second
	}
	if c.CleanupEvery <= 0 {
		c.CleanupEvery = time.Hour
	}
	if c.TaskConcurrency <= 0 {
		c.TaskConcurrency = 1
	}
	if c.StatsPersistEvery <= 0 {
		c.StatsPersistEvery = 10 * time.Minute
	}
}
