package rollout

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/lance-context/lance-context/internal/gctune"
)

// OptionsFromEnv reads the store options a deployment sets in the
// environment, for every process that opens stores (workers, masters):
// ROLLOUT_MERGE_MAX_GENERATIONS (1024; 0: no cap), ROLLOUT_MERGE_MAX_BYTES
// (1 GiB; 0: no cap), ROLLOUT_WAL_PENDING_WARN_GENERATIONS (256),
// ROLLOUT_WAL_PENDING_MAX_GENERATIONS (4096),
// ROLLOUT_READ_CONSISTENCY_INTERVAL (0) and LC_INDEX_COLUMNS.
func OptionsFromEnv() (Options, error) {
	var o Options
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
	o.MergeMaxGenerations = int(num("ROLLOUT_MERGE_MAX_GENERATIONS", DefaultMergeMaxGenerations))
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
	d, err := ReadConsistencyIntervalFromEnv()
	if err != nil {
		errs = append(errs, err)
	}
	o.ReadConsistencyInterval = d
	cols, err := IndexColumnsFromEnv()
	if err != nil {
		errs = append(errs, err)
	}
	o.IndexColumns = cols
	if len(errs) > 0 {
		return o, errs[0]
	}
	return o, nil
}

// ReadConsistencyIntervalFromEnv reads ROLLOUT_READ_CONSISTENCY_INTERVAL,
// a Go duration ("1s", "500ms"; default 0): how long a read may reuse the
// snapshot metadata another read validated (Options.ReadConsistencyInterval,
// snapshot.go). 0 keeps every read strongly consistent.
func ReadConsistencyIntervalFromEnv() (time.Duration, error) {
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

// RetentionFromEnv reads what cleanups keep: LC_CLEANUP_OLDER_THAN_SECS
// (7200: superseded versions stay readable by number for two hours) and
// LC_CLEANUP_READ_GRACE_SECS (180: versions superseded this recently stay
// for reads that opened them).
func RetentionFromEnv() (CleanupOptions, error) {
	o := CleanupOptions{OlderThan: DefaultCleanupOlderThan}
	grace := DefaultReadGrace
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
