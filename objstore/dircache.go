package objstore

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/lance-context/lance-context/internal/lru"
)

// Listings of local directories are reused while the directory is
// unchanged. Every read of a table lists its _versions/ directory and a
// shard's manifest/ directory, and on local disk a listing reads every
// name (about 0.4 us a name in getdents): 40 manifests cost a twelfth of a
// get, and a table that commits every few seconds gathers thousands.
// A stat of the directory costs ~1.6 us whatever its size.
//
// A listing is reused only while stat returns the stamp (device, inode,
// mtime, ctime) it returned just before that listing was read, and only if
// that stamp was older than a margin when the listing began. Adding,
// removing or renaming a name sets the directory's mtime and ctime to the
// time of the change, so a change after the listing began carries a later
// time than the stamp and the next stat sees it; the margin covers
// timestamps coarser than the clock (Git's index trusts a "racily clean"
// file by the same rule). Linux stamps a change with its coarse clock (a
// tick, at most 10 ms, behind): dirRacyMargin covers that on file systems
// with sub-second times; a stamp with no sub-second part may come from a
// file system that keeps whole seconds (or FAT's two), and gets
// coarseRacyMargin. Other systems than Linux list every time.
var dirRacyMargin = 100 * time.Millisecond

const coarseRacyMargin = 3 * time.Second

// dirKey names a directory's listing in the process-wide cache
// (internal/lru), which bounds it with the other metadata by bytes.
type dirKey struct{ path string }

type dirListing struct {
	stamp dirStamp
	ents  []os.DirEntry
}

// dirReads counts the listings read from disk (for tests).
var dirReads atomic.Int64

// readDir is os.ReadDir, answered from the last listing of dir while dir
// is unchanged. Callers must not modify the returned slice.
func readDir(dir string) ([]os.DirEntry, error) {
	began := time.Now()
	st, stamped, missing := statDir(dir)
	if missing {
		return nil, &os.PathError{Op: "open", Path: dir, Err: os.ErrNotExist}
	}
	if stamped {
		if v, ok := lru.Shared().Get(dirKey{dir}); ok && v.(dirListing).stamp == st {
			return v.(dirListing).ents, nil
		}
	}
	dirReads.Add(1)
	ents, err := os.ReadDir(dir)
	if err != nil || !stamped || !st.settled(began) {
		return ents, err
	}
	n := int64(64 * len(ents)) // an entry and its name, about
	for _, e := range ents {
		n += int64(len(e.Name()))
	}
	lru.Shared().Put(dirKey{dir}, dirListing{st, ents}, n)
	return ents, nil
}
