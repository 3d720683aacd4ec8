package httpapi

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/vfs"
	"github.com/lance-context/lance-context/wal"
)

// TestClassifyFullDiskAndDuplicateInstance: a full disk is 507
// INSUFFICIENT_STORAGE (however it is wrapped, even inside a stopped
// writer's ErrLogFailed), not a retryable 503; a shard held by another
// live process is 503 SHARD_CLAIMED_ELSEWHERE; both with Retry-After.
func TestClassifyFullDiskAndDuplicateInstance(t *testing.T) {
	claimed := &rollout.ClaimedElsewhereError{Store: "s", Shard: "x", Instance: "w-1", Holder: wal.Owner{Host: "h"}, Epoch: 3, TTL: 8 * time.Second}
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("append: %w", vfs.NoSpace(syscall.ENOSPC)), http.StatusInsufficientStorage, api.CodeInsufficientStorage},
		{fmt.Errorf("%w: %w", wal.ErrLogFailed, vfs.NoSpace(syscall.EDQUOT)), http.StatusInsufficientStorage, api.CodeInsufficientStorage},
		{syscall.ENOSPC, http.StatusInsufficientStorage, api.CodeInsufficientStorage},
		{fmt.Errorf("append: %w", claimed), http.StatusServiceUnavailable, api.CodeShardClaimedElsewhere},
		{syscall.EIO, http.StatusServiceUnavailable, api.CodeStorageUnavailable},
	} {
		e := Classify(c.err)
		if e.Status != c.status || e.Code != c.code || e.RetryAfter <= 0 {
			t.Errorf("%v: %d %s (Retry-After %d), want %d %s", c.err, e.Status, e.Code, e.RetryAfter, c.status, c.code)
		}
	}
	if e := Classify(claimed); e.RetryAfter != 8 {
		t.Errorf("Retry-After %d for a holder whose heartbeat lives 8 s", e.RetryAfter)
	}
}
