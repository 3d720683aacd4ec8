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
