// Package client is the Go client of flashsale's HTTP API: every route of
// the public contract and of the project's documented additions, typed
// answers, error codes as Go errors, and the discipline a well-behaved
// client keeps built in.
//
// A shop's backend holds one Client per flashsale server (it is safe for
// concurrent use) and speaks for its shoppers through Shopper, with each
// shopper's JWT, and for its operators through Admin, with the admin token:
//
//	c, err := client.New("https://sale.example.com")
//	sh := c.Shopper(jwt)
//	t, err := sh.Ticket(ctx, "sneaker-42")
//	st, err := (&client.Waiter{Client: c, SKU: "sneaker-42"}).Wait(ctx, t.Token)
//	r, err := sh.Reserve(ctx, "sneaker-42", client.ReserveRequest{AdmissionToken: st.AdmissionToken})
//	if errors.Is(err, client.ErrSoldOut) { ... }
//
// The discipline:
//
//   - A request the server (or a proxy before it) asks to repeat is
//     repeated, no sooner than its Retry-After and with jitter, sent at
//     most five times (WithMaxAttempts): 503 overloaded (nothing was done) for any route; 503
//     unavailable, a 502/503/504 without a contract code, and a request
//     that got no answer at all only for routes that are safe to repeat
//     (every GET, register, redeem, confirm, cancel of a reservation, and
//     reserve, which is repeated with the same Idempotency-Key so that it
//     replays its first answer rather than reserving twice).
//   - Waiter polls a ticket's status no sooner than each answer's
//     Retry-After, plus jitter (a server holds shoppers who poll faster
//     than asked), solves the proof of work when asked and posts the
//     admission.
//   - Every call takes a context, and stops waiting when it is done; a
//     Retry-After that would outlast the context's deadline, or is longer
//     than 30 seconds, ends the call with the server's answer (its
//     RetryAfter set) at once rather than sleeping.
//
// Tests inject the HTTP client, the clock, the sleep and the jitter
// (WithHTTPClient, WithClock, WithSleep, WithJitter), so that waiting is
// observed and never slept.
//
// Overselling is neither prevented nor caused here; the client speaks the
// API, the gate (packages memory and redis) counts the stock.
package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Client talks to one flashsale server. Safe for concurrent use by
// multiple goroutines; create it with New. The routes that need no
// credentials are its methods; Shopper and Admin give those that do.
type Client struct {
	base        string
	hc          *http.Client
	now         func() time.Time
	sleep       func(ctx context.Context, d time.Duration) error
	jitter      func(d time.Duration) time.Duration
	maxAttempts int
	userAgent   string
	answers     func(status int, body []byte)
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient sends every request through hc (default: a client with
// a 30-second timeout). A Timeout on hc also ends Admin.Live's stream.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithClock sets the clock the client reads a Retry-After given as an
// HTTP date against (default time.Now). A context's deadline is always
// on the real clock.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithSleep sets how the client waits before a repeat or a poll: it must
// return no sooner than d has passed or ctx is done, and then ctx.Err().
// The default sleeps on a timer; a test records d and returns at once.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// WithJitter sets the extra wait added to each wait of d, so that a crowd
// told the same Retry-After does not come back in step. It must not be
// negative. The default is uniform in [0, d/5 + 100ms).
func WithJitter(jitter func(d time.Duration) time.Duration) Option {
	return func(c *Client) { c.jitter = jitter }
}

// WithMaxAttempts sets how many times a request is sent at most when the
// server keeps asking to repeat it (default 5; 1 never repeats).
func WithMaxAttempts(n int) Option { return func(c *Client) { c.maxAttempts = max(n, 1) } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithAnswers hands f the status and the body of every answer the client
// reads, as the server sent it and before it is decoded (repeats and
// error answers included; Live's stream is not an answer), on the
// goroutine of the call. A tool that shows an operator the server's own
// JSON keeps it (flashsale's command line prints it, with every field,
// those this client does not know included); a debugging session logs
// it. f may keep body, which the client does not reuse, but must not
// change it: the client decodes it once f returns.
func WithAnswers(f func(status int, body []byte)) Option { return func(c *Client) { c.answers = f } }

// New returns a Client of the server at baseURL (http:// or https://,
// with or without a path prefix the server is mounted under).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("flashsale client: %q is not an http:// or https:// URL", baseURL)
	}
	c := &Client{
		base:        strings.TrimRight(baseURL, "/"),
		hc:          &http.Client{Timeout: 30 * time.Second},
		now:         time.Now,
		sleep:       sleepCtx,
		jitter:      defaultJitter,
		maxAttempts: 5,
		userAgent:   "flashsale-go-client/1",
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func defaultJitter(d time.Duration) time.Duration {
	return rand.N(d/5 + 100*time.Millisecond)
}

// NewIdempotencyKey returns a fresh random key for a reserve.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// call is one API request.
type call struct {
	method string
	path   string // escaped
	query  url.Values
	header http.Header
	// body is sent as JSON; a POST or PATCH without one sends {}.
	body any
	// repeatable: the request may be repeated after an answer that does
	// not promise nothing was done (503 unavailable, no answer at all).
	// Every GET is.
	repeatable bool
	// raw, when set, receives the answer's body undecoded.
	raw *[]byte
}

// maxAnswer bounds an answer's body: the operator's lists are the largest.
const maxAnswer = 64 << 20

// do sends c, repeating it while the server asks to and the call allows,
// and decodes a 2xx answer's JSON into out (unless nil). It returns the
// last answer's header.
func (c *Client) do(ctx context.Context, k *call, out any) (http.Header, error) {
	var body []byte
	if k.body != nil {
		b, err := json.Marshal(k.body)
		if err != nil {
			return nil, fmt.Errorf("flashsale client: encode %s %s: %w", k.method, k.path, err)
		}
		body = b
	} else if k.method == http.MethodPost || k.method == http.MethodPatch {
		body = []byte("{}")
	}
	for attempt := 1; ; attempt++ {
		h, err := c.once(ctx, k, body, out)
		if err == nil {
			return h, nil
		}
		wait, again := c.repeat(ctx, k, err, attempt)
		if !again {
			return h, err
		}
		if err := c.sleep(ctx, wait); err != nil {
			return h, err
		}
	}
}

// repeat decides whether, and after how long, a failed attempt is sent
// again.
func (c *Client) repeat(ctx context.Context, k *call, err error, attempt int) (time.Duration, bool) {
	if attempt >= c.maxAttempts || ctx.Err() != nil {
		return 0, false
	}
	repeatable := k.repeatable || k.method == http.MethodGet
	var wait time.Duration
	var e *Error
	switch {
	case errors.As(err, &e):
		if !e.comeBack() || (e.Code != CodeOverloaded && !repeatable) {
			return 0, false
		}
		wait = e.RetryAfter
		if wait <= 0 {
			wait = backoff(attempt)
		}
	case repeatable:
		// No answer at all: the request may or may not have been served.
		wait = backoff(attempt)
	default:
		return 0, false
	}
	if wait > maxRepeatWait {
		// A server that asks for this long is better answered by the
		// caller, who knows whether the shopper is still there.
		return 0, false
	}
	wait += max(c.jitter(wait), 0)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		// Waiting would outlast the caller: give it the answer now. (A
		// context's deadline is on the real clock, whatever clock the
		// client was given.)
		return 0, false
	}
	return wait, true
}

// maxRepeatWait is the longest Retry-After a request is repeated after by
// the client itself; a longer one ends the call with the answer.
const maxRepeatWait = 30 * time.Second

// backoff is the wait before repeat number attempt when the server said
// nothing of when: 250ms, doubling, at most 5s.
func backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt-1, 5)
	return min(d, 5*time.Second)
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, k *call, body []byte, out any) (http.Header, error) {
	u := c.base + k.path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("flashsale client: %s %s: %w", k.method, k.path, err)
	}
	for name, v := range k.header {
		req.Header[name] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("flashsale client: %s %s: %w", k.method, k.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return resp.Header, ctxErr
		}
		return resp.Header, fmt.Errorf("flashsale client: %s %s: reading the answer: %w", k.method, k.path, err)
	}
	if k.raw != nil {
		*k.raw = data
	}
	if c.answers != nil {
		c.answers(resp.StatusCode, data)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.Header, c.errorOf(resp, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, fmt.Errorf("flashsale client: %s %s: the answer is not the expected JSON: %w", k.method, k.path, err)
		}
	}
	return resp.Header, nil
}

