package rehearsal

import (
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// A route of the shopper protocol, for counts and latencies.
type route int

const (
	routeTicket route = iota
	routeStatus
	routeAdmission
	routeRegister
	routeReserve
	routeConfirm
	routeCancel
	nRoutes
)

var routeNames = [nRoutes]string{"ticket", "status", "admission", "register", "reserve", "confirm", "cancel"}

func (r route) String() string { return routeNames[r] }

// hist is a latency histogram with four buckets per power of two of
// nanoseconds (each bucket about 19% wide), safe for concurrent use without
// a lock.
type hist struct {
	b [4 * 64]atomic.Int64
}

func bucketOf(d time.Duration) int {
	ns := uint64(max(d, 1))
	l := bits.Len64(ns) // ns in [2^(l-1), 2^l)
	if l < 3 {
		return int(ns)
	}
	return (l-1)*4 + int((ns>>(l-3))&3)
}

// upper is the largest duration bucket i holds.
func upper(i int) time.Duration {
	if i < 8 {
		return time.Duration(i)
	}
	l := i/4 + 1
	sub := uint64(i % 4)
	lo := uint64(1)<<(l-1) | sub<<(l-3)
	return time.Duration(lo + uint64(1)<<(l-3) - 1)
}

func (h *hist) add(d time.Duration) { h.b[bucketOf(d)].Add(1) }

func (h *hist) count() int64 {
	var n int64
	for i := range h.b {
		n += h.b[i].Load()
	}
	return n
}

// quantile returns the q-quantile (0 < q <= 1), as its bucket's upper
// bound: never an underestimate by more than a bucket's width.
func (h *hist) quantile(q float64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.5)
	rank = min(max(rank, 1), n)
	var seen int64
	for i := range h.b {
		seen += h.b[i].Load()
		if seen >= rank {
			return upper(i)
		}
	}
	return upper(len(h.b) - 1)
}

// window is what happened in one interval of the timeline: the latencies
// of the calls answered in it.
type window struct {
	lat [nRoutes]hist
}

// stats is everything the rehearsal counts while it runs. Safe for
// concurrent use.
//
// Every answer costs one atomic add (its latency's bucket): the calls of a
// route are its histogram's count, and a timeline window is the difference
// of the histograms at its two ends, so the workers share as few cache
// lines as they can.
type stats struct {
	rejected [nRoutes]atomic.Int64
	lat      [nRoutes]hist
	// records is the record calls made by requests of each route;
	// rejectedRecords those made by requests that were rejected.
	records         [nRoutes]atomic.Int64
	rejectedRecords [nRoutes]atomic.Int64

	mu    sync.Mutex
	codes map[string]int64 // "route code" → answers
	// states counts status answers by state: known counts the contract's,
	// states any other.
	states map[string]int64
	known  [len(knownStates)]atomic.Int64

	arrived, done   atomic.Int64
	admitted        atomic.Int64 // shoppers handed an admission at least once
	challenged      atomic.Int64 // shoppers asked for a proof of work at least once
	reserved        atomic.Int64 // reserve answered 201 (first answers, not replays)
	confirmed       atomic.Int64
	cancelled       atomic.Int64 // payment failed: the shopper cancelled
	late            atomic.Int64 // paid after the hold expired
	abandoned       atomic.Int64 // reserved and walked away: the hold expires
	gaveUp          atomic.Int64 // left the queue before the end
	botsConfirmed   atomic.Int64
	humansConfirmed atomic.Int64
	stalePolls      atomic.Int64 // answered as if units remained well after the last went
	// ended counts the shoppers by where and why they ended.
	ended            endings
	firstSoldOutPoll atomic.Int64 // unix nanos of the first status answered sold_out

	// seen is the histograms at the end of the last window (swap); guarded
	// by mu.
	seen [nRoutes][len(hist{}.b)]int64
}

func newStats() *stats {
	return &stats{codes: map[string]int64{}, states: map[string]int64{}}
}

// record counts one answer of a route.
func (s *stats) record(r route, d time.Duration, code string, records int) {
	s.lat[r].add(d)
	if records > 0 {
		s.records[r].Add(int64(records))
	}
	if code == "" {
		return
	}
	s.rejected[r].Add(1)
	if records > 0 {
		s.rejectedRecords[r].Add(int64(records))
	}
	s.mu.Lock()
	s.codes[routeNames[r]+" "+code]++
	s.mu.Unlock()
}

// knownStates are the status answers of the contract, counted without a
// lock: every poll counts one.
var knownStates = [...]string{"scheduled", "waiting", "admitted", "challenge", "sold_out", "paused", "not_selected", "closed"}

func (s *stats) state(state string) {
	for i, k := range knownStates {
		if k == state {
			s.known[i].Add(1)
			return
		}
	}
	s.mu.Lock()
	s.states[state]++
	s.mu.Unlock()
}

// stateCounts returns every state's count.
func (s *stats) stateCounts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.states)+len(knownStates))
	for k, v := range s.states {
		out[k] = v
	}
	for i, k := range knownStates {
		if n := s.known[i].Load(); n > 0 {
			out[k] += n
		}
	}
	return out
}

// swap starts a new timeline window and returns the one that ended.
func (s *stats) swap() *window {
	w := &window{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.lat {
		for i := range s.lat[r].b {
			n := s.lat[r].b[i].Load()
			w.lat[r].b[i].Store(n - s.seen[r][i])
			s.seen[r][i] = n
		}
	}
	return w
}

// Count is one figure of a table: a name and how many.
type Count struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

func sortedCounts(m map[string]int64) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out
}
