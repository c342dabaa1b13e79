// Package rehearsal runs a whole flash sale with synthetic shoppers who
// follow the real client protocol (ticket, jittered polling, the proof of
// work, reserve, confirm), some of them paying late, failing payment or
// walking away so that holds expire, and some of them bots. It runs in
// process on the embedded default, with time compressed by an injected
// clock, or against a running server over HTTP, and reports the funnel:
// what each layer turned away, what was sold, and that nothing was
// oversold, checked against the record.
//
// Overselling is neither prevented nor caused here: the rehearsal counts it,
// from the record, and fails a run that oversold.
package rehearsal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/challenge"
)

// Config describes the sale to rehearse and its crowd.
type Config struct {
	// Users shoppers arrive for Units units.
	Users int
	Units int
	// Target, when set, is the base URL of a running server; else the
	// sale runs in process.
	Target string
	// Edge, when set with Target, is the base URL of an edge (serve --role
	// edge): the waiting room's routes (ticket, status, admission,
	// register) go there, the purchase path and the operator's to Target,
	// as a deployment with the waiting room at its edges sends them.
	Edge string
	// AdminToken creates the sale and reads its figures on Target.
	AdminToken string
	// UserJWTSecret signs the shoppers' JWTs on Target (default: the
	// development key, which a server without --user-jwt-secret accepts).
	UserJWTSecret string
	// InstrumentClaim is the JWT claim the shoppers' cards go in on Target:
	// the target's --instrument-claim (default pmf). The rehearsal is the
	// store's identity service, so its shoppers' JWTs vouch for their
	// cards, as the server counts them without trusting the body's.
	InstrumentClaim string
	// Concurrency bounds the requests in flight against Target (default 256).
	Concurrency int

	// Bots is the share of the crowd that is automation; PayFail, Abandon
	// and PayLate the shares of winners whose payment fails, who walk away
	// from their hold, and who pay after it expired.
	Bots    float64
	PayFail float64
	Abandon float64
	PayLate float64
	// BotsPerCard is how many bot accounts share one payment instrument
	// (default 10).
	BotsPerCard int
	// Invited is how many people of the crowd (never bots) hold an invite
	// code the operator issued for the sale: they redeem it (POST
	// /sale/{sku}/redeem) instead of taking a ticket, and are admitted
	// ahead of the line.
	Invited int

	// The sale: fairness policy (default fifo), hold (default 60s), the
	// admission ceiling (default a quarter of the units a second, at least
	// 50), the proof of work's base difficulty (default 8 bits; 0 for
	// none) and the minimum account age (default 72h).
	Fairness           flashsale.Fairness
	Hold               time.Duration
	AdmissionPerSecond int
	ChallengeBits      int
	MinAccountAge      time.Duration
	// Arrival is the window the crowd arrives in, its first 30% before
	// the open (default 10s).
	Arrival time.Duration

	// In process: the engine's store and gate (empty: SQLite in a
	// temporary directory, the in-process gate), and how many goroutines
	// run the shoppers (default 2 per CPU).
	DataDir     string
	DatabaseURL string
	RedisURL    string
	Workers     int

	// Quiet runs a second, quiet sale beside the big one, and a plain
	// query against PlainQueryURL (a postgres:// URL; default DatabaseURL)
	// when there is one, and reports their latency against an idle
	// baseline measured before the big sale.
	Quiet         bool
	PlainQueryURL string
	// ProbeCommand, against a target, runs the quiet probe as a child
	// process: the command (argv) to which the quiet sale's SKU is
	// appended, which must run Probe; ProbeEnv is added to its
	// environment (secrets go there, never in argv). Empty: the probe runs
	// in this process, beside the crowd. CrowdNice, when above zero, is
	// the niceness the rehearsal gives itself once the child has its idle
	// baseline, so that the crowd takes only the CPU the server leaves.
	ProbeCommand []string
	ProbeEnv     []string
	CrowdNice    int

	// Seed makes the crowd reproducible (default: random).
	Seed uint64
	// Progress, when set, receives a live progress line.
	Progress io.Writer
	// HeapProfile, when set, receives a heap profile taken in process
	// once the whole crowd has arrived, when the most is held.
	HeapProfile io.Writer
}

