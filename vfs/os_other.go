//go:build !linux

package vfs

import (
	"errors"
	"os"
)

func datasync(f *os.File) error { return f.Sync() }

func allocate(*os.File, int64, int64) error { return errors.ErrUnsupported }

func setDirect(*os.File, bool) error { return errors.ErrUnsupported }
