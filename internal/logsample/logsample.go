// Package logsample keeps a failing store from flooding the log: when a
// store fails it fails for every request, and a line per request would
// bury everything else. A Sampler lets one line per key through each
// second and counts the others, so the line that is written says how many
// were left out before it.
//
// A Sampler is per process: each server of a fleet samples its own log, so
// a store that fails for every server is one line a second from each.
package logsample

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sampler lets one line per key through each second, and counts the
// others. It is safe for concurrent use; the zero value is ready. Keys
// must be comparable, and few (a logger and a code, say): the Sampler
// keeps one small entry per key for as long as it lives.
type Sampler struct {
	m sync.Map // key -> *entry
}

type entry struct {
	second     atomic.Int64 // the Unix second of the last line written
	suppressed atomic.Int64 // lines left out since
}

// Allow reports whether a line of key may be written at now, and how many
// lines of key were left out since the last one written.
func (s *Sampler) Allow(key any, now time.Time) (suppressed int64, ok bool) {
	v, found := s.m.Load(key)
	if !found {
		v, _ = s.m.LoadOrStore(key, &entry{})
	}
	e := v.(*entry)
	sec := now.Unix()
	last := e.second.Load()
	if last != sec && e.second.CompareAndSwap(last, sec) {
		return e.suppressed.Swap(0), true
	}
	e.suppressed.Add(1)
	return 0, false
}