func (c *Config) defaults() error {
	switch {
	case c.Users <= 0:
		return errors.New("--users must be positive")
	case c.Units <= 0:
		return errors.New("--units must be positive")
	case c.Invited < 0 || c.Invited > c.Users:
		return errors.New("--invited must be from 0 to --users")
	case c.Bots < 0 || c.Bots > 1 || c.PayFail < 0 || c.Abandon < 0 || c.PayLate < 0 || c.PayFail+c.Abandon+c.PayLate > 1:
		return errors.New("--bots, --pay-fail, --abandon and --pay-late are shares from 0 to 1 (the last three together at most 1)")
	}
	if c.Fairness == "" {
		c.Fairness = flashsale.FairnessFIFO
	}
	switch c.Fairness {
	case flashsale.FairnessFIFO, flashsale.FairnessRandom, flashsale.FairnessLottery:
	default:
		return fmt.Errorf("--fairness must be fifo, random or lottery, not %q", c.Fairness)
	}
	if c.Hold <= 0 {
		c.Hold = 60 * time.Second
	}
	if c.Hold < time.Second {
		return errors.New("--hold must be at least 1s")
	}
	if c.Edge != "" && c.Target == "" {
		return errors.New("--edge needs --target, the edge's origin")
	}
	if c.AdmissionPerSecond <= 0 {
		c.AdmissionPerSecond = max(c.Units/4, 50)
	}
	if c.ChallengeBits < 0 || c.ChallengeBits > 24 {
		return errors.New("--challenge-bits must be from 0 to 24")
	}
	if c.Arrival <= 0 {
		c.Arrival = 10 * time.Second
	}
	if c.BotsPerCard <= 0 {
		c.BotsPerCard = 10
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.Workers <= 0 {
		c.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return nil
}

// Run rehearses the sale and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Target != "" {
		return runHTTP(ctx, cfg)
	}
	return runInProcess(ctx, cfg)
}

// The life of a shopper, one step at a time.
type phase uint8

const (
	phArrive phase = iota
	phTicket
	phPoll
	phAdmission
	phReserve
	phPay
	phDone
)

// What a winner does with the hold.
type fate uint8

const (
	fatePay fate = iota
	fateFail
	fateAbandon
	fateLate
)

// shopper is one synthetic shopper: kept small (32 bytes), since there
// are millions (its ticket is kept in run.tickets); what only the shoppers near the front need is in extra.
type shopper struct {
	ticket  ticketRef
	extra   *extra
	giveUp  int64 // unix nanos: a person's patience runs out
	phase   phase
	fate    fate
	bits    uint8 // the last proof of work asked: nonzero once asked
	attempt uint8 // reserve attempts: each a new idempotency key
	tries   uint8 // consecutive answers to come back later
	bot     bool
	reached stage // the furthest stage of the funnel the shopper got to
	warned  bool  // told sold out at least once
}

// extra is a shopper's state past the queue.
type extra struct {
	admission string
	salt      string
	resID     string
	jwt       string // over HTTP only
}

// x returns the shopper's extra state, made on first use.
func (sh *shopper) x() *extra {
	if sh.extra == nil {
		sh.extra = &extra{}
	}
	return sh.extra
}

// persona is who a shopper is, derived from its number.
type persona struct {
	user    string
	created time.Time
	card    string
}

// client speaks the shopper protocol: to the engine in process, or to a
// server over HTTP.
type client interface {
	register(ctx context.Context, who persona, sh *shopper) reply
	ticket(ctx context.Context, who persona, sh *shopper) reply
	// redeem redeems an invite code for a ticket ahead of the line.
	redeem(ctx context.Context, who persona, sh *shopper, code string) reply
	// status and admission carry the shopper's sign-in as the page does,
	// so that what the room counts towards the automation hold is the
	// shopper's own (a copy of a ticket holds no one).
	status(ctx context.Context, who persona, sh *shopper, ticket string) reply
	admission(ctx context.Context, who persona, sh *shopper, ticket, salt, nonce string) reply
	reserve(ctx context.Context, who persona, sh *shopper, key string) reply
	confirm(ctx context.Context, who persona, sh *shopper, payRef string) reply
	cancel(ctx context.Context, who persona, sh *shopper) reply
}

// reply is one answer, in the terms of the contract.
type reply struct {
	code       string // the error code; empty on success
	state      string // status: the state
	ticket     string // ticket, or a status's replacement ticket
	admission  string // an admission token
	position   int64
	chance     string
	salt       string
	bits       int
	final      bool
	id         string // reserve: the reservation
	retryAfter time.Duration
	records    int // calls to the record the request made; -1 unknown
}

