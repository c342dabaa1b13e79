package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// Waiter waits in a sale's waiting room for one ticket: it polls the
// ticket's status no sooner than each answer's Retry-After, plus the
// client's jitter, until the shopper is admitted or the wait is over, and
// solves the proof of work on the way when the sale asks one.
//
// The zero value is not usable: set Client and SKU. A Waiter holds no state
// between calls to Wait, so one may serve many shoppers at once (if OnStatus
// and Solve may be called concurrently).
type Waiter struct {
	Client *Client
	SKU    string
	// OnStatus, when set, is called with every status the waiter reads
	// (the position and estimate of a waiting shopper, say, to pass to
	// the shopper's page), and with the admission a solved challenge
	// earns, before Wait acts on it.
	OnStatus func(*Status)
	// Solve solves a proof of work; nil means SolveChallenge, here. A
	// backend that has the shopper's browser do the work sets
	// ReturnChallenge instead.
	Solve func(ctx context.Context, c Challenge) (nonce string, err error)
	// ReturnChallenge makes Wait return a challenge status instead of
	// solving it.
	ReturnChallenge bool
}

// maxChallengeFailures is how many challenge_failed answers in a row a
// Wait takes (a salt that expired, or was spent by an admission whose
// answer was lost) before it gives up: the server holds shoppers who fail
// too often as automation.
const maxChallengeFailures = 3

// Wait polls the status of ticket until it is final and returns it:
//
//   - admitted: AdmissionToken is the token for the reserve, good for
//     ExpiresIn seconds;
//   - challenge, with ReturnChallenge set: the proof of work to solve
//     and post (Client.Admission);
//   - sold_out with Final true: nothing can come back (while Final is
//     false, a shopper who keeps polling keeps the place, and Wait does);
//   - closed, or not_selected (a lottery's draw passed the shopper by).
//
// The first poll is at once, as the waiting-room page's is after its
// ticket; scheduled, waiting and paused answers, and a sold-out one not yet
// final, are polled again after their Retry-After (a second where an
// answer has none) plus the client's jitter, never sooner. The returned status's Token is
// the ticket as it stands at the end: the draw may have replaced the one
// Wait began with, and the shopper should keep the new one.
//
// The errors are the status route's (ErrInvalidToken, ErrNotEligible,
// the admission's after repeated ErrChallengeFailed), a network error or
// 503 once the client's repeats run out, and ctx's.
func (w *Waiter) Wait(ctx context.Context, ticket string) (*Status, error) {
	if w.Client == nil || w.SKU == "" {
		return nil, errors.New("flashsale client: a Waiter needs a Client and a SKU")
	}
	c := w.Client
	failures := 0
	for {
		st, err := c.Status(ctx, w.SKU, ticket)
		if err != nil {
			return nil, err
		}
		if st.Token != "" {
			ticket = st.Token
		}
		st.Token = ticket
		w.notify(st)
		next := st.RetryAfter
		switch st.State {
		case StateAdmitted, StateClosed, StateNotSelected:
			return st, nil
		case StateSoldOut:
			if st.Final {
				return st, nil
			}
		case StateChallenge:
			if w.ReturnChallenge || st.Challenge == nil {
				return st, nil
			}
			solve := w.Solve
			if solve == nil {
				solve = SolveChallenge
			}
			nonce, err := solve(ctx, *st.Challenge)
			if err != nil {
				return nil, err
			}
			adm, err := c.Admission(ctx, w.SKU, AdmissionRequest{Token: ticket, Salt: st.Challenge.Salt, Nonce: nonce})
			if err == nil {
				out := &Status{State: StateAdmitted, AdmissionToken: adm.AdmissionToken, ExpiresIn: adm.ExpiresIn, Token: ticket}
				w.notify(out)
				return out, nil
			}
			var e *Error
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case !errors.As(err, &e):
				// No answer: the admission may have been made, and its
				// salt spent; the status says admitted if so. Counted as
				// a failure, so that a server that never answers ends
				// the wait.
				if failures++; failures >= maxChallengeFailures {
					return nil, err
				}
				next = backoff(failures)
			case e.Code == CodeChallengeFailed:
				// The salt expired while it was solved, or an admission
				// whose answer was lost spent it: the status says which
				// (a new challenge, or admitted).
				if failures++; failures >= maxChallengeFailures {
					return nil, err
				}
				next = e.RetryAfter
			case e.Code == CodeNotAdmitted || e.Code == CodeSoldOut || e.Code == CodeSalePaused || e.Code == CodeClosed ||
				e.Code == CodeNotSelected || e.comeBack():
				// The place moved on between the status and the
				// admission; the status tells the shopper what now.
				next = e.RetryAfter
			default:
				return nil, err
			}
		}
		if next <= 0 {
			next = time.Second
		}
		if err := c.sleep(ctx, next+max(c.jitter(next), 0)); err != nil {
			return nil, err
		}
	}
}

func (w *Waiter) notify(st *Status) {
	if w.OnStatus != nil {
		w.OnStatus(st)
	}
}

// SolveChallenge finds the smallest decimal nonce such that
// SHA-256(Salt + nonce) begins with at least DifficultyBits zero bits, as
// the contract's proof of work (algorithm "sha256") asks. It works about
// 2^DifficultyBits hashes, checking ctx as it goes, and returns ctx's
// error if ctx is done first. An algorithm other than sha256, or a
// difficulty outside 0 to 256, is an error.
func SolveChallenge(ctx context.Context, c Challenge) (string, error) {
	if c.Algorithm != "sha256" {
		return "", fmt.Errorf("flashsale client: unknown proof-of-work algorithm %q", c.Algorithm)
	}
	if c.DifficultyBits < 0 || c.DifficultyBits > sha256.Size*8 {
		return "", fmt.Errorf("flashsale client: proof-of-work difficulty %d is out of range", c.DifficultyBits)
	}
	buf := make([]byte, 0, len(c.Salt)+20)
	buf = append(buf, c.Salt...)
	for n := uint64(0); ; n++ {
		if n&0xfff == 0 && n > 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		buf = strconv.AppendUint(buf[:len(c.Salt)], n, 10)
		if leadingZeroBits(sha256.Sum256(buf)) >= c.DifficultyBits {
			return string(buf[len(c.Salt):]), nil
		}
	}
}

func leadingZeroBits(sum [sha256.Size]byte) int {
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}
