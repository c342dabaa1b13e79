package rehearsal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	apiclient "github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/identity"
)

// httpClient speaks the shopper protocol to a server over HTTP, through
// the Go client, each shopper with its own JWT. Each request is sent once
// (WithMaxAttempts(1)): a repeat is the rehearsal's own step, after the
// Retry-After it was told, so that what it counts and times are the
// requests its crowd sent, and no repeat hides behind a figure.
type httpClient struct {
	api *apiclient.Client
	// room is where the waiting room's routes go: api, or an edge's.
	room   *apiclient.Client
	hc     *http.Client
	sku    string
	secret []byte
	// claim names the JWT claim the shoppers' cards go in: the target's
	// --instrument-claim ("" is its default, pmf).
	claim string
	now   func() time.Time
}

// apiClient is the client of the server at base (checked by targetBase)
// sending each request once through hc.
func apiClient(base string, hc *http.Client) *apiclient.Client {
	c, err := apiclient.New(base, apiclient.WithHTTPClient(hc), apiclient.WithMaxAttempts(1),
		apiclient.WithUserAgent("flashsale-rehearsal"))
	if err != nil {
		panic("rehearsal: a target targetBase let through: " + err.Error())
	}
	return c
}

func newHTTPClient(base, sku string, conns int, secret []byte) *httpClient {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
	}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	api := apiClient(base, hc)
	return &httpClient{api: api, room: api, hc: hc, sku: sku, secret: secret, now: time.Now}
}

// withRoom sends the waiting room's routes to room (an edge's base URL)
// when it is set, and returns c.
func (c *httpClient) withRoom(room string) *httpClient {
	if room != "" {
		c.room = apiClient(room, c.hc)
	}
	return c
}

// withClaim puts the shoppers' cards in the JWT claim named claim (""
// keeps pmf), and returns c.
func (c *httpClient) withClaim(claim string) *httpClient {
	c.claim = claim
	return c
}

// jwt returns the shopper's JWT, minted on first use. The rehearsal is the
// store's identity service: the token vouches for the shopper's card in
// its pmf claim, which is what the server's per-card limits count (a
// server does not trust the body's paymentFingerprint unless told to).
func (c *httpClient) jwt(who persona, sh *shopper) string {
	x := sh.x()
	if x.jwt == "" {
		now := c.now()
		var opts []identity.MintOption
		if who.card != "" {
			opts = append(opts, identity.MintInstrument(c.claim, who.card))
		}
		tok, err := identity.MintHS256(c.secret, who.user, now.Sub(who.created), now, 2*time.Hour, opts...)
		if err != nil {
			return ""
		}
		x.jwt = tok
	}
	return x.jwt
}

// failed is the reply of a request that failed: an answer's contract error
// code ("http_<status>" for an answer without one), or "transport" for a
// request that got no answer.
func failed(err error) reply {
	var e *apiclient.Error
	if !errors.As(err, &e) {
		return reply{code: "transport", retryAfter: time.Second, records: -1}
	}
	code := string(e.Code)
	if code == "" {
		code = "http_" + strconv.Itoa(e.Status)
	}
	return reply{code: code, retryAfter: e.RetryAfter, records: -1}
}

func (c *httpClient) register(ctx context.Context, who persona, sh *shopper) reply {
	if err := c.room.Shopper(c.jwt(who, sh)).Register(ctx, c.sku); err != nil {
		return failed(err)
	}
	return reply{records: -1}
}

func (c *httpClient) ticket(ctx context.Context, who persona, sh *shopper) reply {
	t, err := c.room.Shopper(c.jwt(who, sh)).Ticket(ctx, c.sku)
	if err != nil {
		return failed(err)
	}
	return reply{ticket: t.Token, position: t.Position, retryAfter: t.RetryAfter, records: -1}
}

// redeem goes to the origin: a code is bound in the record.
func (c *httpClient) redeem(ctx context.Context, who persona, sh *shopper, code string) reply {
	t, err := c.api.Shopper(c.jwt(who, sh)).Redeem(ctx, c.sku, code)
	if err != nil {
		return failed(err)
	}
	return reply{ticket: t.Token, position: t.Position, retryAfter: t.RetryAfter, records: -1}
}

