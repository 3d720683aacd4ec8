//go:build !linux

package objstore

import "time"

type dirStamp struct{}

// statDir stamps nothing here: every listing is read (see readDir).
func statDir(string) (dirStamp, bool) { return dirStamp{}, false }

func (dirStamp) settled(time.Time) bool { return false }
