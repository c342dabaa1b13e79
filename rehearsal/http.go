package rehearsal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/flashsale/flashsale/identity"
)

// httpClient speaks the shopper protocol to a server over HTTP, each
// shopper with its own JWT.
type httpClient struct {
	base string
	// room is where the waiting room's routes go: base, or an edge.
	room   string
	sku    string
	hc     *http.Client
	secret []byte
	// claim names the JWT claim the shoppers' cards go in: the target's
	// --instrument-claim ("" is its default, pmf).
	claim string
	now   func() time.Time
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
	base = strings.TrimRight(base, "/")
	return &httpClient{base: base, room: base, sku: sku, secret: secret, now: time.Now,
		hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// withRoom sends the waiting room's routes to room (an edge's base URL)
// when it is set, and returns c.
func (c *httpClient) withRoom(room string) *httpClient {
	if room != "" {
		c.room = room
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

// answer is the union of the JSON answers the protocol reads.
type answer struct {
	Token          string `json:"token"`
	Position       int64  `json:"position"`
	State          string `json:"state"`
	Chance         string `json:"chance"`
	AdmissionToken string `json:"admissionToken"`
	Final          bool   `json:"final"`
	ReservationID  string `json:"reservationId"`
	Challenge      *struct {
		Salt           string `json:"salt"`
		DifficultyBits int    `json:"difficultyBits"`
	} `json:"challenge"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// do sends one request and reads its answer. A request that gets no
// answer is "transport"; an answer without a contract error code
// "http_<status>".
func (c *httpClient) do(ctx context.Context, method, path string, header map[string]string, body any) reply {
	return c.to(ctx, c.base, method, path, header, body)
}

// to is do against base, which is c.base or c.room.
func (c *httpClient) to(ctx context.Context, base, method, path string, header map[string]string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return reply{code: "transport", records: -1}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{code: "transport", retryAfter: time.Second, records: -1}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return reply{code: "transport", retryAfter: time.Second, records: -1}
	}
	var a answer
	_ = json.Unmarshal(raw, &a)
	rep := reply{state: a.State, ticket: a.Token, admission: a.AdmissionToken, position: a.Position, chance: a.Chance,
		final: a.Final, id: a.ReservationID, records: -1}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			rep.retryAfter = time.Duration(n) * time.Second
		}
	}
	if a.Challenge != nil {
		rep.salt, rep.bits = a.Challenge.Salt, a.Challenge.DifficultyBits
	}
	if resp.StatusCode >= 300 {
		rep.code = "http_" + strconv.Itoa(resp.StatusCode)
		if a.Error != nil && a.Error.Code != "" {
			rep.code = a.Error.Code
		}
	}
	return rep
}

func (c *httpClient) bearer(who persona, sh *shopper) map[string]string {
	return map[string]string{"Authorization": "Bearer " + c.jwt(who, sh)}
}

func (c *httpClient) register(ctx context.Context, who persona, sh *shopper) reply {
	return c.to(ctx, c.room, "POST", "/sale/"+c.sku+"/register", c.bearer(who, sh), struct{}{})
}

func (c *httpClient) ticket(ctx context.Context, who persona, sh *shopper) reply {
	return c.to(ctx, c.room, "GET", "/sale/"+c.sku+"/ticket", c.bearer(who, sh), nil)
}

// status polls as the page does: the ticket in X-Ticket (out of the URL,
// which logs keep) and the shopper's JWT, so the poll counts as its own.
// redeem goes to the origin: a code is bound in the record.
func (c *httpClient) redeem(ctx context.Context, who persona, sh *shopper, code string) reply {
	return c.do(ctx, "POST", "/sale/"+c.sku+"/redeem", c.bearer(who, sh), map[string]string{"code": code})
}

func (c *httpClient) status(ctx context.Context, who persona, sh *shopper, ticket string) reply {
	h := c.bearer(who, sh)
	h["X-Ticket"] = ticket
	return c.to(ctx, c.room, "GET", "/sale/"+c.sku+"/status", h, nil)
}

func (c *httpClient) admission(ctx context.Context, who persona, sh *shopper, ticket, salt, nonce string) reply {
	return c.to(ctx, c.room, "POST", "/sale/"+c.sku+"/admission", c.bearer(who, sh), map[string]string{"token": ticket, "salt": salt, "nonce": nonce})
}

func (c *httpClient) reserve(ctx context.Context, who persona, sh *shopper, key string) reply {
	h := c.bearer(who, sh)
	h["X-Admission-Token"] = sh.x().admission
	h["Idempotency-Key"] = key
	return c.do(ctx, "POST", "/sale/"+c.sku+"/reserve", h, map[string]any{"quantity": 1, "paymentFingerprint": who.card})
}

func (c *httpClient) confirm(ctx context.Context, who persona, sh *shopper, payRef string) reply {
	return c.do(ctx, "POST", "/reservations/"+url.PathEscape(sh.x().resID)+"/confirm", c.bearer(who, sh), map[string]string{"paymentRef": payRef})
}

func (c *httpClient) cancel(ctx context.Context, who persona, sh *shopper) reply {
	return c.do(ctx, "DELETE", "/reservations/"+url.PathEscape(sh.x().resID), c.bearer(who, sh), nil)
}

// admin is the operator's side of the target.
type admin struct {
	base, token string
	hc          *http.Client
}

func (a *admin) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// saleView is the part of the operator's sale view the rehearsal reads.
type saleView struct {
	InitialStock int64  `json:"initialStock"`
	Counter      *int64 `json:"counter"`
	Pending      int64  `json:"pending"`
	Confirmed    int64  `json:"confirmed"`
	Expired      int64  `json:"expired"`
	Cancelled    int64  `json:"cancelled"`
	Voided       int64  `json:"voided"`
	AdmittedUpTo int64  `json:"admittedUpTo"`
	Invites      *struct {
		Issued, Redeemed, Won int64
	} `json:"invites"`
}

// createSale creates the sale on the target, in the contract's terms.
func (a *admin) createSale(ctx context.Context, s *flashsale.Sale) error {
	body := map[string]any{"sku": s.SKU, "name": s.Name, "initialStock": s.InitialStock,
		"opensAt": s.OpensAt.Format(time.RFC3339Nano), "closesAt": s.ClosesAt.Format(time.RFC3339Nano),
		"holdSeconds": s.HoldSeconds, "perUserLimit": s.PerUserLimit, "fairness": s.Fairness,
		"admissionPerSecond": s.AdmissionPerSecond, "minAccountAgeSeconds": s.MinAccountAgeSeconds,
		"challengeBits": s.ChallengeBits}
	if !s.RegistrationClosesAt.IsZero() {
		body["registrationClosesAt"] = s.RegistrationClosesAt.Format(time.RFC3339Nano)
	}
	return a.call(ctx, "POST", "/admin/sales", body, nil)
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
	adm := &admin{base: base, token: cfg.AdminToken, hc: &http.Client{Timeout: 30 * time.Second}}
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
			var out struct {
				Codes []string `json:"codes"`
			}
			n := min(cfg.Invited-len(codes), flashsale.MaxInvites)
			if err := adm.call(ctx, "POST", "/admin/sales/"+url.PathEscape(r.sku)+"/invites", map[string]int{"count": n}, &out); err != nil {
				return nil, fmt.Errorf("issue the invites: %w", err)
			}
			codes = append(codes, out.Codes...)
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

func (d *httpDriver) view(ctx context.Context) (saleView, error) {
	var v saleView
	err := d.adm.call(ctx, "GET", "/admin/sales/"+d.sku, nil, &v)
	return v, err
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
	f := storeFigures{Initial: v.InitialStock, Pending: v.Pending, Confirmed: v.Confirmed, Expired: v.Expired,
		Cancelled: v.Cancelled, Voided: v.Voided}
	if v.Counter != nil {
		f.Counter = *v.Counter
	}
	if v.Invites != nil {
		f.InvitesIssued, f.InvitesRedeemed, f.InvitesWon = v.Invites.Issued, v.Invites.Redeemed, v.Invites.Won
	}
	var orders struct {
		Orders []struct {
			UserID   string `json:"userId"`
			Quantity int64  `json:"quantity"`
			State    string `json:"state"`
		} `json:"orders"`
	}
	if err := d.adm.call(ctx, "GET", "/admin/orders?sku="+url.QueryEscape(d.sku), nil, &orders); err != nil {
		return f, err
	}
	for _, o := range orders.Orders {
		if isBot(o.UserID) && o.State != string(flashsale.OrderCancelled) {
			f.BotUnits += o.Quantity
		}
	}
	return f, nil
}

// scrape reads the target's Prometheus text: each sample by its name and
// labels as written.
func (a *admin) scrape(ctx context.Context) (map[string]float64, bool) {
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+"/metrics", nil)
	if err != nil {
		return nil, false
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
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
