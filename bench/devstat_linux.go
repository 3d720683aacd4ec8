package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// deviceWrites returns a function that reads the bytes written so far to
// the block device holding dir (all processes), or nil when dir is not on
// one (tmpfs, an object store).
func deviceWrites(dir string) func() int64 {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil
	}
	path := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev))
	read := func() int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			return -1
		}
		f := strings.Fields(string(b))
		if len(f) < 7 {
			return -1
		}
		sectors, err := strconv.ParseInt(f[6], 10, 64) // sectors written, of 512 bytes
		if err != nil {
			return -1
		}
		return sectors * 512
	}
	if read() < 0 {
		return nil
	}
	return read
}