// run is one rehearsal in progress, whichever way it is driven.
type run struct {
	cfg      Config
	sku      string
	opensAt  time.Time
	closesAt time.Time
	// regCloses is a lottery's end of registration.
	regCloses time.Time
	shoppers  []shopper
	tickets   *tickets
	client    client
	stats     *stats
	// zeroSince is the unix nanos since which the gate's counter has
	// been seen at zero (0: units left), kept by the sampler.
	zeroSince atomic.Int64
	lastUnit  atomic.Int64 // unix nanos the counter was first seen at zero
	// suspects, when set (over HTTP, where the counter is only sampled),
	// collects the polls that look stale for a check after the run;
	// otherwise (in process, where zeroSince is exact) they are counted as
	// stale at once.
	suspects *suspectPolls
	seed     uint64
	// crowdGone is the stock when the last shopper was done, set once by
	// the driver (nil until then).
	crowdGone *StockAt
	// invites are the invited shoppers' codes, by shopper; set before the
	// crowd arrives, read only after.
	invites map[int]string
}

func newRun(cfg Config, c client, opensAt time.Time) *run {
	r := &run{cfg: cfg, client: c, stats: newStats(), seed: cfg.Seed,
		sku: "rehearsal-" + strconv.FormatUint(cfg.Seed%1e9, 36), opensAt: opensAt}
	// Long enough for the crowd, the holds and the late payers; the
	// sale ends when nothing is left to sell well before.
	r.closesAt = opensAt.Add(cfg.Arrival + 3*cfg.Hold + 2*time.Minute)
	r.regCloses = opensAt.Add(-time.Second)
	r.shoppers = make([]shopper, cfg.Users)
	r.tickets = newTickets(cfg.Users)
	botEvery := 0.0
	if cfg.Bots > 0 {
		botEvery = 1 / cfg.Bots
	}
	for i := range r.shoppers {
		// Bots spread evenly through the crowd, so every share is exact.
		if botEvery > 0 && math.Floor(float64(i+1)/botEvery) > math.Floor(float64(i)/botEvery) {
			r.shoppers[i].bot = true
		}
	}
	return r
}

// invite hands the codes to the first people of the crowd, one each.
func (r *run) invite(codes []string) {
	r.invites = make(map[int]string, len(codes))
	for i := 0; i < len(r.shoppers) && len(r.invites) < len(codes); i++ {
		if !r.shoppers[i].bot {
			r.invites[i] = codes[len(r.invites)]
		}
	}
}

