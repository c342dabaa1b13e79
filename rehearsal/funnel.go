package rehearsal

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/flashsale/flashsale"
)

// The funnel as the shoppers went through it: each shopper reaches some
// stage (arrived, admitted, reserved, bought) and ends there for one
// reason. Counting each shopper once, where it ended, makes the report's
// funnel add up: the shoppers at a stage are those of the stage before,
// less those who ended there.

// stage is how far down the funnel a shopper got.
type stage uint8

const (
	stageNone     stage = iota // never arrived: the sale closed first
	stageArrived               // asked for a place
	stageAdmitted              // handed an admission at least once
	stageReserved              // held units
	stageBought                // paid for them
	nStages
)

var stageNames = [nStages]string{"shoppers", "arrived", "admitted", "reserved", "bought"}

// ending is why a shopper's part ended.
type ending uint8

const (
	endBought      ending = iota
	endPayFailed          // reserved, payment failed: cancelled
	endWalkedAway         // reserved and walked away: the hold expired
	endPaidLate           // paid after the hold expired
	endGaveUp             // patience ran out while waiting
	endUnlikely           // left when told its odds were unlikely
	endSoldOut            // told sold out (and left, or it was final)
	endNotSelected        // a lottery that did not select it
	endClosed             // the sale closed first
	endRefused            // turned away: not eligible, a limit, an invalid ticket...
	endErrors             // gave up after the server kept saying "later"
	nEndings
)

var endingNames = [nEndings]string{
	endBought:      "bought",
	endPayFailed:   "payment failed, hold cancelled",
	endWalkedAway:  "walked away, hold expired",
	endPaidLate:    "paid after the hold expired",
	endGaveUp:      "left the queue (patience ran out)",
	endUnlikely:    "left when told their odds were unlikely",
	endSoldOut:     "told sold out",
	endNotSelected: "not selected by the lottery",
	endClosed:      "the sale closed first",
	endRefused:     "turned away",
	endErrors:      "gave up after repeated errors or busy answers",
}

// endingOf is the ending of a shopper whose part the answer with code
// ended.
func endingOf(code string) ending {
	switch code {
	case string(flashsale.CodeSoldOut):
		return endSoldOut
	case string(flashsale.CodeNotSelected):
		return endNotSelected
	case string(flashsale.CodeClosed):
		return endClosed
	case "transport", "overloaded", string(flashsale.CodeUnavailable), string(flashsale.CodeSalePaused),
		string(flashsale.CodeRateLimited), "":
		return endErrors
	}
	return endRefused
}

// endings counts where and why the shoppers ended. Safe for concurrent
// use without a lock but for the refusals' codes.
type endings struct {
	n [nStages][nEndings]atomic.Int64

	mu    sync.Mutex
	codes map[stage]map[string]int64 // refusals by code
}

func (s *stats) end(at stage, why ending, code string) {
	s.ended.n[at][why].Add(1)
	if why != endRefused {
		return
	}
	s.ended.mu.Lock()
	defer s.ended.mu.Unlock()
	if s.ended.codes == nil {
		s.ended.codes = map[stage]map[string]int64{}
	}
	if s.ended.codes[at] == nil {
		s.ended.codes[at] = map[string]int64{}
	}
	s.ended.codes[at][code]++
}

// FunnelRow is one row of the report's funnel: a stage the shoppers
// reached (Stage true), or the shoppers who ended at the stage above it,
// and why.
type FunnelRow struct {
	Name  string
	Count int64
	// Stage says the row is a stage of the funnel: the shoppers who got
	// this far; Final that it counts shoppers who ended there. Each
	// shopper is in exactly one Final row: the endings between the
	// stages, and the last stage, bought.
	Stage bool
	Final bool
	// Share is Count as a share of the crowd.
	Share float64
}

// funnel builds the rows: each stage, then who ended there and why.
func (s *stats) funnel(crowd int64) []FunnelRow {
	var ended [nStages]int64
	for st := range nStages {
		for why := range nEndings {
			ended[st] += s.ended.n[st][why].Load()
		}
	}
	share := func(n int64) float64 { return float64(n) / float64(max(crowd, 1)) }
	var rows []FunnelRow
	at := crowd
	for st := range nStages {
		if st > stageNone {
			rows = append(rows, FunnelRow{Name: stageNames[st], Count: at, Stage: true, Final: st == stageBought, Share: share(at)})
		}
		type line struct {
			name string
			n    int64
		}
		var lines []line
		for why := range nEndings {
			n := s.ended.n[st][why].Load()
			if n == 0 || why == endBought {
				continue // bought: the last stage's row
			}
			if why == endRefused {
				s.ended.mu.Lock()
				codes := s.ended.codes[st]
				keys := make([]string, 0, len(codes))
				for c := range codes {
					keys = append(keys, c)
				}
				sort.Strings(keys)
				for _, c := range keys {
					lines = append(lines, line{fmt.Sprintf("turned away: %s", c), codes[c]})
				}
				s.ended.mu.Unlock()
				continue
			}
			name := endingNames[why]
			if st == stageNone && why == endClosed {
				name = "never arrived: the sale closed first"
			}
			if st == stageAdmitted && why == endSoldOut {
				name = "told sold out before they could reserve"
			}
			lines = append(lines, line{name, n})
		}
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].n > lines[j].n })
		for _, l := range lines {
			rows = append(rows, FunnelRow{Name: l.name, Count: l.n, Final: true, Share: share(l.n)})
		}
		at -= ended[st]
	}
	return rows
}

// FunnelEnds sums the funnel's final rows: every shopper once, so the
// crowd.
func FunnelEnds(rows []FunnelRow) int64 {
	var n int64
	for _, r := range rows {
		if r.Final {
			n += r.Count
		}
	}
	return n
}
