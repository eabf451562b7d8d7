//go:build unix

package planner

import (
	"syscall"
	"time"
)

// processCPU is the process's user and system time so far (the garbage
// collector's included), as hack/measure counts a tick's CPU.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
