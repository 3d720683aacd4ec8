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

// statDir stamps dir. missing reports that dir does not exist: the
// listing is then known to be empty without opening it (a read lists the
// WAL's directories of a store that has none, every time).
func statDir(dir string) (st dirStamp, ok, missing bool) {
	var s unix.Stat_t
	if err := unix.Stat(dir, &s); err != nil {
		return dirStamp{}, false, err == unix.ENOENT
	}
	return dirStamp{dev: uint64(s.Dev), ino: s.Ino, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano()}, true, false
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
