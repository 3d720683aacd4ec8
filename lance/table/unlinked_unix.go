//go:build unix

package table

import (
	"os"
	"syscall"
)

// unlinked reports whether f's file has no name left (it was deleted).
func unlinked(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