// errorOf reads an error answer.
func (c *Client) errorOf(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: c.retryAfter(resp.Header)}
	var body struct {
		Error struct {
			Code    Code   `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// retryAfter reads Retry-After: whole seconds, or an HTTP date.
func (c *Client) retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(c.now()), 0)
	}
	return 0
}

// seg escapes one path segment (a SKU, an id).
func seg(s string) string { return url.PathEscape(s) }

func bearerHeader(token string) http.Header {
	if token == "" {
		return http.Header{}
	}
	return http.Header{"Authorization": {"Bearer " + token}}
}

// Sale returns the sale as shoppers see it: GET /sale/{sku}. ErrNotFound
// for no such sale.
func (c *Client) Sale(ctx context.Context, sku string) (*Sale, error) {
	var s Sale
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/sale/" + seg(sku)}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Status returns the place of the ticket in the sale's waiting room:
// GET /sale/{sku}/status?token=…. Poll it no sooner than
// Status.RetryAfter, or let a Waiter do it. ErrInvalidToken for a forged,
// expired or malformed ticket; ErrNotEligible where the sale already says
// so. A backend that has the shopper's JWT polls with Shopper.Status.
func (c *Client) Status(ctx context.Context, sku, ticket string) (*Status, error) {
	return c.status(ctx, &call{method: http.MethodGet, path: "/sale/" + seg(sku) + "/status",
		query: url.Values{"token": {ticket}}, repeatable: true})
}

func (c *Client) status(ctx context.Context, k *call) (*Status, error) {
	var s Status
	h, err := c.do(ctx, k, &s)
	if err != nil {
		return nil, err
	}
	s.RetryAfter = c.retryAfter(h)
	return &s, nil
}

// Admission posts a solved proof of work: POST /sale/{sku}/admission.
// ErrChallengeFailed for a wrong nonce, an expired salt or one already
// spent (a wrong nonce does not spend it); ErrNotAdmitted when the place
// has not come up. It is not repeated after a lost answer, as the salt
// may have been spent: poll the status again, which then says admitted.
func (c *Client) Admission(ctx context.Context, sku string, r AdmissionRequest) (*Admission, error) {
	return c.admission(ctx, sku, r, nil)
}

func (c *Client) admission(ctx context.Context, sku string, r AdmissionRequest, h http.Header) (*Admission, error) {
	var a Admission
	if _, err := c.do(ctx, &call{method: http.MethodPost, path: "/sale/" + seg(sku) + "/admission", header: h, body: r}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Draw returns a random or lottery sale's published draw: GET
// /sale/{sku}/draw. ErrNotFound for a fifo sale, or before the draw has
// run (with RetryAfter until it is due).
func (c *Client) Draw(ctx context.Context, sku string) (*DrawDocument, error) {
	var d DrawDocument
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/sale/" + seg(sku) + "/draw", repeatable: true}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DemoToken asks a --demo server for a development shopper JWT: GET
// /demo/token?user=NAME. Only a demo server verifying shoppers with the
// development key has the route (ErrNotFound otherwise); a real shop's
// shoppers get their JWTs from its identity service.
func (c *Client) DemoToken(ctx context.Context, user string) (*DemoToken, error) {
	var t DemoToken
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/demo/token", query: url.Values{"user": {user}}, repeatable: true}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Healthz reports whether the process is alive: GET /healthz, whose
// answer ({"status", "role"}) it returns.
func (c *Client) Healthz(ctx context.Context) (map[string]string, error) {
	var out map[string]string
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/healthz"}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Readyz reports whether the server's stores answer: GET /readyz. It
// returns each part's state ("ok" or "unavailable") and, when one is
// not ready, an *Error with status 503 and code unavailable as well. It is
// asked once: a probe wants the answer of now.
func (c *Client) Readyz(ctx context.Context) (map[string]string, error) {
	var raw []byte
	k := &call{method: http.MethodGet, path: "/readyz", raw: &raw}
	_, err := c.once(ctx, k, nil, nil)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable && e.Code == "" {
		// The not-ready answer is the parts' map, not an error body.
		var out map[string]string
		_ = json.Unmarshal(raw, &out)
		e.Code, e.Message = CodeUnavailable, "not ready: "+notReady(out)
		return out, e
	}
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("flashsale client: GET /readyz: %w", err)
	}
	return out, nil
}

// notReady names the parts a readiness answer says are not ready.
func notReady(parts map[string]string) string {
	var names []string
	for name, state := range parts {
		if state != "ok" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "unknown"
	}
	return strings.Join(names, ", ")
}

// readSome reads at most 64 KiB of an answer: an error body.
func readSome(resp *http.Response) ([]byte, error) {
	return io.ReadAll(io.LimitReader(resp.Body, 64<<10))
}
