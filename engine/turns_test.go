package engine_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRebuildHandsOutNoTurn: a shopper whose turn is spent (it reserved and
// cancelled) is handed its admission again by the waiting room after a
// pause, a rebuild and a resume (the same place, so the same admission id,
// under the new epoch), and the gate refuses it: admission_used, as before
// the rebuild. Its first key still replays its cancelled reservation; a
// shopper who holds stays held to its limit; a shopper who never reserved
// reserves. Nor does time give a turn back: past the admission's lifetime,
// the shopper's new admission is the spent one. On every backend.
func TestRebuildHandsOutNoTurn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("tv", map[string]any{"initialStock": 10})
		auth := func(user string) map[string]string {
			return map[string]string{"Authorization": "Bearer " + h.jwt(user)}
		}

		r := h.reserve("tv", "cancels", h.admit("tv", "cancels"), "first", nil)
		if r.status != http.StatusCreated {
			t.Fatalf("reserve: %d %s", r.status, r.body)
		}
		cancelled := r.json(t)["reservationId"].(string)
		if c := h.do("DELETE", "/reservations/"+cancelled, auth("cancels"), nil); c.status != http.StatusOK {
			t.Fatalf("cancel: %d %s", c.status, c.body)
		}
		if r := h.reserve("tv", "holds", h.admit("tv", "holds"), "first", nil); r.status != http.StatusCreated {
			t.Fatalf("reserve: %d %s", r.status, r.body)
		}
		spent := func(stage string) {
			t.Helper()
			for _, user := range []string{"cancels", "holds"} {
				if r := h.reserve("tv", user, h.admit("tv", user), "again-"+strings.ReplaceAll(stage, " ", "-"), nil); r.status != http.StatusForbidden || r.code() != "admission_used" {
					t.Fatalf("%s: %s reserves again with its admission: %d %s; want 403 admission_used", stage, user, r.status, r.body)
				}
			}
			if r := h.reserve("tv", "cancels", h.admit("tv", "cancels"), "first", nil); r.status != http.StatusCreated ||
				r.json(t)["reservationId"] != cancelled {
				t.Fatalf("%s: the first key's replay: %d %s; want the cancelled reservation %s", stage, r.status, r.body, cancelled)
			}
		}
		spent("before")

		if r := h.do("POST", "/admin/sales/tv/pause", nil, map[string]string{"reason": "count check"}); r.status != http.StatusOK {
			t.Fatalf("pause: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/admin/sales/tv/rebuild", nil, nil); r.status != http.StatusOK {
			t.Fatalf("rebuild: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/admin/sales/tv/resume", nil, nil); r.status != http.StatusOK {
			t.Fatalf("resume: %d %s", r.status, r.body)
		}
		if e := h.saleOf("tv").Epoch; e != 2 {
			t.Fatalf("epoch %d after the rebuild; want 2", e)
		}
		spent("after a rebuild")

		h.clock.Advance(3 * time.Minute) // past the admissions' lifetime (120s)
		spent("after the admissions expired")

		if r := h.reserve("tv", "newcomer", h.admit("tv", "newcomer"), "k", nil); r.status != http.StatusCreated {
			t.Fatalf("a shopper who never reserved: %d %s", r.status, r.body)
		}
		h.exact("tv")
	})
}