// status polls as the page does: the ticket in X-Ticket (out of the URL,
// which logs keep) and the shopper's JWT, so the poll counts as its own.
func (c *httpClient) status(ctx context.Context, who persona, sh *shopper, ticket string) reply {
	st, err := c.room.Shopper(c.jwt(who, sh)).Status(ctx, c.sku, ticket)
	if err != nil {
		return failed(err)
	}
	rep := reply{state: string(st.State), ticket: st.Token, admission: st.AdmissionToken, position: st.Position,
		chance: st.Chance, final: st.Final, retryAfter: st.RetryAfter, records: -1}
	if st.Challenge != nil {
		rep.salt, rep.bits = st.Challenge.Salt, st.Challenge.DifficultyBits
	}
	return rep
}

func (c *httpClient) admission(ctx context.Context, who persona, sh *shopper, ticket, salt, nonce string) reply {
	a, err := c.room.Shopper(c.jwt(who, sh)).Admission(ctx, c.sku, apiclient.AdmissionRequest{Token: ticket, Salt: salt, Nonce: nonce})
	if err != nil {
		return failed(err)
	}
	return reply{admission: a.AdmissionToken, records: -1}
}

func (c *httpClient) reserve(ctx context.Context, who persona, sh *shopper, key string) reply {
	r, err := c.api.Shopper(c.jwt(who, sh)).Reserve(ctx, c.sku, apiclient.ReserveRequest{AdmissionToken: sh.x().admission,
		IdempotencyKey: key, Quantity: 1, PaymentFingerprint: who.card})
	if err != nil {
		return failed(err)
	}
	return reply{id: r.ReservationID, records: -1}
}

func (c *httpClient) confirm(ctx context.Context, who persona, sh *shopper, payRef string) reply {
	if _, err := c.api.Shopper(c.jwt(who, sh)).Confirm(ctx, sh.x().resID, payRef); err != nil {
		return failed(err)
	}
	return reply{records: -1}
}

func (c *httpClient) cancel(ctx context.Context, who persona, sh *shopper) reply {
	if _, err := c.api.Shopper(c.jwt(who, sh)).Cancel(ctx, sh.x().resID); err != nil {
		return failed(err)
	}
	return reply{records: -1}
}

// admin is the operator's side of the target, asked once a request as the
// shoppers are.
type admin struct{ *apiclient.Admin }

func newAdmin(base, token string) *admin {
	return &admin{apiClient(base, &http.Client{Timeout: 30 * time.Second}).Admin(token)}
}

// createSale creates the sale on the target, in the contract's terms.
func (a *admin) createSale(ctx context.Context, s *flashsale.Sale) error {
	_, err := a.CreateSale(ctx, apiclient.NewSale{SKU: s.SKU, Name: s.Name, InitialStock: s.InitialStock,
		OpensAt: s.OpensAt, ClosesAt: s.ClosesAt, HoldSeconds: s.HoldSeconds, PerUserLimit: s.PerUserLimit,
		Fairness: s.Fairness, AdmissionPerSecond: s.AdmissionPerSecond, MinAccountAgeSeconds: s.MinAccountAgeSeconds,
		ChallengeBits: s.ChallengeBits, RegistrationClosesAt: s.RegistrationClosesAt})
	return err
}

// shopperSecret is the key the rehearsal signs its shoppers' JWTs with.
func shopperSecret(cfg Config) []byte {
	if cfg.UserJWTSecret == "" {
		return []byte(identity.DevelopmentSecret)
	}
	return []byte(cfg.UserJWTSecret)
}

// targetBase checks the target's URL and returns it without a trailing
// slash.
func targetBase(target string) (string, error) {
	base := strings.TrimRight(target, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("--target must be an http:// or https:// URL")
	}
	return base, nil
}

// bases checks cfg's target and edge and returns their base URLs, room
// empty when there is no edge.
func bases(cfg Config) (base, room string, err error) {
	if base, err = targetBase(cfg.Target); err != nil {
		return "", "", err
	}
	if cfg.Edge != "" {
		if room, err = targetBase(cfg.Edge); err != nil {
			return "", "", errors.New("--edge must be an http:// or https:// URL")
		}
	}
	return base, room, nil
}

