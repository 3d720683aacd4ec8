package master

import (
	"testing"

	"github.com/lance-context/lance-context/rollout"
)

// TestNeedsCompaction: the scheduler compacts a store with many fragments,
// or with more deleted rows (old versions of rewritten ids) than live ones.
func TestNeedsCompaction(t *testing.T) {
	for _, c := range []struct {
		fragments     int
		live, deleted int64
		want          bool
	}{
		{16, 100, 0, true},
		{15, 100, 0, false},
		{2, 20_000, 20_001, true},
		{2, 20_000, 20_000, false}, // as many deleted as live
		{2, 10, 5_000, false},      // too few deleted to be worth a compaction
	} {
		s := &rollout.Stats{Fragments: c.fragments, BaseRows: c.live, DeletedRows: c.deleted}
		if got := needsCompaction(s, 16); got != c.want {
			t.Errorf("%d fragments, %d live, %d deleted: needsCompaction = %v, want %v", c.fragments, c.live, c.deleted, got, c.want)
		}
	}
}
