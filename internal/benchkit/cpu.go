package benchkit

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system, every thread) this process
// has used so far; a measurement's cost is the difference of two reads.
// It is 0 where getrusage fails.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
