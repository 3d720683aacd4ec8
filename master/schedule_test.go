package master

import (
	"testing"
	"time"

	"github.com/lance-context/lance-context/rollout"
)

// TestMergeDueByCountAndByAge: the scheduler merges a store at the
// generation threshold, or when its oldest pending generation is older
// than the age, whichever comes first; a negative age is off.
func TestMergeDueByCountAndByAge(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	cases := []struct {
		name   string
		shards []rollout.ShardStats
		age    time.Duration
		want   bool
	}{
		{"nothing pending", []rollout.ShardStats{{PendingGenerations: 0}}, time.Minute, false},
		{"one young generation", []rollout.ShardStats{{PendingGenerations: 1, OldestPendingAt: at(10 * time.Second)}}, time.Minute, false},
		{"one old generation", []rollout.ShardStats{{PendingGenerations: 1, OldestPendingAt: at(61 * time.Second)}}, time.Minute, true},
		{"old but age off", []rollout.ShardStats{{PendingGenerations: 1, OldestPendingAt: at(time.Hour)}}, -1, false},
		{"count threshold", []rollout.ShardStats{{PendingGenerations: 8, OldestPendingAt: at(time.Second)}}, time.Minute, true},
		{"second shard old", []rollout.ShardStats{{PendingGenerations: 1, OldestPendingAt: at(time.Second)}, {PendingGenerations: 2, OldestPendingAt: at(2 * time.Minute)}}, time.Minute, true},
	}
	for _, tc := range cases {
		if got := mergeDue(tc.shards, 8, tc.age, now); got != tc.want {
			t.Errorf("%s: mergeDue = %v, want %v", tc.name, got, tc.want)
		}
	}
}
