package objstore

import (
	"time"

	"golang.org/x/sys/unix"
)

// dirStamp identifies a directory's state: a change of its names changes
// mtime and ctime (see readDir).
type dirStamp struct {
	dev, ino     uint64
	mtime, ctime int64 // ns
}

func statDir(dir string) (dirStamp, bool) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return dirStamp{}, false
	}
	return dirStamp{dev: uint64(st.Dev), ino: st.Ino, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}

// settled reports whether the stamp's times are both older than the
// racy margin at t (see readDir).
func (s dirStamp) settled(t time.Time) bool {
	margin := dirRacyMargin
	if s.mtime%1e9 == 0 || s.ctime%1e9 == 0 {
		margin = coarseRacyMargin
	}
	n := t.Add(-margin).UnixNano()
	return s.mtime < n && s.ctime < n
}
