package objstore

import (
	"testing"
	"time"
)

// TestDirStampMarginFollowsTimestampPrecision: a stamp with sub-second
// times is settled once dirRacyMargin old; one with whole seconds (a file
// system that may keep no more) only once coarseRacyMargin old.
func TestDirStampMarginFollowsTimestampPrecision(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	fine := now.Add(-2 * dirRacyMargin).UnixNano()
	if s := (dirStamp{mtime: fine + 7, ctime: fine + 7}); !s.settled(now) {
		t.Error("a sub-second stamp twice the margin old is not settled")
	}
	if s := (dirStamp{mtime: fine + 7, ctime: now.UnixNano() - 1}); s.settled(now) {
		t.Error("a stamp whose ctime is within the margin is settled")
	}
	whole := now.Add(-time.Second).UnixNano() // a whole second, 1 s old
	if s := (dirStamp{mtime: whole, ctime: whole}); s.settled(now) {
		t.Error("a whole-second stamp 1 s old is settled; it may hide a change in the same second")
	}
	if s := (dirStamp{mtime: whole - int64(coarseRacyMargin), ctime: whole - int64(coarseRacyMargin)}); !s.settled(now) {
		t.Error("a whole-second stamp older than the coarse margin is not settled")
	}
}
