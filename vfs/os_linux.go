package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and the metadata needed to read it back, not
// its timestamps: into a preallocated segment that is a data flush alone.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// allocate reserves f's blocks from offset from up to size (extending the
// file) without writing them, or returns errors.ErrUnsupported where the
// filesystem cannot.
func allocate(f *os.File, from, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, from, size-from)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return errors.ErrUnsupported
		}
		return err
	}
}

// setDirect turns direct IO (O_DIRECT) on f on or off: its writes then go
// from the caller's buffer to the device, not through the page cache.
// errors.ErrUnsupported where the file system refuses it.
func setDirect(f *os.File, on bool) error {
	fd := f.Fd()
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		fl |= unix.O_DIRECT
	} else {
		fl &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, fl)
	if errors.Is(err, unix.EINVAL) {
		return errors.ErrUnsupported
	}
	return err
}
