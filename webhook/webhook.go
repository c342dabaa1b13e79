// Package webhook is an outbox sink that POSTs each event to a URL, signed
// so that the receiver can tell it came from this engine and was not
// replayed from long ago.
//
// Each delivery is one request: the body is the event's JSON envelope,
// exactly as written to the outbox, with these headers:
//
//	Content-Type: application/json
//	X-Flashsale-Event-Id: evt_…      (the same on every delivery of the event)
//	X-Flashsale-Event-Type: order.shipped
//	X-Flashsale-Attempt: 1           (counts claims of the event, from 1)
//	X-Flashsale-Timestamp: 1785578400 (Unix seconds when this request was signed)
//	X-Flashsale-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//
// Any 2xx answer is a delivery; anything else, or no answer within the
// timeout, is a failure that the relay retries through the outbox (with
// backoff, until the event is dead-lettered). Delivery is at least once: a
// receiver deduplicates on X-Flashsale-Event-Id and checks the signature
// with Verify.
//
// Overselling is neither prevented nor caused here: events report changes,
// they never make them.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/outbox"
)

// The headers of a delivery.
const (
	HeaderEventID   = "X-Flashsale-Event-Id"
	HeaderEventType = "X-Flashsale-Event-Type"
	HeaderAttempt   = "X-Flashsale-Attempt"
	HeaderTimestamp = "X-Flashsale-Timestamp"
	HeaderSignature = "X-Flashsale-Signature"
)

// Config configures a Sink. URL and Secret are required.
type Config struct {
	// URL receives the POSTs (http or https).
	URL string
	// Secret keys the HMAC-SHA256 signature; the receiver holds it too.
	Secret []byte
	// Timeout bounds one request (default 5s).
	Timeout time.Duration
	// Concurrency bounds the requests one batch has in flight (default 8).
	Concurrency int
	// Client sends the requests (default: a client of its own, no
	// redirects followed).
	Client *http.Client
	// Now stamps the signature (default time.Now).
	Now func() time.Time
}

// Sink POSTs events to a URL. Safe for concurrent use.
type Sink struct {
	cfg Config
}

var _ outbox.Sink = (*Sink)(nil)

// New returns a Sink, or an error if the URL or the secret is missing or
// malformed.
func New(cfg Config) (*Sink, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook: %q is not an http(s) URL", redact(cfg.URL))
	}
	if len(cfg.Secret) == 0 {
		return nil, errors.New("webhook: a signing secret is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			// A redirect would send the signed event somewhere the
			// operator did not configure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sink{cfg: cfg}, nil
}

// Name returns "webhook".
func (s *Sink) Name() string { return "webhook" }

// Publish POSTs each event, up to Concurrency at once, and returns nil if
// every receiver answered 2xx, else one error per event (nil where it
// was delivered).
func (s *Sink) Publish(ctx context.Context, events []*flashsale.OutboxEvent) []error {
	errs := make([]error, len(events))
	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	failed := false
	var mu sync.Mutex
	for i, ev := range events {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.post(ctx, ev); err != nil {
				mu.Lock()
				errs[i], failed = err, true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if !failed {
		return nil
	}
	return errs
}

func (s *Sink) post(ctx context.Context, ev *flashsale.OutboxEvent) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, strings.NewReader(string(ev.Payload)))
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	ts := s.cfg.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEventID, ev.ID)
	req.Header.Set(HeaderEventType, string(ev.Type))
	req.Header.Set(HeaderAttempt, strconv.Itoa(max(ev.Attempts, 1)))
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(s.cfg.Secret, ts, ev.Payload))
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		// url.Error repeats the whole URL, query and all; the message
		// ends up in the outbox's last_error.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook: POST %s: %w", redact(s.cfg.URL), err)
	}
	// Read a little of the body so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook: POST %s: HTTP %d", redact(s.cfg.URL), resp.StatusCode)
	}
	return nil
}

// Sign returns the signature header of a body sent at timestamp (Unix
// seconds): "v1=" and the hex HMAC-SHA256 of timestamp, ".", body.
func Sign(secret []byte, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("webhook: the signature does not match")
	ErrStale        = errors.New("webhook: the timestamp is outside the tolerance")
)

// Verify checks a delivery as its receiver: the signature must match the
// body and timestamp under secret (compared in constant time), and the
// timestamp must be within tolerance of now, so that a captured request
// cannot be replayed later. It returns nil, ErrBadSignature or ErrStale.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	if !hmac.Equal([]byte(h.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}

// redact drops credentials and the query from a URL for error messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(the webhook URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}
