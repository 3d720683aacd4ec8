package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to the
// device without waiting for it. A large file written with no flush until
// its end would otherwise reach the device in one burst at that flush,
// and small flushes of other files (the WAL's) would wait behind it.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
