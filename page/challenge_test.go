package page_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/page"
	"github.com/flashsale/flashsale/sdk"
)

// powStandIn is a hand-written server side of the proof of work, to the
// contract's shapes. The page meets the real one in admission_test.go;
// this stand-in stays for what the engine does not readily give a test:
// a status route that answers 503 twice before the challenge (so the
// page's "come back shortly" and its backoff are seen). Its salt is also
// harder (16 bits) than the real-server tests ask.
type powStandIn struct {
	t          *testing.T
	salt       string
	difficulty int

	mu        sync.Mutex
	polls     []time.Time
	admission map[string]string
	received  chan struct{} // closed when the admission request arrives
	release   chan struct{} // closed by the test to let it be answered
}

const busyPolls = 2

func (p *powStandIn) handler() http.Handler {
	m := http.NewServeMux()
	m.Handle("GET /sale/pow/{$}", page.Handler())
	m.Handle("GET /assets/", page.Handler())
	m.Handle("GET /sdk/", sdk.Handler()) // the page runs on the SDK
	reply := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	m.HandleFunc("GET /sale/pow", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{"sku": "pow", "name": "Proof-of-work sale", "state": "open",
			"opensAt": time.Now().UTC().Format(time.RFC3339), "policy": map[string]any{"fairness": "fifo",
				"perUserLimit": 1, "holdSeconds": 600, "minAccountAgeSeconds": 0, "challenge": true}})
	})
	m.HandleFunc("GET /sale/pow/ticket", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			reply(w, 401, map[string]any{"error": map[string]string{"code": "unauthenticated", "message": "sign in"}})
			return
		}
		reply(w, 200, map[string]any{"token": "ticket-1", "position": 1, "estimatedWaitSeconds": 0})
	})
	m.HandleFunc("GET /sale/pow/status", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.polls = append(p.polls, time.Now())
		n := len(p.polls)
		p.mu.Unlock()
		if r.Header.Get("X-Ticket") != "ticket-1" || r.URL.Query().Has("token") || r.Header.Get("Authorization") == "" {
			// The page sends the ticket in X-Ticket, with its owner's
			// sign-in, and never in the URL.
			reply(w, 401, map[string]any{"error": map[string]string{"code": "invalid_token", "message": "no"}})
			return
		}
		if n <= busyPolls {
			w.Header().Set("Retry-After", "1")
			reply(w, 503, map[string]any{"error": map[string]string{"code": "unavailable", "message": "come back shortly"}})
			return
		}
		reply(w, 200, map[string]any{"state": "challenge", "challenge": map[string]any{
			"algorithm": "sha256", "salt": p.salt, "difficultyBits": p.difficulty, "expiresIn": 60}})
	})
	m.HandleFunc("POST /sale/pow/admission", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || r.Header.Get("Authorization") == "" {
			reply(w, 400, map[string]any{"error": map[string]string{"code": "bad_request", "message": "bad"}})
			return
		}
		p.mu.Lock()
		first := p.admission == nil
		p.admission = body
		p.mu.Unlock()
		if first {
			close(p.received)
		}
		select {
		case <-p.release:
		case <-r.Context().Done():
			return
		}
		if body["token"] != "ticket-1" || body["salt"] != p.salt ||
			challenge.LeadingZeroBits(body["salt"], body["nonce"]) < p.difficulty {
			reply(w, 403, map[string]any{"error": map[string]string{"code": "challenge_failed", "message": "no"}})
			return
		}
		reply(w, 200, map[string]any{"admissionToken": "adm-1", "expiresIn": 120})
	})
	return m
}

// TestChallengeAndBusyInTheBrowser: the page says "come back shortly" to
// 503s and backs off (never a tight loop), then solves the proof of work
// in its worker and trades the solution for an admission, all to the
// contract, checked here with the server's own check (challenge.LeadingZeroBits).
func TestChallengeAndBusyInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	p := &powStandIn{t: t, salt: base64.RawURLEncoding.EncodeToString(raw), difficulty: 16,
		received: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(p.handler())
	defer srv.Close()
	s := newServer(t) // only for a shopper JWT
	b := newBrowser(t, newScreenshots(t, "pow"))

	ivy := b.open("ivy", srv.URL+"/sale/pow/#jwt="+s.jwt("ivy"))
	ivy.waitView("unavailable")
	ivy.shot("busy-come-back-shortly")
	select {
	case <-p.received:
	case <-time.After(30 * time.Second):
		t.Fatalf("no admission request; the page shows %q", ivy.view())
	}
	ivy.waitView("challenge")
	ivy.shot("challenge-solved")
	close(p.release)
	ivy.waitView("admitted")
	ivy.shot("admitted-after-challenge")

	p.mu.Lock()
	defer p.mu.Unlock()
	if got := challenge.LeadingZeroBits(p.salt, p.admission["nonce"]); got < p.difficulty {
		t.Errorf("nonce %q gives %d zero bits, want %d", p.admission["nonce"], got, p.difficulty)
	}
	// Backoff after each 503: 2 s then 4 s, each jittered by at least 0.7.
	for i, least := range []time.Duration{1400 * time.Millisecond, 2800 * time.Millisecond} {
		if gap := p.polls[i+1].Sub(p.polls[i]); gap < least {
			t.Errorf("poll %d came %v after a 503, want at least %v", i+2, gap, least)
		}
	}
}
