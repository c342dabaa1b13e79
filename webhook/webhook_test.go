package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

func events(n int) []*flashsale.OutboxEvent {
	out := make([]*flashsale.OutboxEvent, n)
	for i := range out {
		ev := flashsale.NewEvent("", flashsale.EventOrderShipped, "sale_1", "sku-1", t0,
			flashsale.OrderData{OrderID: "ord_" + strconv.Itoa(i), To: flashsale.OrderShipped, Version: 2, Actor: "op"})
		out[i] = &flashsale.OutboxEvent{Event: ev, Attempts: 1}
	}
	return out
}

// receiver is a webhook endpoint that verifies every request as a real
// receiver would and records what it got.
type receiver struct {
	t      *testing.T
	secret []byte
	now    time.Time
	fail   map[string]int // event id -> status to answer

	mu  sync.Mutex
	got map[string]string // event id -> body
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		rc.t.Errorf("got %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
	}
	if err := Verify(rc.secret, r.Header, body, rc.now, 5*time.Minute); err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := r.Header.Get(HeaderEventID)
	if code := rc.fail[id]; code != 0 {
		w.WriteHeader(code)
		return
	}
	rc.mu.Lock()
	rc.got[id] = string(body)
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// TestPublishSigned: every event arrives once, signed, with its id and
// type; a receiver's refusal is that event's failure alone.
func TestPublishSigned(t *testing.T) {
	secret := []byte("s3cret")
	evs := events(20)
	rc := &receiver{t: t, secret: secret, now: t0.Add(time.Minute), got: map[string]string{},
		fail: map[string]int{evs[3].ID: http.StatusServiceUnavailable, evs[9].ID: http.StatusBadRequest}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	sink, err := New(Config{URL: srv.URL + "/hooks?token=abc", Secret: secret, Now: func() time.Time { return t0 }, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	errs := sink.Publish(t.Context(), evs)
	if len(errs) != len(evs) {
		t.Fatalf("Publish returned %d errors for %d events", len(errs), len(evs))
	}
	for i, ev := range evs {
		failed := i == 3 || i == 9
		if (errs[i] != nil) != failed {
			t.Errorf("event %d: error %v, want failed %v", i, errs[i], failed)
		}
		if !failed && rc.got[ev.ID] != string(ev.Payload) {
			t.Errorf("event %d arrived as %q, want its payload", i, rc.got[ev.ID])
		}
	}
	if !strings.Contains(errs[3].Error(), "HTTP 503") || strings.Contains(errs[3].Error(), "token=abc") {
		t.Errorf("error %q: want the status, and no query string", errs[3])
	}

	rc.fail = nil
	if errs := sink.Publish(t.Context(), evs[:5]); errs != nil {
		t.Errorf("Publish to a healthy receiver = %v, want nil", errs)
	}
}

// TestWrongSecretIsRefused: a receiver holding another secret refuses
// every request, and so the sink reports every event failed.
func TestWrongSecretIsRefused(t *testing.T) {
	rc := &receiver{t: t, secret: []byte("the receiver's"), now: t0, got: map[string]string{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	sink, err := New(Config{URL: srv.URL, Secret: []byte("another"), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	errs := sink.Publish(t.Context(), events(3))
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
			t.Errorf("event %d: %v, want HTTP 401", i, err)
		}
	}
	if len(rc.got) != 0 {
		t.Errorf("the receiver accepted %d forged events", len(rc.got))
	}
}

// TestTimeout: a receiver that does not answer within the timeout is a
// failure, reported within about the timeout.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	sink, err := New(Config{URL: srv.URL, Secret: []byte("k"), Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	errs := sink.Publish(t.Context(), events(2))
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("event %d: %v, want the deadline exceeded", i, err)
		}
	}
}

func TestVerify(t *testing.T) {
	secret, body := []byte("k"), []byte(`{"id":"evt_1"}`)
	h := http.Header{}
	h.Set(HeaderTimestamp, strconv.FormatInt(t0.Unix(), 10))
	h.Set(HeaderSignature, Sign(secret, t0.Unix(), body))
	if err := Verify(secret, h, body, t0.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("Verify of a good delivery: %v", err)
	}
	if err := Verify(secret, h, []byte(`{"id":"evt_2"}`), t0, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify of a changed body: %v", err)
	}
	if err := Verify([]byte("other"), h, body, t0, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify under another secret: %v", err)
	}
	if err := Verify(secret, h, body, t0.Add(time.Hour), 5*time.Minute); !errors.Is(err, ErrStale) {
		t.Errorf("Verify an hour later: %v", err)
	}
	h.Set(HeaderTimestamp, strconv.FormatInt(t0.Unix()+1, 10))
	if err := Verify(secret, h, body, t0, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify with a moved timestamp: %v", err)
	}
	for _, bad := range []Config{{URL: "ftp://x", Secret: secret}, {URL: "http://x"}, {URL: "::", Secret: secret}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) succeeded", bad)
		}
	}
}
