//go:build cgo

package sqlquery

import (
	"context"
	"fmt"
	"testing"

	"github.com/lance-context/lance-context/rollout"
)

// TestQueryAtVersion: a query with Version reads the store named records
// at that base version (what a checkout of it reads), through the scan and
// through an index lookup, while a query without it, and another store,
// read the latest.
func TestQueryAtVersion(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Limits{})
	s := f.store(t, "tv", 40, true)
	v1 := s.Version()
	more := make([]rollout.Record, 10)
	for i := range more {
		more[i] = rollout.Record{ID: fmt.Sprintf("tv-new-%d", i), RolloutID: "r1", Role: "assistant", ContentType: "text/plain"}
	}
	if _, err := s.Append(ctx, more); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	f.store(t, "other", 7, true)
	count := func(sql string, v uint64, src rollout.Source) string {
		t.Helper()
		res, err := f.eng.Query(ctx, Request{Store: "tv", SQL: sql, Source: src, Version: v})
		if err != nil {
			t.Fatalf("%s at %d: %v", sql, v, err)
		}
		return fmt.Sprint(res.Rows)
	}
	for _, tc := range []struct {
		sql  string
		v    uint64
		src  rollout.Source
		want string
	}{
		{"SELECT count(*) FROM records", v1, rollout.SourceFragments, "[[40]]"},
		{"SELECT count(*) FROM records", v1, rollout.SourceAll, "[[40]]"},
		{"SELECT count(*) FROM records", 0, rollout.SourceFragments, "[[50]]"},
		{"SELECT count(*) FROM records WHERE rollout_id = 'r1'", v1, rollout.SourceFragments, "[[4]]"},
		{"SELECT count(*) FROM records WHERE rollout_id = 'r1'", 0, rollout.SourceFragments, "[[14]]"},
		{"SELECT (SELECT count(*) FROM records), (SELECT count(*) FROM other)", v1, rollout.SourceFragments, "[[40 7]]"},
	} {
		if got := count(tc.sql, tc.v, tc.src); got != tc.want {
			t.Fatalf("%s at %d (%s): %s, want %s", tc.sql, tc.v, tc.src, got, tc.want)
		}
	}
	if _, err := s.Checkout(ctx, v1); err != nil {
		t.Fatal(err)
	}
	if got := count("SELECT count(*) FROM records", 0, rollout.SourceFragments); got != "[[40]]" {
		t.Fatalf("checkout: %s", got)
	}
}
