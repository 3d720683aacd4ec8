//go:build unix

package index

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used (user and system), or
// -1 where it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