// mix is a stateless hash of the run's seed, a shopper and a purpose: each
// shopper's draws are reproducible and need no stored generator.
func (r *run) mix(i int, purpose uint64) uint64 {
	z := r.seed ^ uint64(i)*0x9e3779b97f4a7c15 ^ purpose*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniform is a reproducible number in [0, 1) for shopper i and purpose.
func (r *run) uniform(i int, purpose uint64) float64 {
	return float64(r.mix(i, purpose)>>11) / (1 << 53)
}

// Purposes of the shoppers' draws.
const (
	drawArrival uint64 = iota + 1
	drawAge
	drawPatience
	drawFate
	drawPay
	drawJitter
	drawThink
)

// who is shopper i's identity. A person's account is months or years old
// and its card its own; bots open many accounts, half of them in the last
// two days, and share cards.
func (r *run) who(i int) persona {
	sh := &r.shoppers[i]
	u := r.uniform(i, drawAge)
	if sh.bot {
		age := time.Duration(u * 2 * 24 * float64(time.Hour))
		if u >= 0.5 {
			age = 2*24*time.Hour + time.Duration((u-0.5)*2*58*24*float64(time.Hour))
		}
		return persona{user: "bot-" + strconv.Itoa(i), created: r.opensAt.Add(-age),
			card: "card-bots-" + strconv.Itoa(i/r.cfg.BotsPerCard)}
	}
	age := 30*24*time.Hour + time.Duration(u*3*365*24*float64(time.Hour))
	return persona{user: "user-" + strconv.Itoa(i), created: r.opensAt.Add(-age), card: "card-" + strconv.Itoa(i)}
}

// arrival is when shopper i first asks: people spread over the arrival
// window (30% of it before the open); bots at its very start, as early as
// anyone can.
func (r *run) arrival(i int) time.Time {
	first := r.opensAt.Add(-r.cfg.Arrival * 3 / 10)
	u := r.uniform(i, drawArrival)
	if r.shoppers[i].bot {
		return first.Add(time.Duration(u * float64(100*time.Millisecond)))
	}
	// Stratified: shopper i arrives in the i-th of Users equal parts of
	// the window, so the crowd is uniform and, in memory, in the order it
	// arrives (which keeps a poll's shopper near the previous one's).
	at := (float64(i) + u) / float64(len(r.shoppers))
	return first.Add(time.Duration(at * float64(r.cfg.Arrival)))
}

// after is when to come back, told retryAfter: a person waits what it is
// told plus a little (never sooner), a bot a tenth of it.
func (r *run) after(i int, sh *shopper, now time.Time, retryAfter time.Duration, n uint64) time.Time {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	if sh.bot {
		return now.Add(max(retryAfter/10, 100*time.Millisecond))
	}
	j := 1 + 0.3*r.uniform(i, drawJitter<<8|n)
	return now.Add(time.Duration(float64(retryAfter) * j))
}

// solveTime is how long the proof of work takes the shopper's device: a
// phone about 13 µs a hash, a bot's hardware ten times less.
func solveTime(bot bool, bits int) time.Duration {
	per := 13 * time.Microsecond
	if bot {
		per /= 10
	}
	return per * time.Duration(uint64(1)<<bits)
}

// finish ends shopper i's part, counting where and why it ended: every
// shopper ends exactly once, so the funnel's rows add up to the crowd.
// code is the answer that ended it, where one did.
func (r *run) finish(sh *shopper, why ending, code string) time.Time {
	sh.phase = phDone
	sh.ticket, sh.extra = ticketRef{}, nil
	r.stats.end(sh.reached, why, code)
	r.stats.done.Add(1)
	return time.Time{}
}

// finishOn ends the shopper on an answer's code.
func (r *run) finishOn(sh *shopper, code string) time.Time {
	return r.finish(sh, endingOf(code), code)
}

// call makes one request and counts it.
func (r *run) call(rt route, f func() reply) reply {
	start := time.Now()
	rep := f()
	r.stats.record(rt, time.Since(start), rep.code, rep.records)
	return rep
}

// step takes shopper i's next step at now and returns when to take the one
// after (zero: the shopper is done).
func (r *run) step(ctx context.Context, i int, now time.Time) time.Time {
	sh := &r.shoppers[i]
	if now.After(r.closesAt) {
		return r.finish(sh, endClosed, "")
	}
	if !sh.bot && sh.giveUp != 0 && now.UnixNano() > sh.giveUp && sh.phase == phPoll {
		r.stats.gaveUp.Add(1)
		return r.finish(sh, endGaveUp, "")
	}
	switch sh.phase {
	case phArrive:
		who := r.who(i)
		r.stats.arrived.Add(1)
		sh.reached = stageArrived
		// A person waits two to six minutes before giving up
		// on a queue that does not move, longer if told it might.
		patience := 2*time.Minute + time.Duration(r.uniform(i, drawPatience)*float64(4*time.Minute))
		sh.giveUp = now.Add(patience).UnixNano()
		if sh.bot {
			// Bots skip the queue where they can: straight to reserve.
			rep := r.call(routeReserve, func() reply { return r.client.reserve(ctx, who, sh, "skip-"+who.user) })
			if rep.code == "" { // no layer should let this through
				sh.x().resID, sh.fate = rep.id, fatePay
				sh.phase, sh.reached = phPay, stageReserved
				return now
			}
		}
		if r.cfg.Fairness == flashsale.FairnessLottery {
			rep := r.call(routeRegister, func() reply { return r.client.register(ctx, who, sh) })
			if rep.code != "" && rep.code != string(flashsale.CodeRegistrationClosed) {
				return r.finishOn(sh, rep.code)
			}
			sh.phase = phTicket
			// Registered: come back for the ticket once the draw has run.
			return r.regCloses.Add(time.Second + time.Duration(r.uniform(i, drawThink)*float64(2*time.Second)))
		}
		sh.phase = phTicket
		return r.step(ctx, i, now)
	case phTicket:
		who := r.who(i)
		rep := r.call(routeTicket, func() reply {
			if code, ok := r.invites[i]; ok {
				return r.client.redeem(ctx, who, sh, code)
			}
			return r.client.ticket(ctx, who, sh)
		})
		switch rep.code {
		case "":
			sh.ticket, sh.phase = r.tickets.put(rep.ticket), phPoll
			return r.after(i, sh, now, rep.retryAfter, 0)
		case string(flashsale.CodeRateLimited), string(flashsale.CodeSalePaused), string(flashsale.CodeUnavailable), "overloaded", "transport":
			return r.retry(i, sh, now, rep.retryAfter)
		}
		return r.finishOn(sh, rep.code) // sold out, closed, not eligible, not registered
	case phPoll:
		return r.poll(ctx, i, sh, now)
	case phAdmission:
		salt := sh.x().salt
		nonce := challenge.Solve(salt, int(sh.bits))
		who := r.who(i)
		rep := r.call(routeAdmission, func() reply { return r.client.admission(ctx, who, sh, r.tickets.get(sh.ticket), salt, nonce) })
		sh.x().salt = ""
		switch rep.code {
		case "":
			return r.admitted(i, sh, now, rep.admission)
		case string(flashsale.CodeNotSelected), string(flashsale.CodeClosed):
			return r.finishOn(sh, rep.code)
		}
		sh.phase = phPoll
		return r.after(i, sh, now, rep.retryAfter, 1)
	case phReserve:
		who := r.who(i)
		key := who.user + "-" + strconv.Itoa(int(sh.attempt))
		rep := r.call(routeReserve, func() reply { return r.client.reserve(ctx, who, sh, key) })
		switch rep.code {
		case "":
			sh.tries = 0
			r.stats.reserved.Add(1)
			sh.x().resID, sh.phase, sh.x().admission = rep.id, phPay, ""
			sh.reached = stageReserved
			return r.pay(i, sh, now)
		case string(flashsale.CodeRateLimited), string(flashsale.CodeSalePaused), string(flashsale.CodeUnavailable), "overloaded", "transport":
			// Come back with the same key: a repeat never reserves twice.
			return r.retry(i, sh, now, rep.retryAfter)
		case string(flashsale.CodeLimitReached), string(flashsale.CodeAdmissionUsed), string(flashsale.CodeNotEligible),
			string(flashsale.CodeClosed):
			// admission_used: the shopper's one turn is taken, and every
			// admission the queue hands it again is the same turn.
			return r.finishOn(sh, rep.code)
		}
		// Sold out (units may come back), or the admission expired or was
		// refused: back to the queue for a new one, with a new key.
		sh.attempt++
		sh.x().admission, sh.phase = "", phPoll
		if sh.attempt > 20 {
			return r.finishOn(sh, rep.code)
		}
		return r.after(i, sh, now, rep.retryAfter, 2)
	case phPay:
		return r.settle(ctx, i, sh, r.who(i), now)
	}
	return r.finish(sh, endErrors, "")
}

// retry comes back after a "later" answer, giving up after many.
func (r *run) retry(i int, sh *shopper, now time.Time, retryAfter time.Duration) time.Time {
	sh.tries++
	if sh.tries > 30 {
		r.stats.gaveUp.Add(1)
		return r.finish(sh, endErrors, "")
	}
	return r.after(i, sh, now, retryAfter, 3+uint64(sh.tries))
}

// poll asks for the shopper's status and acts on the answer.
func (r *run) poll(ctx context.Context, i int, sh *shopper, now time.Time) time.Time {
	who := r.who(i)
	rep := r.call(routeStatus, func() reply { return r.client.status(ctx, who, sh, r.tickets.get(sh.ticket)) })
	if rep.code != "" {
		if rep.code == string(flashsale.CodeInvalidToken) {
			return r.finishOn(sh, rep.code)
		}
		return r.retry(i, sh, now, rep.retryAfter)
	}
	r.stats.state(rep.state)
	if rep.ticket != "" {
		sh.ticket = r.tickets.put(rep.ticket)
	}
	switch rep.state {
	case "sold_out":
		r.stats.firstSoldOutPoll.CompareAndSwap(0, now.UnixNano())
	case "waiting", "admitted", "challenge":
		if zs := r.zeroSince.Load(); zs != 0 && now.UnixNano()-zs > int64(time.Second+sampleEvery) {
			if r.suspects != nil {
				r.suspects.add(now, time.Now())
			} else {
				r.stats.stalePolls.Add(1)
			}
		}
	}
	switch rep.state {
	case "admitted":
		return r.admitted(i, sh, now, rep.admission)
	case "challenge":
		if sh.bits == 0 {
			r.stats.challenged.Add(1)
		}
		sh.x().salt, sh.bits, sh.phase = rep.salt, uint8(rep.bits), phAdmission
		return now.Add(solveTime(sh.bot, rep.bits))
	case "sold_out":
		if rep.final {
			return r.finish(sh, endSoldOut, "")
		}
		if !sh.bot {
			// Told it is gone, for now: almost a third of people close
			// the page at once, and the rest leave about 3% a second
			// (half within 20 s), however often they poll.
			leave := 0.3
			if sh.warned {
				leave = 1 - math.Pow(0.97, rep.retryAfter.Seconds())
			}
			if r.uniform(i, drawPatience<<8|uint64(now.UnixMilli())) < leave {
				r.stats.gaveUp.Add(1)
				return r.finish(sh, endSoldOut, "")
			}
			sh.warned = true
		}
	case "not_selected", "closed":
		return r.finishOn(sh, rep.state)
	case "waiting":
		if !sh.bot && rep.chance == "unlikely" && r.uniform(i, drawPatience<<8|uint64(now.Unix())) < 0.05 {
			r.stats.gaveUp.Add(1)
			return r.finish(sh, endUnlikely, "")
		}
	}
	return r.after(i, sh, now, rep.retryAfter, 4+uint64(now.Unix()))
}

// admitted takes an admission token and goes to reserve after a moment's
// thought (a bot's is instant).
func (r *run) admitted(i int, sh *shopper, now time.Time, admission string) time.Time {
	if sh.reached < stageAdmitted {
		sh.reached = stageAdmitted
		r.stats.admitted.Add(1)
	}
	sh.x().admission, sh.phase, sh.tries = admission, phReserve, 0
	if sh.bot {
		return now.Add(20 * time.Millisecond)
	}
	return now.Add(300*time.Millisecond + time.Duration(r.uniform(i, drawThink)*float64(1700*time.Millisecond)))
}

// pay decides what the winner does with its hold and when.
func (r *run) pay(i int, sh *shopper, now time.Time) time.Time {
	u := r.uniform(i, drawFate)
	sh.fate = fatePay
	switch c := r.cfg; {
	case sh.bot:
	case u < c.PayFail:
		sh.fate = fateFail
	case u < c.PayFail+c.Abandon:
		sh.fate = fateAbandon
	case u < c.PayFail+c.Abandon+c.PayLate:
		sh.fate = fateLate
	}
	// Paying takes a few seconds to half a minute, always inside the hold
	// for those who pay in time.
	u = r.uniform(i, drawPay)
	paying := min(time.Duration(float64(r.cfg.Hold)*(0.1+0.6*u)), 2*time.Second+time.Duration(u*float64(20*time.Second)))
	switch sh.fate {
	case fateAbandon:
		r.stats.abandoned.Add(1)
		return r.finish(sh, endWalkedAway, "")
	case fateLate:
		return now.Add(r.cfg.Hold + paying)
	}
	if sh.bot {
		return now.Add(100 * time.Millisecond)
	}
	return now.Add(paying)
}

// settle confirms (or, when payment failed, cancels) the shopper's hold.
func (r *run) settle(ctx context.Context, i int, sh *shopper, who persona, now time.Time) time.Time {
	if sh.fate == fateFail {
		rep := r.call(routeCancel, func() reply { return r.client.cancel(ctx, who, sh) })
		if rep.code == "transport" || rep.code == "overloaded" || rep.code == string(flashsale.CodeUnavailable) {
			return r.retry(i, sh, now, rep.retryAfter)
		}
		r.stats.cancelled.Add(1)
		return r.finish(sh, endPayFailed, "")
	}
	rep := r.call(routeConfirm, func() reply { return r.client.confirm(ctx, who, sh, "pay-"+who.user) })
	switch rep.code {
	case "":
		r.stats.confirmed.Add(1)
		if sh.bot {
			r.stats.botsConfirmed.Add(1)
		} else {
			r.stats.humansConfirmed.Add(1)
		}
		sh.reached = stageBought
		return r.finish(sh, endBought, "")
	case string(flashsale.CodeReservationExpired):
		r.stats.late.Add(1)
		return r.finish(sh, endPaidLate, "")
	case "transport", "overloaded", string(flashsale.CodeUnavailable), string(flashsale.CodeRateLimited):
		return r.retry(i, sh, now, rep.retryAfter)
	}
	return r.finishOn(sh, rep.code)
}

// sampleEvery is the timeline's resolution.
const sampleEvery = 100 * time.Millisecond
