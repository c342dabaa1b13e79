package token_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/token"
)

// The fuzz rings use fixed secrets so that the valid tokens of the
// checked-in corpus (testdata/fuzz) keep verifying: the fuzzer mutates
// genuine tokens, not only noise.
func fuzzRings(f *testing.F) (ring, old *token.Keyring) {
	return newRing(f, testKey("fz1"), testKey("fz0")), newRing(f, testKey("fz0"))
}

func FuzzVerifyTicket(f *testing.F) {
	ring, old := fuzzRings(f)
	f.Add(ring.SignTicket(sampleTicket()))
	f.Add(old.SignTicket(token.Ticket{UserID: "u", SaleID: sampleSale, Arrival: t0, Position: 1}))
	f.Add(ring.SignTicketFormat2(sampleTicket()))
	f.Add(ring.SignTicket(token.Ticket{}))
	f.Add(ring.SignAdmission(sampleAdmission()))
	f.Add("")
	f.Add("tkt_")
	f.Add("tkt_." + strings.Repeat("A", 22))
	f.Add("tkt_AgECazECdTECczHQDw4A.Em12eP_Zap23SRO2yMySgQ")
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ring.VerifyTicket(s, sampleSale)
		if err != nil {
			if err != token.ErrInvalid || tk != (token.Ticket{}) {
				t.Fatalf("VerifyTicket(%q) = %+v, %v; want a zero ticket and ErrInvalid", s, tk, err)
			}
			return
		}
		if len(s) > token.MaxLen {
			t.Fatalf("a %d-byte ticket verified", len(s))
		}
		// Every ticket that verifies is the one encoding of its fields
		// in its format: there is no second spelling of a genuine ticket.
		if ring.SignTicket(tk) != s && old.SignTicket(tk) != s &&
			ring.SignTicketFormat2(tk) != s && old.SignTicketFormat2(tk) != s {
			t.Fatalf("VerifyTicket(%q) = %+v, which signs differently", s, tk)
		}
	})
}

func FuzzVerifyAdmission(f *testing.F) {
	ring, old := fuzzRings(f)
	a := sampleAdmission()
	f.Add(ring.SignAdmission(a), t0.UnixMilli())
	f.Add(ring.SignAdmission(a), a.Expires.UnixMilli())
	f.Add(old.SignAdmission(token.Admission{UserID: "u", SaleID: "s", ID: "i", Expires: t0, Epoch: 1}), t0.UnixMilli()-1)
	f.Add(ring.SignTicket(sampleTicket()), t0.UnixMilli())
	f.Add("adm_", int64(0))
	f.Add("adm_."+strings.Repeat("_", 22), int64(-1))
	f.Fuzz(func(t *testing.T, s string, nowMs int64) {
		now := time.UnixMilli(nowMs)
		a, err := ring.VerifyAdmission(s, now)
		switch err {
		case nil:
			if !now.Before(a.Expires) {
				t.Fatalf("VerifyAdmission(%q, %v) accepted an admission that expired at %v", s, now, a.Expires)
			}
		case token.ErrExpired:
			if now.Before(a.Expires) {
				t.Fatalf("VerifyAdmission(%q, %v): ErrExpired before Expires %v", s, now, a.Expires)
			}
		case token.ErrInvalid:
			if a != (token.Admission{}) {
				t.Fatalf("VerifyAdmission(%q) = %+v with ErrInvalid; want a zero admission", s, a)
			}
			return
		default:
			t.Fatalf("VerifyAdmission(%q): unexpected error %v", s, err)
		}
		if len(s) > token.MaxLen {
			t.Fatalf("a %d-byte admission verified", len(s))
		}
		if ring.SignAdmission(a) != s && old.SignAdmission(a) != s {
			t.Fatalf("VerifyAdmission(%q) = %+v, which signs differently", s, a)
		}
	})
}

// TestFuzzCorpusIsGenuine checks that the corpus's "valid" seeds still
// verify, so the fuzzer keeps starting from genuine tokens; they stop doing
// so if testKey or the format changes.
func TestFuzzCorpusIsGenuine(t *testing.T) {
	ring := newRing(t, testKey("fz1"), testKey("fz0"))
	// The corpus's tickets are of format 2, each of its own sale.
	for name, sale := range map[string]string{"valid": sampleSale, "valid_old_key": "s", "valid_empty_fields": ""} {
		s := readSeed(t, "FuzzVerifyTicket", name)
		if _, err := ring.VerifyTicket(s, sale); err != nil {
			t.Errorf("FuzzVerifyTicket/%s: %v", name, err)
		}
	}
	for _, name := range []string{"valid", "valid_old_key"} {
		s := readSeed(t, "FuzzVerifyAdmission", name)
		if _, err := ring.VerifyAdmission(s, time.UnixMilli(0)); err != nil {
			t.Errorf("FuzzVerifyAdmission/%s: %v", name, err)
		}
	}
}

// readSeed returns the first value, a string, of a seed corpus file.
func readSeed(t *testing.T, target, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", target, name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "string(") {
		t.Fatalf("%s/%s: not a corpus file of a string", target, name)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
	if err != nil {
		t.Fatalf("%s/%s: %v", target, name, err)
	}
	return s
}
