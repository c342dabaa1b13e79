package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/client"
)

// requests records what the wrapped server was sent on one path.
type requests struct {
	mu   sync.Mutex
	keys []string
	n    int
	mode string
}

// count returns how many requests were recorded.
func (r *requests) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// reset forgets the requests recorded, and sets the mode the server
// answers in from now on.
func (r *requests) reset(mode string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n, r.keys, r.mode = 0, nil, mode
}

// add records a request and returns its number.
func (r *requests) add(req *http.Request) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
	return r.n
}

func answer(w http.ResponseWriter, status int, retryAfter, code string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":"come back later"}}`, code)
}

// TestReserveRepeatsOverloadedWithTheSameKey: a server answering 503
// overloaded with Retry-After twice, then the real reserve: the client
// waited Retry-After (plus its jitter) each time, sent the same key each
// time, and one reservation was made.
func TestReserveRepeatsOverloadedWithTheSameKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("busy")
		adm := h.admit("busy", "alice")
		seen := &requests{}
		h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.URL.Path == "/sale/busy/reserve" && seen.add(r) <= 2 {
				answer(w, http.StatusServiceUnavailable, "2", "overloaded")
				return
			}
			next.ServeHTTP(w, r)
		}
		c := h.newClient(client.WithJitter(func(d time.Duration) time.Duration { return d / 20 }))
		res, err := c.Shopper(h.jwt("alice")).Reserve(ctx, "busy", client.ReserveRequest{AdmissionToken: adm})
		if err != nil {
			t.Fatalf("reserve: %v", err)
		}
		if w := h.waits(); len(w) != 2 || w[0] != 2100*time.Millisecond || w[1] != 2100*time.Millisecond {
			t.Fatalf("waits %v, want Retry-After 2s plus 5%% jitter, twice", w)
		}
		seen.mu.Lock()
		keys := seen.keys
		seen.mu.Unlock()
		if len(keys) != 3 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] || res.IdempotencyKey != keys[0] {
			t.Fatalf("keys sent %q, the reservation's %q", keys, res.IdempotencyKey)
		}
		if v, err := h.admin().Sale(ctx, "busy"); err != nil || v.Pending != 1 {
			t.Fatalf("pending after the repeats: %+v %v", v, err)
		}
	})
}

// TestReserveRepeatsAfterALostAnswer: the server reserved but its answers
// never arrived; the client repeats with the same key and gets the same
// reservation, and the record holds one.
func TestReserveRepeatsAfterALostAnswer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("flaky")
		adm := h.admit("flaky", "alice")
		seen := &requests{}
		var made string
		h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			// Two lost answers: net/http repeats a request with an
			// Idempotency-Key once by itself when a reused connection
			// drops, so the second loss is the client's to repeat.
			if r.URL.Path != "/sale/flaky/reserve" || seen.add(r) > 2 {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if rec.Code != http.StatusCreated {
				t.Errorf("a lost reserve: %d %s", rec.Code, rec.Body)
			}
			seen.mu.Lock()
			made = rec.Body.String()
			seen.mu.Unlock()
			hangUp(t, w)
		}
		res, err := h.shopper("alice").Reserve(ctx, "flaky", client.ReserveRequest{AdmissionToken: adm, IdempotencyKey: "cart-7"})
		if err != nil {
			t.Fatalf("reserve: %v", err)
		}
		if w := h.waits(); len(w) == 0 || w[0] < 250*time.Millisecond {
			t.Fatalf("waits %v, want a backoff", w)
		}
		seen.mu.Lock()
		keys, lost := seen.keys, made
		seen.mu.Unlock()
		if len(keys) < 3 {
			t.Fatalf("sent %d times", len(keys))
		}
		for _, k := range keys {
			if k != "cart-7" {
				t.Fatalf("keys sent %q", keys)
			}
		}
		if lost == "" || !containsID(lost, res.ReservationID) {
			t.Fatalf("the repeat answered %s; the lost answer was %s", res.ReservationID, lost)
		}
		if v, err := h.admin().Sale(ctx, "flaky"); err != nil || v.Pending != 1 || *v.Counter != 9 {
			t.Fatalf("after the repeat: %+v %v", v, err)
		}
	})
}

// containsID reports whether a reserve's answer body names the reservation.
func containsID(body, id string) bool {
	return id != "" && strings.Contains(body, `"reservationId":"`+id+`"`)
}

