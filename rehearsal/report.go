package rehearsal

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// storeFigures is the sale as the record and the gate tell it.
type storeFigures struct {
	Initial, Counter, Pending, Confirmed, Expired, Cancelled, Voided int64
	// BotUnits is the units confirmed to bot accounts, from the orders.
	BotUnits int64
	// HeldBots and HeldPeople are the shoppers the waiting room held as
	// automation (in process): people among them are false positives.
	HeldBots, HeldPeople int64
	HeldKnown            bool
	// InvitesIssued, InvitesRedeemed and InvitesWon count the sale's
	// invite codes: issued, redeemed, and redeemed by an account that
	// holds or bought units (--invited).
	InvitesIssued, InvitesRedeemed, InvitesWon int64
	// RecordCalls counts every call to the record in the run (in process);
	// BackgroundRecordCalls those of the background services.
	RecordCalls, BackgroundRecordCalls int64
}

// Report is the rehearsal's outcome.
type Report struct {
	Mode       string
	Compressed bool
	// SaleTime is the sale's duration by its own clock; Wall the
	// rehearsal's.
	SaleTime time.Duration
	Wall     time.Duration
	Config   Config
	SKU      string

	Arrived, Admitted, Challenged, Reserved, Confirmed, PaidLate, Cancelled, Abandoned, GaveUp int64
	// Sold is the record's confirmed and pending units; Oversold how far
	// counter + confirmed + pending exceeds the stock, and how far the
	// units sold exceed it (both must be 0).
	Store    storeFigures
	Oversold int64
	// Rejections counts the error answers by route and code; States the
	// status answers by state.
	Rejections []Count
	States     []Count
	Routes     []RouteFigures
	// BotPopulationShare and BotUnitShare: the bots' share of the crowd
	// and of the units sold.
	BotPopulationShare float64
	BotUnitShare       float64
	// SoldOutAnnounced is the delay from the counter reaching zero to the
	// first status answered sold_out; StalePolls the polls answered as if
	// units remained more than a second after the counter reached zero.
	SoldOutAnnounced time.Duration
	SoldOutSeen      bool
	// SoldOutAt is when the counter first reached zero, in seconds since
	// the open by the sale's clock (with SoldOutSeen).
	SoldOutAt float64
	// Funnel is where each shopper ended: its Final rows add up to the
	// crowd (FunnelEnds).
	Funnel     []FunnelRow
	StalePolls int64
	// PeakMemory is the process's peak resident memory.
	PeakMemory      uint64
	EventsPublished int64
	Timeline        []Point
	// CrowdGone is the stock when the last shopper was done, nil if the
	// driver could not read it: units unsold at the end that were held
	// then came back after everyone had left, and were never offered.
	CrowdGone     *StockAt
	Quiet         *QuietFigures
	Warnings      int
	FirstWarnings []string
}

// StockAt is the counter and the units held at one moment.
type StockAt struct{ Counter, Pending int64 }

// RouteFigures is one route's requests, latency and record calls.
type RouteFigures struct {
	Route              string
	Requests, Rejected int64
	P50, P90, P99, Max time.Duration
	// RecordPerRequest is the mean record calls per request;
	// RecordPerRejected per rejected request (the funnel's promise: 0).
	RecordPerRequest, RecordPerRejected float64
	RecordKnown                         bool
}

// Point is the sale at one moment of the timeline.
type Point struct {
	At float64 // seconds since the open, by the sale's clock
	// UnitsLeft is the counter; Pending, in process, the units taken
	// (held or sold) by the gate's count, over HTTP the units held.
	UnitsLeft, Pending    int64
	AdmittedUpTo          int64
	Admissions            float64 // places admitted a second
	Polls, Reserves       float64 // requests a second
	StatusP99, ReserveP99 float64 // milliseconds, in the window
	Answered              int64
}

