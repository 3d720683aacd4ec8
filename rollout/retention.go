package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/table"
)

// Row retention of a store lives in the base table's config, so every
// process that maintains the store applies the same policy.
const (
	retentionAgeKey      = "lance-context.retention.max-age-seconds"
	retentionVersionsKey = "lance-context.retention.keep-policy-versions"
)

// Retention is a store's row retention: rows older than MaxAge (by
// created_at), or whose policy_version is not among the newest
// KeepPolicyVersions (natural order: "step-10" after "step-9"), are
// deleted from the base table; the next compaction reclaims their bytes
// and the next cleanup the old files. Zero fields are no bound.
type Retention struct {
	MaxAge             time.Duration
	KeepPolicyVersions int
}

// Retention returns the store's row retention.
func (s *Store) Retention(ctx context.Context) (Retention, error) {
	base, err := table.Open(ctx, s.root)
	if err != nil {
		return Retention{}, err
	}
	return retentionOf(base), nil
}

func retentionOf(base *table.Dataset) Retention {
	var r Retention
	cfg := base.Config()
	if n, err := strconv.ParseInt(cfg[retentionAgeKey], 10, 64); err == nil && n > 0 {
		r.MaxAge = time.Duration(n) * time.Second
	}
	if n, err := strconv.Atoi(cfg[retentionVersionsKey]); err == nil && n > 0 {
		r.KeepPolicyVersions = n
	}
	return r
}

// SetRetention stores the row retention (a commit of the config only).
func (s *Store) SetRetention(ctx context.Context, r Retention) error {
	if r.MaxAge < 0 || r.KeepPolicyVersions < 0 {
		return invalid("retention bounds must be 0 (none) or positive")
	}
	if r.MaxAge > 0 && r.MaxAge < time.Second {
		return invalid("max age %v is under a second", r.MaxAge)
	}
	upsert, del := map[string]string{}, []string{}
	if r.MaxAge > 0 {
		upsert[retentionAgeKey] = strconv.FormatInt(int64(r.MaxAge/time.Second), 10)
	} else {
		del = append(del, retentionAgeKey)
	}
	if r.KeepPolicyVersions > 0 {
		upsert[retentionVersionsKey] = strconv.Itoa(r.KeepPolicyVersions)
	} else {
		del = append(del, retentionVersionsKey)
	}
	defer s.noteCommit()
	d, err := table.UpdateConfig(ctx, s.root, upsert, del)
	if err != nil {
		return err
	}
	s.sawVersion(d.Version())
	return nil
}

// RetentionResult reports one application of the retention.
type RetentionResult struct {
	RowsDeleted int64  `json:"rows_deleted"`
	Version     uint64 `json:"version"` // the base version after it
}

// ApplyRetention deletes the base rows the retention no longer keeps, as
// deletion files (one commit); rows still in the WAL tail are judged once
// merged. It reads two small columns of every base row: a background
// task's cost, run with cleanups.
func (s *Store) ApplyRetention(ctx context.Context) (*RetentionResult, error) {
	base, err := table.Open(ctx, s.root)
	if err != nil {
		return nil, err
	}
	r := retentionOf(base)
	res := &RetentionResult{Version: base.Version()}
	if r == (Retention{}) {
		return res, nil
	}
	defer s.hold(base.Version())()
	scan := func(fn func(ts arrow.Array, pv arrow.Array, addr *array.Uint64) error) error {
		return base.Scan(ctx, table.ScanOptions{Columns: []string{ColCreatedAt, "policy_version"}, WithRowAddr: true, PlainDictionaries: true},
			func(rec arrow.RecordBatch) error {
				addr, ok := rec.Column(2).(*array.Uint64)
				if !ok {
					return fmt.Errorf("rollout: retention: row addresses of type %s", rec.Column(2).DataType())
				}
				return fn(rec.Column(0), rec.Column(1), addr)
			})
	}
	var keepVersions map[string]bool
	if r.KeepPolicyVersions > 0 {
		seen := map[string]bool{}
		err := scan(func(_ arrow.Array, pv arrow.Array, _ *array.Uint64) error {
			at, ok := table.StringAt(pv)
			if !ok {
				return fmt.Errorf("rollout: retention: policy_version of type %s", pv.DataType())
			}
			for i := range pv.Len() {
				if v, ok := at(i); ok {
					seen[v] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		all := make([]string, 0, len(seen))
		for v := range seen {
			all = append(all, v)
		}
		slices.SortFunc(all, naturalCompare)
		keepVersions = map[string]bool{}
		for _, v := range all[max(0, len(all)-r.KeepPolicyVersions):] {
			keepVersions[v] = true
		}
	}
	var cutoff time.Time
	if r.MaxAge > 0 {
		cutoff = s.clockNow().Add(-r.MaxAge)
	}
	var doomed []table.RowAddr
	err = scan(func(ts arrow.Array, pv arrow.Array, addr *array.Uint64) error {
		tsa, _ := ts.(*array.Timestamp)
		var unit arrow.TimeUnit
		if tsa != nil {
			unit = tsa.DataType().(*arrow.TimestampType).Unit
		}
		at, _ := table.StringAt(pv)
		for i := range addr.Len() {
			old := !cutoff.IsZero() && tsa != nil && tsa.IsValid(i) && tsa.Value(i).ToTime(unit).Before(cutoff)
			stale := false
			if keepVersions != nil && at != nil {
				if v, ok := at(i); ok && !keepVersions[v] {
					stale = true
				}
			}
			if old || stale {
				a := addr.Value(i)
				doomed = append(doomed, table.RowAddr{Fragment: a >> 32, Offset: uint32(a)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(doomed) == 0 {
		return res, nil
	}
	defer s.noteCommit()
	d, err := table.DeleteRows(ctx, s.root, doomed, "lance-context retention")
	if err != nil {
		return nil, fmt.Errorf("rollout: retention of store %s: %w", s.name, err)
	}
	s.sawVersion(d.Version())
	res.RowsDeleted, res.Version = int64(len(doomed)), d.Version()
	return res, nil
}

// naturalCompare orders strings with their runs of digits compared as
// numbers: "step-2" before "step-10".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := trimZeros(a[:da]), trimZeros(b[:db])
			if len(na) != len(nb) {
				return cmp.Compare(len(na), len(nb))
			}
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