func runHTTP(ctx context.Context, cfg Config) (*Report, error) {
	secret := shopperSecret(cfg)
	base, room, err := bases(cfg)
	if err != nil {
		return nil, err
	}
	adm := newAdmin(base, cfg.AdminToken)
	var (
		quiet     *quietProbe
		probe     *probeChild
		quietNote string
	)
	if cfg.Quiet {
		qsku := "quiet-" + strconv.FormatUint(cfg.Seed%1e9, 36)
		now := time.Now().UTC()
		if err := adm.createSale(ctx, &flashsale.Sale{SKU: qsku, Name: "Quiet sale", InitialStock: 1000,
			OpensAt: now.Add(-time.Second), ClosesAt: now.Add(24 * time.Hour), HoldSeconds: 600, PerUserLimit: 1,
			Fairness: flashsale.FairnessFIFO}); err != nil {
			return nil, fmt.Errorf("create the quiet sale: %w", err)
		}
		if len(cfg.ProbeCommand) > 0 {
			if probe, err = startProbeChild(ctx, cfg.ProbeCommand, cfg.ProbeEnv, qsku); err != nil {
				return nil, err
			}
			defer probe.kill()
			quietNote = "the probe in a process of its own at normal priority"
			if cfg.CrowdNice > 0 {
				if err := lowerPriority(cfg.CrowdNice); err != nil {
					quietNote += fmt.Sprintf("; the crowd could not be given a lower priority (%v)", err)
				} else {
					quietNote += fmt.Sprintf(", the crowd at nice %d, standing in for shoppers on machines of their own", cfg.CrowdNice)
				}
			}
		} else if quiet, err = startQuiet(ctx, cfg, newHTTPClient(base, qsku, 8, secret).withClaim(cfg.InstrumentClaim).withRoom(room)); err != nil {
			return nil, err
		} else {
			quietNote = "the probe in the crowd's own process"
		}
	}
	// The crowd starts arriving a few seconds from now, by the target's
	// clock as far as this machine can tell: after the probe's idle
	// baseline, so that the arrivals due while it was taken do not all
	// come at once when the driver starts.
	opensAt := time.Now().UTC().Add(cfg.Arrival*3/10 + 3*time.Second).Truncate(time.Millisecond)
	c := newHTTPClient(base, "", cfg.Concurrency, secret).withClaim(cfg.InstrumentClaim).withRoom(room)
	r := newRun(cfg, c, opensAt)
	r.suspects = &suspectPolls{}
	c.sku = r.sku
	if err := adm.createSale(ctx, r.saleSpec()); err != nil {
		return nil, fmt.Errorf("create the sale: %w", err)
	}
	if cfg.Invited > 0 {
		var codes []string
		for len(codes) < cfg.Invited {
			batch, err := adm.IssueInvites(ctx, r.sku, min(cfg.Invited-len(codes), flashsale.MaxInvites))
			if err != nil {
				return nil, fmt.Errorf("issue the invites: %w", err)
			}
			codes = append(codes, batch...)
		}
		r.invite(codes)
	}
	// The probe counts its rounds while the crowd arrives apart as well:
	// the rush, the busiest seconds of the sale.
	rush := func(on bool) {
		if probe != nil {
			probe.rush(on)
		} else if quiet != nil {
			quiet.rush.Store(on)
		}
	}
	first := opensAt.Add(-cfg.Arrival * 3 / 10)
	rushes := time.AfterFunc(time.Until(first), func() { rush(true) })
	calms := time.AfterFunc(time.Until(first.Add(cfg.Arrival)), func() { rush(false) })
	d := &httpDriver{run: r, adm: adm}
	d.unitsLeft.Store(int64(cfg.Units))
	before, scraped := adm.scrape(ctx)
	wallStart := time.Now()
	stopProgress := r.progress(d.unitsLeft.Load, time.Now)
	err = d.drive(ctx)
	stopProgress()
	rushes.Stop()
	calms.Stop()
	wall := time.Since(wallStart)
	var quietFigures *QuietFigures
	if quiet != nil {
		quiet.stop()
		quietFigures = quiet.figures()
	}
	if probe != nil && err == nil {
		quietFigures, err = probe.finish()
	}
	if err != nil {
		return nil, err
	}
	if quietFigures != nil {
		quietFigures.Note = quietNote
	}
	rep, err := r.report(ctx, d.figures, wall, wall)
	if err != nil {
		return nil, err
	}
	rep.StalePolls = r.suspects.stale(d.units)
	rep.Mode = fmt.Sprintf("against %s over HTTP, in real time, %d requests in flight at most", base, cfg.Concurrency)
	if room != "" {
		rep.Mode = fmt.Sprintf("against %s over HTTP, the waiting room at the edge %s, in real time, %d requests in flight at most",
			base, room, cfg.Concurrency)
	}
	if after, ok := adm.scrape(ctx); ok && scraped {
		recordCallsFromMetrics(rep, before, after)
	}
	rep.Timeline = d.timeline
	rep.Quiet = quietFigures
	return rep, nil
}