// unsold explains the units still in stock once the sale settled (no hold
// pending), or is empty if there are none: whether the crowd left them
// behind, or they came back from holds after the last shopper had gone
// and so were never offered to anyone. A long hold can outlive a crowd
// that gives up on a sold-out sale; exactly all sold is not a promise the
// sale can keep then.
func unsold(rep *Report) string {
	s, g := rep.Store, rep.CrowdGone
	if s.Counter <= 0 || s.Pending > 0 {
		return ""
	}
	n := thousands(s.Counter)
	switch {
	case g == nil:
		return fmt.Sprintf("unsold: %s", n)
	case g.Counter <= 0:
		return fmt.Sprintf("unsold: %s, returned by holds that ended after the last shopper had left (none in stock then, %s held)",
			n, thousands(g.Pending))
	case g.Counter >= s.Counter:
		return fmt.Sprintf("unsold: %s, in stock when the last shopper left (%s then, %s held)", n, thousands(g.Counter), thousands(g.Pending))
	}
	return fmt.Sprintf("unsold: %s; %s in stock when the last shopper left, the rest returned by holds that ended after (%s held then)",
		n, thousands(g.Counter), thousands(g.Pending))
}

// report gathers the figures once the sale is over.
func (r *run) report(ctx context.Context, figures func(context.Context) (storeFigures, error), wall, saleTime time.Duration) (*Report, error) {
	f, err := figures(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the sale's totals: %w", err)
	}
	s := r.stats
	rep := &Report{Config: r.cfg, SKU: r.sku, Wall: wall, SaleTime: saleTime, Store: f,
		Arrived: s.arrived.Load(), Admitted: s.admitted.Load(), Challenged: s.challenged.Load(),
		Reserved: s.reserved.Load(), Confirmed: s.confirmed.Load(), PaidLate: s.late.Load(),
		Cancelled: s.cancelled.Load(), Abandoned: s.abandoned.Load(), GaveUp: s.gaveUp.Load(),
		StalePolls: s.stalePolls.Load(), PeakMemory: peakMemory(), CrowdGone: r.crowdGone}
	rep.Oversold = max(0, f.Counter+f.Confirmed+f.Pending-f.Initial, f.Confirmed+f.Pending-f.Initial)
	s.mu.Lock()
	rep.Rejections = sortedCounts(s.codes)
	s.mu.Unlock()
	rep.States = sortedCounts(s.stateCounts())
	for rt := range nRoutes {
		n := s.lat[rt].count()
		if n == 0 {
			continue
		}
		h := &s.lat[rt]
		rf := RouteFigures{Route: rt.String(), Requests: n, Rejected: s.rejected[rt].Load(),
			P50: h.quantile(0.5), P90: h.quantile(0.9), P99: h.quantile(0.99), Max: h.quantile(1),
			RecordKnown: r.cfg.Target == ""}
		rf.RecordPerRequest = float64(s.records[rt].Load()) / float64(n)
		if rf.Rejected > 0 {
			rf.RecordPerRejected = float64(s.rejectedRecords[rt].Load()) / float64(rf.Rejected)
		}
		rep.Routes = append(rep.Routes, rf)
	}
	if r.cfg.Bots > 0 {
		bots := 0
		for i := range r.shoppers {
			if r.shoppers[i].bot {
				bots++
			}
		}
		rep.BotPopulationShare = float64(bots) / float64(len(r.shoppers))
		if f.Confirmed > 0 {
			rep.BotUnitShare = float64(f.BotUnits) / float64(f.Confirmed)
		}
	}
	if last, first := r.lastUnit.Load(), s.firstSoldOutPoll.Load(); last != 0 && first != 0 {
		rep.SoldOutSeen = true
		rep.SoldOutAnnounced = max(0, time.Duration(first-last))
		rep.SoldOutAt = time.Unix(0, last).Sub(r.opensAt).Seconds()
	}
	rep.Funnel = s.funnel(int64(len(r.shoppers)))
	return rep, nil
}

