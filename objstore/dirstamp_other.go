//go:build !linux

package objstore

import "time"

type dirStamp struct{}

// statDir stamps nothing here: every listing is read (see readDir).
func statDir(string) (st dirStamp, ok, missing bool) { return dirStamp{}, false, false }

func (dirStamp) settled(time.Time) bool { return false }
