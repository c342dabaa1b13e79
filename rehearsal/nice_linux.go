package rehearsal

import (
	"os"
	"strconv"
	"syscall"
)

// lowerPriority gives every thread of this process the niceness n. On
// Linux a niceness belongs to a thread, not to the process, and a new
// thread takes its creator's: once every thread has n, so do the threads
// the Go runtime starts later. The list is read twice, for a thread
// started while the first pass ran.
func lowerPriority(n int) error {
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && err != syscall.ESRCH {
				return err
			}
		}
	}
	return nil
}