// Verdict says whether the rehearsal passed, and why (or why not): nothing
// oversold and the invariant exact by the record, every shopper accounted
// for once, and sold out announced within the second the contract allows.
func (rep *Report) Verdict() (pass bool, why string) {
	s := rep.Store
	var fails, oks []string
	if rep.Oversold > 0 {
		fails = append(fails, fmt.Sprintf("OVERSOLD by %s units", thousands(rep.Oversold)))
	} else {
		oks = append(oks, "nothing oversold")
	}
	if s.Counter+s.Confirmed+s.Pending != s.Initial {
		fails = append(fails, fmt.Sprintf("counter + confirmed + pending = %s, not the stock %s",
			thousands(s.Counter+s.Confirmed+s.Pending), thousands(s.Initial)))
	} else {
		oks = append(oks, "counter + confirmed + pending = stock")
	}
	crowd := int64(rep.Config.Users)
	if ends := FunnelEnds(rep.Funnel); ends != crowd {
		fails = append(fails, fmt.Sprintf("the funnel accounts for %s shoppers of %s", thousands(ends), thousands(crowd)))
	} else {
		oks = append(oks, fmt.Sprintf("all %s shoppers accounted for", thousands(crowd)))
	}
	switch {
	case rep.SoldOutSeen && rep.SoldOutAnnounced > time.Second:
		fails = append(fails, fmt.Sprintf("sold out announced %s after the last unit went (the contract: within 1 s)",
			rep.SoldOutAnnounced.Round(time.Millisecond)))
	case rep.StalePolls > 0:
		fails = append(fails, fmt.Sprintf("%s polls answered as if units remained more than 1 s after the last went",
			thousands(rep.StalePolls)))
	case rep.SoldOutSeen:
		oks = append(oks, "sold out announced within 1 s")
	}
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ")
	}
	return true, strings.Join(oks, ", ")
}

func isBot(user string) bool { return strings.HasPrefix(user, "bot-") }

// peakMemory is the process's peak resident set (VmHWM), or what the Go
// runtime took from the system where /proc is not there.
func peakMemory() uint64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Sys
}

