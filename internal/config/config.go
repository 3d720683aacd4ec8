// Package config reads the settings of the layers below cmd from the
// environment, once, into their options. Below cmd nothing else reads the
// environment: the format layer (lance/file, lance/index) and the store
// (rollout) take options, and the processes (cmd, worker.FromEnv,
// master.ConfigFromEnv) build them here.
//
// Format layer (FormatFromEnv; invalid values are ignored, as before):
//   - LC_IO_CONCURRENCY (32): range reads one fetch of a data file read
//     keeps in flight (file.IOOptions.Concurrency).
//   - LC_INDEX_CACHE_BYTES (1 GiB, at most a quarter of GOMEMLIMIT; 0
//     disables caching): decoded BTree index pages, one cache per process
//     (index.CacheOptions.Bytes).
//   - LC_INDEX_PREWARM (on; "off", "0" or "false" turn it off): an index is
//     read whole into that cache in the background on its first point
//     lookup (index.CacheOptions.NoPrewarm).
//
// Store (StoreOptions, Retention, ReadConsistencyInterval, IndexColumns):
// ROLLOUT_MERGE_MAX_GENERATIONS (1024; 0: no cap), ROLLOUT_MERGE_MAX_BYTES
// (an eighth of the memory budget, at most 1 GiB; 0: no cap),
// ROLLOUT_WAL_PENDING_WARN_GENERATIONS (256),
// ROLLOUT_WAL_PENDING_MAX_GENERATIONS (4096),
// ROLLOUT_READ_CONSISTENCY_INTERVAL (0), LC_INDEX_COLUMNS
// (id,rollout_id,problem_id; "none"), LC_CLEANUP_OLDER_THAN_SECS (7200) and
// LC_CLEANUP_READ_GRACE_SECS (180).
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/rollout"
)

// Names of the format layer's variables.
const (
	EnvIOConcurrency   = "LC_IO_CONCURRENCY"
	EnvIndexCacheBytes = "LC_INDEX_CACHE_BYTES"
	EnvIndexPrewarm    = "LC_INDEX_PREWARM"
)

// Format is the format layer's options.
type Format struct {
	IO    file.IOOptions
	Index index.CacheOptions
}

// FormatFromEnv reads LC_IO_CONCURRENCY, LC_INDEX_CACHE_BYTES and
// LC_INDEX_PREWARM (see the package documentation).
func FormatFromEnv() Format {
	var f Format
	if v, err := strconv.Atoi(os.Getenv(EnvIOConcurrency)); err == nil && v > 0 {
		f.IO.Concurrency = v
	}
	if v := os.Getenv(EnvIndexCacheBytes); v != "" {
		if p, err := strconv.ParseInt(v, 10, 64); err == nil && p >= 0 {
			f.Index.Bytes = p
			if p == 0 {
				f.Index.Bytes = -1 // in the environment 0 disables caching
			}
		}
	}
	switch strings.ToLower(os.Getenv(EnvIndexPrewarm)) {
	case "off", "0", "false":
		f.Index.NoPrewarm = true
	}
	return f
}

// Install makes the format layer's process-wide defaults (file.DefaultIO,
// index.DefaultCache) ones built with f, and returns them. A process
// calls it once, before it opens anything.
func (f Format) Install() (*file.IO, *index.Cache) {
	io, c := file.NewIO(f.IO), index.NewCache(f.Index)
	file.SetDefaultIO(io)
	index.SetDefaultCache(c)
	return io, c
}

// StoreOptions reads the store options a deployment sets in the
// environment, for every process that opens stores (workers, masters):
// ROLLOUT_MERGE_MAX_GENERATIONS (1024; 0: no cap), ROLLOUT_MERGE_MAX_BYTES
// (1 GiB; 0: no cap), ROLLOUT_WAL_PENDING_WARN_GENERATIONS (256),
// ROLLOUT_WAL_PENDING_MAX_GENERATIONS (4096),
// ROLLOUT_READ_CONSISTENCY_INTERVAL (0) and LC_INDEX_COLUMNS.
func StoreOptions() (rollout.Options, error) {
	var o rollout.Options
	var errs []error
	num := func(name string, def int64) int64 {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a non-negative integer", name, v))
			return def
		}
		return n
	}
	o.MergeMaxGenerations = int(num("ROLLOUT_MERGE_MAX_GENERATIONS", rollout.DefaultMergeMaxGenerations))
	o.MergeMaxBytes = num("ROLLOUT_MERGE_MAX_BYTES", gctune.Share(8, 1<<30))
	o.PendingWarn = int(num("ROLLOUT_WAL_PENDING_WARN_GENERATIONS", 256))
	o.PendingMax = int(num("ROLLOUT_WAL_PENDING_MAX_GENERATIONS", 4096))
	// In the environment 0 means "no cap"; in Options it means the default.
	if o.MergeMaxGenerations == 0 {
		o.MergeMaxGenerations = -1
	}
	if o.MergeMaxBytes == 0 {
		o.MergeMaxBytes = -1
	}
	d, err := ReadConsistencyInterval()
	if err != nil {
		errs = append(errs, err)
	}
	o.ReadConsistencyInterval = d
	cols, err := IndexColumns()
	if err != nil {
		errs = append(errs, err)
	}
	o.IndexColumns = cols
	if len(errs) > 0 {
		return o, errs[0]
	}
	return o, nil
}

// ReadConsistencyInterval reads ROLLOUT_READ_CONSISTENCY_INTERVAL, a Go
// duration ("1s", "500ms"; default 0): how long a read may reuse the
// snapshot metadata another read validated
// (rollout.Options.ReadConsistencyInterval). 0 keeps every read strongly
// consistent.
func ReadConsistencyInterval() (time.Duration, error) {
	const name = "ROLLOUT_READ_CONSISTENCY_INTERVAL"
	v := os.Getenv(name)
	if v == "" || v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a non-negative Go duration such as 1s or 500ms", name, v)
	}
	return d, nil
}

// IndexColumns returns the indexed columns LC_INDEX_COLUMNS
// (rollout.IndexColumnsEnv) asks for (rollout.ParseIndexColumns).
func IndexColumns() ([]string, error) {
	return rollout.ParseIndexColumns(os.Getenv(rollout.IndexColumnsEnv))
}

// Retention reads what cleanups keep: LC_CLEANUP_OLDER_THAN_SECS (7200:
// superseded versions stay readable by number for two hours) and
// LC_CLEANUP_READ_GRACE_SECS (180: versions superseded this recently stay
// for reads that opened them).
func Retention() (rollout.CleanupOptions, error) {
	o := rollout.CleanupOptions{OlderThan: rollout.DefaultCleanupOlderThan}
	grace := rollout.DefaultReadGrace
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{"LC_CLEANUP_OLDER_THAN_SECS", &o.OlderThan}, {"LC_CLEANUP_READ_GRACE_SECS", &grace}} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return o, fmt.Errorf("%s=%q: want a non-negative number of seconds", v.name, s)
		}
		*v.dst = time.Duration(n) * time.Second
	}
	o.ReadGrace = &grace
	return o, nil
}