// httpDriver takes each shopper's steps when they fall due in real time,
// on Concurrency goroutines, and samples the sale from the operator's view.
type httpDriver struct {
	*run
	adm *admin
	// units are the spans of real time in which the sampler saw units, or
	// saw that some came back (and may have been sold again before it
	// looked): a poll answered with units within a second of one was
	// right to be.
	units []span

	mu      sync.Mutex
	pending map[int64][]int32 // shoppers due, by 10ms slot since the epoch
	first   int64

	unitsLeft atomic.Int64
	timeline  []Point
}

func (d *httpDriver) add(t time.Time, i int32) {
	s := t.UnixNano() / int64(slice)
	d.mu.Lock()
	// A step due already goes in the next slot the dispatcher takes.
	s = max(s, d.first)
	d.pending[s] = append(d.pending[s], i)
	d.mu.Unlock()
}

// due takes every shopper due by now.
func (d *httpDriver) due(now time.Time) []int32 {
	s := now.UnixNano() / int64(slice)
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int32
	for ; d.first <= s; d.first++ {
		if b, ok := d.pending[d.first]; ok {
			out = append(out, b...)
			delete(d.pending, d.first)
		}
	}
	return out
}

func (d *httpDriver) drive(ctx context.Context) error {
	d.pending = map[int64][]int32{}
	start := time.Now()
	d.first = start.UnixNano() / int64(slice)
	for i := range d.shoppers {
		d.add(d.arrival(i), int32(i))
	}
	jobs := make(chan int32, d.cfg.Concurrency*4)
	var wg sync.WaitGroup
	for range d.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if t := d.step(ctx, int(i), time.Now()); !t.IsZero() {
					d.add(t, i)
				}
			}
		}()
	}
	sampled := make(chan struct{})
	sampleCtx, stopSampling := context.WithCancel(ctx)
	go func() { defer close(sampled); d.sampleLoop(sampleCtx) }()
	defer func() { stopSampling(); <-sampled }()

	tick := time.NewTicker(slice)
	defer tick.Stop()
	n := int64(len(d.shoppers))
	for d.stats.done.Load() < n {
		select {
		case <-ctx.Done():
			close(jobs)
			wg.Wait()
			return ctx.Err()
		case now := <-tick.C:
			batch := d.due(now)
			slices.Sort(batch)
			for _, i := range batch {
				jobs <- i
			}
			if now.After(d.closesAt.Add(time.Minute)) {
				close(jobs)
				wg.Wait()
				return errors.New("the sale outlived its closing time by a minute")
			}
		}
	}
	close(jobs)
	wg.Wait()
	if v, err := d.view(ctx); err == nil && v.Counter != nil {
		d.crowdGone = &StockAt{Counter: *v.Counter, Pending: v.Pending}
	}
	// The shoppers are done; the last holds may still be pending until
	// they expire.
	for {
		v, err := d.view(ctx)
		if err == nil && v.Pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if time.Now().After(d.closesAt.Add(time.Minute)) {
			return nil
		}
	}
}

func (d *httpDriver) view(ctx context.Context) (*apiclient.SaleView, error) {
	return d.adm.Sale(ctx, d.sku)
}

// sampleLoop reads the operator's view every sampleEvery for the timeline
// and for when the counter reached zero.
func (d *httpDriver) sampleLoop(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	last, lastUpTo, lastBack := time.Now(), int64(0), int64(0)
	lastSeen := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			v, err := d.view(ctx)
			if err != nil || v.Counter == nil {
				continue
			}
			// The view was read somewhere between the tick and now; under
			// load that can be long after the tick.
			seen := time.Now()
			if back := v.Expired + v.Cancelled + v.Voided; back > lastBack || *v.Counter > 0 {
				d.mu.Lock()
				d.units = append(d.units, span{lastSeen, seen})
				d.mu.Unlock()
			}
			lastSeen = seen
			d.unitsLeft.Store(*v.Counter)
			// Units that came back since the last sample may have been
			// sold again before this one: the counter was above zero in
			// between, and polls then rightly saw units.
			if back := v.Expired + v.Cancelled + v.Voided; back > lastBack {
				lastBack = back
				d.observeCounter(1, now)
			}
			d.observeCounter(*v.Counter, now)
			dt := now.Sub(last).Seconds()
			rate := 0.0
			if dt > 0 {
				rate = float64(max(v.AdmittedUpTo-lastUpTo, 0)) / dt
			}
			last, lastUpTo = now, v.AdmittedUpTo
			if now.Before(d.opensAt.Add(-time.Second)) {
				d.stats.swap()
				continue
			}
			// Units taken, as in process: held or sold.
			d.timeline = append(d.timeline, d.point(now, *v.Counter, v.Pending+v.Confirmed, v.AdmittedUpTo, rate, dt))
		}
	}
}