// progress prints a live line every half second until the returned
// function is called. Its admissions a second are shoppers handed an
// admission per second of the sale's clock (saleNow), over the last
// second of it or the last line's span if longer (in process, half a
// second of wall time is many seconds of the sale's): the crowd's figure,
// not the queue's places, some of whose shoppers have left.
func (r *run) progress(unitsLeft func() int64, saleNow func() time.Time) func() {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		var seen []admittedAt
		for {
			select {
			case <-done:
				r.printProgress(seen, unitsLeft(), saleNow())
				fmt.Fprintln(r.cfg.Progress)
				return
			case <-t.C:
				seen = r.printProgress(seen, unitsLeft(), saleNow())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// admittedAt is the shoppers admitted so far at a moment of the sale.
type admittedAt struct {
	at time.Time
	n  int64
}

// admissionRate is the shoppers admitted a second between the newest
// sample at least a second older than the last and the last; 0 until
// there are two.
func admissionRate(seen []admittedAt) float64 {
	if len(seen) < 2 {
		return 0
	}
	last := seen[len(seen)-1]
	base := seen[0]
	for _, s := range seen[:len(seen)-1] {
		if last.at.Sub(s.at) >= time.Second {
			base = s
		}
	}
	dt := last.at.Sub(base.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(last.n-base.n) / dt
}

func (r *run) printProgress(seen []admittedAt, left int64, now time.Time) []admittedAt {
	seen = append(seen, admittedAt{now, r.stats.admitted.Load()})
	for len(seen) > 2 && seen[len(seen)-1].at.Sub(seen[1].at) >= time.Second {
		seen = seen[1:]
	}
	n := int64(len(r.shoppers))
	done := r.stats.done.Load()
	const width = 30
	filled := int(done * width / max(n, 1))
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	fmt.Fprintf(r.cfg.Progress, "\r[%s] %s · %s/%s shoppers done · %s units left · %s admitted/s · %s reserved   ",
		bar, saleClock(now.Sub(r.opensAt)), thousands(done), thousands(n), thousands(left),
		thousands(int64(math.Round(admissionRate(seen)))), thousands(r.stats.reserved.Load()))
	return seen
}

// saleClock is a moment of the sale relative to its open: "t-3s", "t+1m05s".
func saleClock(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return "t" + sign + d.Round(time.Second).String()
}

// thousands formats n with thin separators: 2,000,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// WriteText prints the funnel table and the figures around it.
func (rep *Report) WriteText(w io.Writer) {
	c := rep.Config
	fmt.Fprintf(w, "Rehearsal of sale %s: %s shoppers, %s units, fairness %s, bots %.0f%%\n", rep.SKU,
		thousands(int64(c.Users)), thousands(int64(c.Units)), c.Fairness, c.Bots*100)
	fmt.Fprintf(w, "Mode: %s\n", rep.Mode)
	var requests int64
	for _, rf := range rep.Routes {
		requests += rf.Requests
	}
	fmt.Fprintf(w, "Wall time %s, peak memory %s, %s shopper requests (%s a second of wall time)\n\n", rep.Wall.Round(10*time.Millisecond),
		bytesText(rep.PeakMemory), thousands(requests), thousands(int64(float64(requests)/max(rep.Wall.Seconds(), 1e-9))))

	rep.writeFunnel(w)
	if rep.Challenged > 0 {
		fmt.Fprintf(w, "  %s shoppers were asked for a proof of work before their admission\n", thousands(rep.Challenged))
	}
	if len(rep.Rejections) > 0 {
		fmt.Fprintln(w, "\nAnswers that said no (requests, not shoppers: a shopper may hear several)")
		for _, rc := range rep.Rejections {
			route, code, _ := strings.Cut(rc.Name, " ")
			fmt.Fprintf(w, "  %-10s %-26s %12s\n", route, code, thousands(rc.Count))
		}
	}

	s := rep.Store
	fmt.Fprintln(w, "\nThe record (checked, not the shoppers' own count)")
	fmt.Fprintf(w, "  initial %s · confirmed %s · pending %s · expired %s · cancelled %s · voided %s · counter %s\n",
		thousands(s.Initial), thousands(s.Confirmed), thousands(s.Pending), thousands(s.Expired),
		thousands(s.Cancelled), thousands(s.Voided), thousands(s.Counter))
	fmt.Fprintf(w, "  restocked (expired + cancelled + voided) %s · oversold %d", thousands(s.Expired+s.Cancelled+s.Voided), rep.Oversold)
	if s.Counter+s.Confirmed+s.Pending == s.Initial {
		fmt.Fprintln(w, " · counter + confirmed + pending == initial: holds")
	} else {
		fmt.Fprintf(w, " · counter + confirmed + pending = %d, initial %d: BROKEN\n", s.Counter+s.Confirmed+s.Pending, s.Initial)
	}
	if why := unsold(rep); why != "" {
		fmt.Fprintf(w, "  %s\n", why)
	}
	if c.Bots > 0 {
		fmt.Fprintf(w, "  bots: %.1f%% of the crowd, %.1f%% of the units sold (%d units)\n",
			rep.BotPopulationShare*100, rep.BotUnitShare*100, s.BotUnits)
	}
	if s.InvitesIssued > 0 {
		fmt.Fprintf(w, "  invited: %s codes issued, %s redeemed, %s won (their accounts hold or bought units)\n",
			thousands(s.InvitesIssued), thousands(s.InvitesRedeemed), thousands(s.InvitesWon))
	}
	if s.HeldKnown {
		fmt.Fprintf(w, "  held as automation: %s bots, %s people\n", thousands(s.HeldBots), thousands(s.HeldPeople))
	}
	if rep.SoldOutSeen {
		fmt.Fprintf(w, "  sold out announced %s after the counter reached zero (sale time); %d polls answered as if units remained more than 1 s after\n",
			rep.SoldOutAnnounced.Round(time.Millisecond), rep.StalePolls)
	}
	if rep.EventsPublished > 0 {
		fmt.Fprintf(w, "  events published through the outbox: %s\n", thousands(rep.EventsPublished))
	}

	fmt.Fprintln(w, "\nRoutes (latency is wall time per request)")
	fmt.Fprintf(w, "  %-10s %12s %12s %10s %10s %10s %10s %14s %14s\n", "route", "requests", "rejected", "p50", "p90", "p99", "max", "record/req", "record/reject")
	for _, rf := range rep.Routes {
		per, rej := "n/a", "n/a"
		if rf.RecordKnown {
			per, rej = fmt.Sprintf("%.2f", rf.RecordPerRequest), fmt.Sprintf("%.2f", rf.RecordPerRejected)
		}
		fmt.Fprintf(w, "  %-10s %12s %12s %10s %10s %10s %10s %14s %14s\n", rf.Route, thousands(rf.Requests), thousands(rf.Rejected),
			durText(rf.P50), durText(rf.P90), durText(rf.P99), durText(rf.Max), per, rej)
	}
	if s.RecordCalls > 0 {
		fmt.Fprintf(w, "  record calls in all: %s, of which %s by the background services\n",
			thousands(s.RecordCalls), thousands(s.BackgroundRecordCalls))
	}
	if q := rep.Quiet; q != nil {
		fmt.Fprintln(w, "\nIsolation: a quiet sale and a plain query beside the big one (p99, wall time)")
		if q.Note != "" {
			fmt.Fprintf(w, "  (%s)\n", q.Note)
		}
		fmt.Fprintf(w, "  %-28s %9s %9s %8s %10s %9s %8s %8s\n", "", "idle", "during", "ratio", "requests",
			"rush", "ratio", "requests")
		for _, l := range q.Lines {
			rush, ratio := "-", "-"
			if l.RushN > 0 {
				rush, ratio = durText(l.Rush), fmt.Sprintf("%.2fx", float64(l.Rush)/float64(max(l.Idle, 1)))
			}
			fmt.Fprintf(w, "  %-28s %9s %9s %7.2fx %10s %9s %8s %8s\n", l.Name, durText(l.Idle), durText(l.During),
				float64(l.During)/float64(max(l.Idle, 1)), thousands(l.N), rush, ratio, thousands(l.RushN))
		}
		if len(q.Lines) > 0 && q.Lines[0].RushN > 0 {
			fmt.Fprintln(w, "  (the rush: while the crowd arrived, the busiest seconds of the sale)")
		}
		fmt.Fprintf(w, "  quiet shoppers refused or not admitted at once: %s\n", thousands(q.Failed))
	}
	if rep.Warnings > 0 {
		fmt.Fprintf(w, "\nThe engine logged %d warnings or errors; the first: %s\n", rep.Warnings, strings.Join(rep.FirstWarnings, " | "))
	}
	pass, why := rep.Verdict()
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n%s: %s\n", verdict, why)
}

// writeFunnel prints the funnel: each stage, and under it the shoppers who
// ended there and why. The ending rows and the last stage add up to the
// crowd, each shopper in exactly one.
func (rep *Report) writeFunnel(w io.Writer) {
	crowd := int64(rep.Config.Users)
	fmt.Fprintf(w, "The funnel: where each of the %s shoppers ended\n", thousands(crowd))
	for _, r := range rep.Funnel {
		if r.Stage {
			fmt.Fprintf(w, "  %-46s %12s %6.1f%%\n", r.Name, thousands(r.Count), r.Share*100)
			continue
		}
		fmt.Fprintf(w, "    - %-42s %12s\n", r.Name, thousands(r.Count))
	}
	fmt.Fprintf(w, "  %-46s %12s  (the rows marked -, and bought: each shopper once)\n", "= shoppers", thousands(FunnelEnds(rep.Funnel)))
}

func durText(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func bytesText(n uint64) string {
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
