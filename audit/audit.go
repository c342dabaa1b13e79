// Package audit looks, after a sale, for orders that match automation
// patterns, and cancels them under the published policy
// (waitroom.AutomationPolicy), their units returning through the normal
// exactly-once restock.
//
// Detection is never certain, and an order is cancelled only when it
// matches at least two independent patterns:
//
//   - a shared payment instrument: one card behind several accounts in the
//     sale (the gate allows one live win per card, so sharing shows as a
//     card reused as earlier holds lapse);
//   - accounts created together: three or more young accounts whose
//     creation times fall within ten minutes of each other;
//   - burst timing: three or more of such a group reserving within one
//     second of each other;
//   - held during the sale: the waiting room held the account as
//     automation (it polled far faster than asked, or kept failing the
//     challenge or hitting the rate limits).
//
// Overselling is neither prevented nor caused here; the orders it finds are
// cancelled through package control, whose units go back through package
// restock.
package audit

import (
	"fmt"
	"sort"
	"time"

	"github.com/flashsale/flashsale"
)

// Policy sets the patterns' thresholds. The zero value uses the defaults
// documented on each field.
type Policy struct {
	// Together is how close creation times must be (default 10m), Group
	// how many accounts make a group (default 3), Young how old an account
	// may be to count (default 30 days, at the sale's open).
	Together time.Duration
	Group    int
	Young    time.Duration
	// Burst is how close a group's reserves must be (default 1s).
	Burst time.Duration
	// CancelAt is how many patterns an order must match to be cancelled
	// (default 2).
	CancelAt int
}

func (p Policy) withDefaults() Policy {
	if p.Together <= 0 {
		p.Together = 10 * time.Minute
	}
	if p.Group <= 0 {
		p.Group = 3
	}
	if p.Young <= 0 {
		p.Young = 30 * 24 * time.Hour
	}
	if p.Burst <= 0 {
		p.Burst = time.Second
	}
	if p.CancelAt <= 0 {
		p.CancelAt = 2
	}
	return p
}

// Finding is one order that matches at least one pattern.
type Finding struct {
	OrderID       string
	OrderVersion  int64
	OrderState    flashsale.OrderState
	ReservationID string
	UserID        string
	Quantity      int
	// Patterns are the patterns the order matches, each said for a person.
	Patterns []string
	// Cancel says the policy cancels the order: it matches CancelAt
	// patterns or more and has not shipped.
	Cancel bool
}

// Report is the audit of one sale.
type Report struct {
	SaleID   string
	SKU      string
	Orders   int
	Findings []Finding
}

// Analyze audits the sale's attempts (every reservation, with its order);
// held is the waiting room's list of accounts held as automation and why.
func Analyze(sale *flashsale.Sale, attempts []flashsale.Attempt, held map[string]string, p Policy) Report {
	p = p.withDefaults()
	rep := Report{SaleID: sale.ID, SKU: sale.SKU}
	patterns := map[string]map[string]bool{} // reservation id -> patterns

	note := func(resID, pattern string) {
		if patterns[resID] == nil {
			patterns[resID] = map[string]bool{}
		}
		patterns[resID][pattern] = true
	}

	// Shared instruments, over every attempt (a card reused as holds lapse
	// shows only there).
	accountsOf := map[string]map[string]bool{}
	for _, a := range attempts {
		if a.Instrument == "" {
			continue
		}
		if accountsOf[a.Instrument] == nil {
			accountsOf[a.Instrument] = map[string]bool{}
		}
		accountsOf[a.Instrument][a.UserID] = true
	}
	var orders []flashsale.Attempt
	for _, a := range attempts {
		if a.OrderID == "" {
			continue
		}
		orders = append(orders, a)
		if n := len(accountsOf[a.Instrument]); a.Instrument != "" && n > 1 {
			note(a.ReservationID, fmt.Sprintf("its payment instrument was used by %d accounts in this sale", n))
		}
		if why, ok := held[a.UserID]; ok {
			note(a.ReservationID, "the waiting room held the account as automation: "+why)
		}
	}
	rep.Orders = len(orders)

	// Accounts created together: young orders sorted by creation time,
	// grouped where consecutive creations are within Together of the
	// group's first.
	var young []flashsale.Attempt
	for _, o := range orders {
		if o.AccountCreated.IsZero() || sale.OpensAt.Sub(o.AccountCreated) > p.Young {
			continue
		}
		young = append(young, o)
	}
	sort.Slice(young, func(i, j int) bool { return young[i].AccountCreated.Before(young[j].AccountCreated) })
	for i := 0; i < len(young); {
		j := i
		for j < len(young) && young[j].AccountCreated.Sub(young[i].AccountCreated) <= p.Together {
			j++
		}
		group := young[i:j]
		if len(group) >= p.Group {
			for _, o := range group {
				note(o.ReservationID, fmt.Sprintf("one of %d young accounts created within %s of each other", len(group), p.Together))
			}
			markBursts(group, p, note)
			i = j
			continue
		}
		i++
	}

	for _, o := range orders {
		ps := patterns[o.ReservationID]
		if len(ps) == 0 {
			continue
		}
		f := Finding{OrderID: o.OrderID, OrderVersion: o.OrderVersion, OrderState: o.OrderState,
			ReservationID: o.ReservationID, UserID: o.UserID, Quantity: o.Quantity}
		for pat := range ps {
			f.Patterns = append(f.Patterns, pat)
		}
		sort.Strings(f.Patterns)
		f.Cancel = len(f.Patterns) >= p.CancelAt && o.OrderState == flashsale.OrderConfirmed
		rep.Findings = append(rep.Findings, f)
	}
	return rep
}

// markBursts notes the members of a created-together group that reserved
// within Burst of Group-1 others of it.
func markBursts(group []flashsale.Attempt, p Policy, note func(resID, pattern string)) {
	byTime := append([]flashsale.Attempt(nil), group...)
	sort.Slice(byTime, func(i, j int) bool { return byTime[i].CreatedAt.Before(byTime[j].CreatedAt) })
	for i := range byTime {
		j := i
		for j < len(byTime) && byTime[j].CreatedAt.Sub(byTime[i].CreatedAt) <= p.Burst {
			j++
		}
		if j-i >= p.Group {
			for _, o := range byTime[i:j] {
				note(o.ReservationID, fmt.Sprintf("reserved within %s of %d accounts created with it", p.Burst, j-i-1))
			}
		}
	}
}
