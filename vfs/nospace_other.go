//go:build !unix

package vfs

import (
	"errors"
	"syscall"
)

func isNoSpaceErrno(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// errNoSpaceOS is the operating system's error for a full file system.
var errNoSpaceOS error = syscall.ENOSPC
