//go:build !linux

package rehearsal

import "errors"

// lowerPriority is not available here: the crowd keeps its priority, and
// the report says so.
func lowerPriority(int) error { return errors.New("not supported on this system") }