// figures reads the sale's totals and orders from the operator's routes.
func (d *httpDriver) figures(ctx context.Context) (storeFigures, error) {
	v, err := d.view(ctx)
	if err != nil {
		return storeFigures{}, err
	}
	f := storeFigures{Initial: int64(v.InitialStock), Pending: v.Pending, Confirmed: v.Confirmed, Expired: v.Expired,
		Cancelled: v.Cancelled, Voided: v.Voided}
	if v.Counter != nil {
		f.Counter = *v.Counter
	}
	if v.Invites != nil {
		f.InvitesIssued, f.InvitesRedeemed, f.InvitesWon = v.Invites.Issued, v.Invites.Redeemed, v.Invites.Won
	}
	orders, err := d.adm.Orders(ctx, d.sku)
	if err != nil {
		return f, err
	}
	for _, o := range orders {
		if isBot(o.UserID) && o.State != flashsale.OrderCancelled {
			f.BotUnits += int64(o.Quantity)
		}
	}
	return f, nil
}

// scrape reads the target's Prometheus text: each sample by its name and
// labels as written.
func (a *admin) scrape(ctx context.Context) (map[string]float64, bool) {
	raw, err := a.Metrics(ctx)
	if err != nil {
		return nil, false
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "flashsale_record_calls_total{") && !strings.HasPrefix(line, "flashsale_http_requests_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, true
}

// routePatterns are the server's route patterns of each protocol route.
var routePatterns = [nRoutes]string{
	routeTicket:    "GET /sale/{sku}/ticket",
	routeStatus:    "GET /sale/{sku}/status",
	routeAdmission: "POST /sale/{sku}/admission",
	routeRegister:  "POST /sale/{sku}/register",
	routeReserve:   "POST /sale/{sku}/reserve",
	routeConfirm:   "POST /reservations/{id}/confirm",
	routeCancel:    "DELETE /reservations/{id}",
}

// recordCallsFromMetrics fills in the record calls per request, and per
// rejected request, from the server's own counts over the run (which
// include the quiet sale's requests, if one ran).
func recordCallsFromMetrics(rep *Report, before, after map[string]float64) {
	delta := func(match func(string) bool) float64 {
		var d float64
		for k, v := range after {
			if match(k) {
				d += v - before[k]
			}
		}
		return d
	}
	for i := range rep.Routes {
		rf := &rep.Routes[i]
		var rt route
		for rt = 0; rt < nRoutes && rt.String() != rf.Route; rt++ {
		}
		if rt == nRoutes {
			continue
		}
		label := `route="` + routePatterns[rt] + `"`
		requests := delta(func(k string) bool {
			return strings.HasPrefix(k, "flashsale_http_requests_total{") && strings.Contains(k, label)
		})
		rejected := delta(func(k string) bool {
			if !strings.HasPrefix(k, "flashsale_http_requests_total{") || !strings.Contains(k, label) {
				return false
			}
			j := strings.Index(k, `status="`)
			return j >= 0 && len(k) > j+8 && k[j+8] >= '4'
		})
		calls := delta(func(k string) bool {
			return strings.HasPrefix(k, "flashsale_record_calls_total{") && strings.Contains(k, label)
		})
		rejectedCalls := delta(func(k string) bool {
			return strings.HasPrefix(k, "flashsale_record_calls_total{") && strings.Contains(k, label) && strings.Contains(k, `outcome="rejected"`)
		})
		if requests > 0 {
			rf.RecordKnown = true
			rf.RecordPerRequest = calls / requests
			if rejected > 0 {
				rf.RecordPerRejected = rejectedCalls / rejected
			}
		}
	}
}

// span is an interval of real time.
type span struct{ from, to time.Time }

// suspectPolls are the polls answered as if units remained although the
// sampler had seen none for more than a second: each is stale unless units
// were seen, or came back, within a second before it was asked or while it
// was answered. Sampling alone would call a unit that came back and went
// between two samples a stale answer. Safe for concurrent use.
type suspectPolls struct {
	mu    sync.Mutex
	polls []span // asked, answered
}

func (s *suspectPolls) add(asked, answered time.Time) {
	s.mu.Lock()
	s.polls = append(s.polls, span{asked, answered})
	s.mu.Unlock()
}

// stale counts the suspect polls no span of units explains.
func (s *suspectPolls) stale(units []span) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.polls {
		from := p.from.Add(-time.Second)
		explained := false
		for _, u := range units {
			if u.to.After(from) && u.from.Before(p.to) {
				explained = true
				break
			}
		}
		if !explained {
			n++
		}
	}
	return n
}