// TestOnlyRepeatableRequestsAreRepeated: a create whose answer says a store
// did not answer, or that got no answer at all, is not repeated (it may
// have been made); one shed as overloaded (nothing was done) is.
func TestOnlyRepeatableRequestsAreRepeated(t *testing.T) {
	h := newHarness(t, backends[0])
	ctx := context.Background()
	seen := &requests{}
	h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path != "/admin/sales" || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		n := seen.add(r)
		seen.mu.Lock()
		mode := seen.mode
		seen.mu.Unlock()
		switch {
		case mode == "unavailable":
			answer(w, http.StatusServiceUnavailable, "1", "unavailable")
		case mode == "hang up":
			next.ServeHTTP(httptest.NewRecorder(), r)
			hangUp(t, w)
		case mode == "overloaded" && n == 1:
			answer(w, http.StatusServiceUnavailable, "1", "overloaded")
		default:
			next.ServeHTTP(w, r)
		}
	}
	create := func(sku string) error {
		_, err := h.admin().CreateSale(ctx, client.NewSale{SKU: sku, InitialStock: 1, OpensAt: start})
		return err
	}

	seen.reset("unavailable")
	err := create("a")
	wantCode(t, "create, unavailable", err, client.ErrUnavailable, 503)
	if seen.count() != 1 || len(h.waits()) != 0 {
		t.Fatalf("an unavailable create was sent %d times", seen.count())
	}

	seen.reset("hang up")
	if err := create("b"); err == nil || client.ErrorCode(err) != "" {
		t.Fatalf("create without an answer: %v", err)
	}
	if seen.count() != 1 || len(h.waits()) != 0 {
		t.Fatalf("a create without an answer was sent %d times", seen.count())
	}
	// It was made: reading tells.
	if v, err := h.admin().Sale(ctx, "b"); err != nil || v.SKU != "b" {
		t.Fatalf("the create whose answer was lost: %+v %v", v, err)
	}

	seen.reset("overloaded")
	if err := create("c"); err != nil {
		t.Fatalf("create after an overloaded answer: %v", err)
	}
	if w := h.waits(); seen.count() != 2 || len(w) != 1 || w[0] != time.Second {
		t.Fatalf("overloaded create: sent %d times, waits %v", seen.count(), w)
	}
}

// TestRepeatsAreBounded: a server that keeps answering overloaded gets
// MaxAttempts requests, and the caller its last answer with Retry-After;
// a Retry-After longer than the context's deadline ends the call at once.
func TestRepeatsAreBounded(t *testing.T) {
	h := newHarness(t, backends[0])
	seen := &requests{}
	h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		seen.add(r)
		answer(w, http.StatusServiceUnavailable, "3", "overloaded")
	}
	c := h.newClient(client.WithMaxAttempts(3))
	_, err := c.Sale(context.Background(), "any")
	wantCode(t, "always overloaded", err, client.ErrOverloaded, 503)
	var e *client.Error
	if !errors.As(err, &e) || e.RetryAfter != 3*time.Second {
		t.Fatalf("the last answer: %#v", err)
	}
	if w := h.waits(); seen.count() != 3 || len(w) != 2 {
		t.Fatalf("sent %d times, waits %v", seen.count(), w)
	}

	seen.reset("")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.Sale(ctx, "any")
	wantCode(t, "overloaded, Retry-After past the deadline", err, client.ErrOverloaded, 503)
	if w := h.waits(); seen.count() != 1 || len(w) != 0 {
		t.Fatalf("with a deadline before Retry-After: sent %d times, waits %v", seen.count(), w)
	}
}

// TestLongRetryAfterIsTheCallersToHonour: an answer asking to come back in
// more than half a minute is returned, not slept on.
func TestLongRetryAfterIsTheCallersToHonour(t *testing.T) {
	h := newHarness(t, backends[0])
	seen := &requests{}
	h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		seen.add(r)
		answer(w, http.StatusServiceUnavailable, "120", "unavailable")
	}
	_, err := h.c.Sale(context.Background(), "any")
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeUnavailable || e.RetryAfter != 2*time.Minute {
		t.Fatalf("answer: %#v", err)
	}
	if w := h.waits(); seen.count() != 1 || len(w) != 0 {
		t.Fatalf("sent %d times, waits %v", seen.count(), w)
	}
}
