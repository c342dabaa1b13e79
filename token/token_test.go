package token_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/token"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

// sampleSale is the sale of sampleTicket and sampleAdmission.
const sampleSale = "sale_01J8ZQ6X2N3M4P5Q6R7S8T9V0W"

func newRing(t testing.TB, keys ...token.Key) *token.Keyring {
	t.Helper()
	r, err := token.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sampleTicket() token.Ticket {
	return token.Ticket{
		UserID:   "user-341902",
		SaleID:   "sale_01J8ZQ6X2N3M4P5Q6R7S8T9V0W",
		Arrival:  t0.Add(1234567 * time.Microsecond), // sub-millisecond part is dropped
		Position: 341902,
	}
}

func sampleAdmission() token.Admission {
	return token.Admission{
		UserID:  "user-341902",
		SaleID:  "sale_01J8ZQ6X2N3M4P5Q6R7S8T9V0W",
		ID:      token.AdmissionID("sale_01J8ZQ6X2N3M4P5Q6R7S8T9V0W", "user-341902"),
		Expires: t0.Add(120 * time.Second),
		Epoch:   3,
	}
}

func TestTicketRoundTrip(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	for _, tk := range []token.Ticket{
		sampleTicket(),
		{},
		{UserID: "ü\x00\xff", SaleID: strings.Repeat("s", 300), Arrival: time.UnixMilli(-1), Position: -1},
		{UserID: "u", SaleID: "s", Arrival: time.UnixMilli(1<<62 - 1), Position: 1<<63 - 1},
	} {
		s := ring.SignTicket(tk)
		if !strings.HasPrefix(s, "tkt_") {
			t.Errorf("ticket token %q lacks the tkt_ prefix", s)
		}
		got, err := ring.VerifyTicket(s, tk.SaleID)
		if err != nil {
			t.Fatalf("VerifyTicket(SignTicket(%+v)): %v", tk, err)
		}
		want := tk
		want.Arrival = time.UnixMilli(tk.Arrival.UnixMilli()).UTC()
		if got != want {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
	// Signing is deterministic: the same ticket always yields the same token.
	if a, b := ring.SignTicket(sampleTicket()), ring.SignTicket(sampleTicket()); a != b {
		t.Errorf("two signatures of one ticket differ: %q, %q", a, b)
	}
}

func TestTicketArrivalIsMillisecondsUTC(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	tk := sampleTicket()
	tk.Arrival = time.Date(2026, 8, 1, 12, 0, 0, 999_999_999, time.FixedZone("CEST", 2*3600))
	got, err := ring.VerifyTicket(ring.SignTicket(tk), sampleSale)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 8, 1, 10, 0, 0, 999_000_000, time.UTC)
	if got.Arrival != want {
		t.Errorf("Arrival = %v, want %v", got.Arrival, want)
	}
}

func TestAdmissionRoundTrip(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	a := sampleAdmission()
	s := ring.SignAdmission(a)
	if !strings.HasPrefix(s, "adm_") {
		t.Errorf("admission token %q lacks the adm_ prefix", s)
	}
	got, err := ring.VerifyAdmission(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got != a {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, a)
	}
}

func TestAdmissionExpiryBoundary(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	a := sampleAdmission()
	s := ring.SignAdmission(a)

	if _, err := ring.VerifyAdmission(s, a.Expires.Add(-time.Millisecond)); err != nil {
		t.Errorf("a millisecond before Expires: %v, want valid", err)
	}
	if _, err := ring.VerifyAdmission(s, a.Expires.Add(-time.Nanosecond)); err != nil {
		t.Errorf("a nanosecond before Expires: %v, want valid", err)
	}
	for _, now := range []time.Time{a.Expires, a.Expires.Add(time.Nanosecond), a.Expires.Add(time.Hour)} {
		got, err := ring.VerifyAdmission(s, now)
		if !errors.Is(err, token.ErrExpired) {
			t.Fatalf("at Expires%+v: err = %v, want ErrExpired", now.Sub(a.Expires), err)
		}
		// The caller still learns whose admission it was.
		if got != a {
			t.Errorf("an expired admission decodes to %+v, want %+v", got, a)
		}
	}
}

func TestTamperedTokensAreInvalid(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	now := t0
	for name, tc := range map[string]struct {
		s      string
		verify func(string) error
	}{
		"ticket": {ring.SignTicket(sampleTicket()), func(s string) error {
			_, err := ring.VerifyTicket(s, sampleSale)
			return err
		}},
		"admission": {ring.SignAdmission(sampleAdmission()), func(s string) error {
			_, err := ring.VerifyAdmission(s, now)
			return err
		}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.verify(tc.s); err != nil {
				t.Fatalf("the untampered token: %v", err)
			}
			alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \x00\xff"
			for i := 0; i < len(tc.s); i++ {
				for j := 0; j < len(alphabet); j++ {
					if alphabet[j] == tc.s[i] {
						continue
					}
					m := tc.s[:i] + string(alphabet[j]) + tc.s[i+1:]
					if err := tc.verify(m); err != token.ErrInvalid {
						t.Fatalf("byte %d changed to %q: err = %v, want ErrInvalid", i, alphabet[j], err)
					}
				}
				// Dropped and doubled bytes.
				if err := tc.verify(tc.s[:i] + tc.s[i+1:]); err != token.ErrInvalid {
					t.Fatalf("byte %d dropped: err = %v", i, err)
				}
				if err := tc.verify(tc.s[:i] + tc.s[i:i+1] + tc.s[i:]); err != token.ErrInvalid {
					t.Fatalf("byte %d doubled: err = %v", i, err)
				}
			}
			for _, m := range []string{"", tc.s[:4], tc.s + "A", tc.s + "AA", tc.s + ".", " " + tc.s, tc.s[:len(tc.s)-23]} {
				if err := tc.verify(m); err != token.ErrInvalid {
					t.Errorf("verify(%q) = %v, want ErrInvalid", m, err)
				}
			}
		})
	}
}

// TestForgedPayloadIsInvalid re-encodes a token's payload with a changed
// position but the old MAC: what a shopper trying to jump the queue would
// do.
func TestForgedPayloadIsInvalid(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	tk := sampleTicket()
	s := ring.SignTicket(tk)
	tk.Position = 1
	forged := ring.SignTicket(tk)
	// Splice the better position's payload onto the first token's MAC.
	spliced := forged[:strings.IndexByte(forged, '.')] + s[strings.IndexByte(s, '.'):]
	if _, err := ring.VerifyTicket(spliced, sampleSale); err != token.ErrInvalid {
		t.Fatalf("a spliced ticket: err = %v, want ErrInvalid", err)
	}
	// A ring with another secret under the same key id cannot sign for ours.
	other := newRing(t, token.Key{ID: "k1", Secret: []byte(strings.Repeat("x", token.MinSecretLen))})
	if _, err := ring.VerifyTicket(other.SignTicket(tk), sampleSale); err != token.ErrInvalid {
		t.Fatalf("a ticket of another secret: err = %v, want ErrInvalid", err)
	}
}

func TestUnknownKeyIsInvalid(t *testing.T) {
	signer := newRing(t, testKey("k9"))
	ring := newRing(t, testKey("k1"), testKey("k2"))
	if _, err := ring.VerifyTicket(signer.SignTicket(sampleTicket()), sampleSale); err != token.ErrInvalid {
		t.Errorf("ticket of an unknown key: err = %v, want ErrInvalid", err)
	}
	if _, err := ring.VerifyAdmission(signer.SignAdmission(sampleAdmission()), t0); err != token.ErrInvalid {
		t.Errorf("admission of an unknown key: err = %v, want ErrInvalid", err)
	}
}

func TestKeyRotation(t *testing.T) {
	oldKey, newKey := testKey("2026-07"), testKey("2026-08")
	before := newRing(t, oldKey)
	during := newRing(t, newKey, oldKey) // new key signs, old key still verifies
	after := newRing(t, newKey)          // old key dropped

	oldTicket := before.SignTicket(sampleTicket())
	oldAdmission := before.SignAdmission(sampleAdmission())
	newTicket := during.SignTicket(sampleTicket())

	if _, err := during.VerifyTicket(oldTicket, sampleSale); err != nil {
		t.Errorf("the rotating ring rejects a ticket of the old key: %v", err)
	}
	if _, err := during.VerifyAdmission(oldAdmission, t0); err != nil {
		t.Errorf("the rotating ring rejects an admission of the old key: %v", err)
	}
	if _, err := during.VerifyTicket(newTicket, sampleSale); err != nil {
		t.Errorf("the rotating ring rejects its own ticket: %v", err)
	}
	if _, err := after.VerifyTicket(newTicket, sampleSale); err != nil {
		t.Errorf("the new ring rejects a ticket of the new key: %v", err)
	}
	if newTicket == oldTicket {
		t.Error("the rotating ring still signs with the old key")
	}
	if _, err := before.VerifyTicket(newTicket, sampleSale); err != token.ErrInvalid {
		t.Errorf("the old ring accepts a ticket of a key it never had: %v", err)
	}
	if _, err := after.VerifyTicket(oldTicket, sampleSale); err != token.ErrInvalid {
		t.Errorf("a dropped key still verifies a ticket: err = %v", err)
	}
	if _, err := after.VerifyAdmission(oldAdmission, t0); err != token.ErrInvalid {
		t.Errorf("a dropped key still verifies an admission: err = %v", err)
	}
}

func TestKindsDoNotCross(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	tkt := ring.SignTicket(sampleTicket())
	adm := ring.SignAdmission(sampleAdmission())
	if _, err := ring.VerifyAdmission(tkt, t0); err != token.ErrInvalid {
		t.Errorf("a ticket verifies as an admission: err = %v", err)
	}
	if _, err := ring.VerifyTicket(adm, sampleSale); err != token.ErrInvalid {
		t.Errorf("an admission verifies as a ticket: err = %v", err)
	}
	// Relabelling the prefix does not help: the prefix is inside the MAC,
	// and so is the kind byte of the payload.
	if _, err := ring.VerifyAdmission("adm_"+tkt[4:], t0); err != token.ErrInvalid {
		t.Errorf("a relabelled ticket verifies as an admission: err = %v", err)
	}
	if _, err := ring.VerifyTicket("tkt_"+adm[4:], sampleSale); err != token.ErrInvalid {
		t.Errorf("a relabelled admission verifies as a ticket: err = %v", err)
	}
}

func TestOverlongInputIsInvalid(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	huge := "tkt_" + strings.Repeat("A", 1<<20) + "." + strings.Repeat("A", 22)
	if _, err := ring.VerifyTicket(huge, sampleSale); err != token.ErrInvalid {
		t.Errorf("a 1 MiB ticket: err = %v", err)
	}
	// A ticket with strings too long for MaxLen signs, but does not verify:
	// the limit holds for the server's own tokens too.
	tk := sampleTicket()
	tk.UserID = strings.Repeat("u", 760)
	s := ring.SignTicket(tk)
	if len(s) <= token.MaxLen {
		t.Fatalf("a ticket with a 760-byte user id is only %d bytes", len(s))
	}
	if _, err := ring.VerifyTicket(s, sampleSale); err != token.ErrInvalid {
		t.Errorf("an over-long ticket: err = %v", err)
	}
	// The documented budget: strings up to 640 bytes in all verify.
	a := sampleAdmission()
	a.UserID, a.SaleID, a.ID = strings.Repeat("u", 200), strings.Repeat("s", 408), strings.Repeat("i", 32)
	if _, err := ring.VerifyAdmission(ring.SignAdmission(a), t0); err != nil {
		t.Errorf("an admission within the documented budget: %v", err)
	}
}

// TestFormat pins the documented layout, so that a change to it is
// deliberate: tokens in flight at a deploy must still verify.
func TestFormat(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	s := ring.SignTicket(token.Ticket{UserID: "u1", SaleID: "s1", Arrival: time.UnixMilli(1000), Position: 7})
	body, mac, ok := strings.Cut(s[len("tkt_"):], ".")
	if !ok {
		t.Fatalf("no dot in %q", s)
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		3,           // version
		1,           // kind: ticket
		2, 'k', '1', // key id
		2, 'u', '1', // user id
		0xd0, 0x0f, // arrival 1000 ms, zig-zag varint
		14, // position 7, zig-zag varint
		0,  // account created: not given
	}
	if string(payload) != string(want) {
		t.Errorf("payload = %v, want %v", payload, want)
	}
	// The MAC covers the prefix, the payload and the sale id, which the
	// token does not carry.
	h := hmac.New(sha256.New, testKey("k1").Secret)
	h.Write([]byte("tkt_"))
	h.Write(payload)
	h.Write([]byte{2, 's', '1'})
	if wantMAC := base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16]); mac != wantMAC {
		t.Errorf("mac %q, want %q", mac, wantMAC)
	}
	const golden = "tkt_AwECazECdTHQDw4A.I-ogIyEfW7Pkq21zHxVwhw"
	if s != golden {
		t.Errorf("token = %q, want %q: a change of layout or MAC must be deliberate", s, golden)
	}
	if _, err := ring.VerifyTicket(golden, "s1"); err != nil {
		t.Errorf("a token of the documented format does not verify: %v", err)
	}
	// The sale is inside the MAC: the same token is no ticket of another
	// sale, however alike the ids.
	for _, other := range []string{"s2", "s", "s1\x00", "", "S1"} {
		if _, err := ring.VerifyTicket(golden, other); err != token.ErrInvalid {
			t.Errorf("the ticket of sale s1 checked for sale %q: err = %v, want ErrInvalid", other, err)
		}
	}
}

// TestPreviousFormatStillVerifies holds the restart promise across the
// upgrade to format 3 (docs/operations-restart.md: every ticket stays
// valid): a ticket of format 2, which carried its sale id, as a server
// before the upgrade handed it out, still verifies after it, for its own
// sale only, with every field; and a tampered one does not.
func TestPreviousFormatStillVerifies(t *testing.T) {
	ring := newRing(t, testKey("k1"))
	// Signed by the code of format 2 (commit f3399cd): u1, s1, 1000 ms, 7.
	const v2 = "tkt_AgECazECdTECczHQDw4A.Em12eP_Zap23SRO2yMySgQ"
	got, err := ring.VerifyTicket(v2, "s1")
	if err != nil {
		t.Fatalf("a ticket of format 2: %v", err)
	}
	want := token.Ticket{UserID: "u1", SaleID: "s1", Arrival: time.UnixMilli(1000).UTC(), Position: 7}
	if got != want {
		t.Errorf("a ticket of format 2 decodes to %+v, want %+v", got, want)
	}
	for _, other := range []string{"s2", "s", "", "s1\x00"} {
		if _, err := ring.VerifyTicket(v2, other); err != token.ErrInvalid {
			t.Errorf("a ticket of format 2 for sale s1, checked for sale %q: err = %v, want ErrInvalid", other, err)
		}
	}
	// Re-signed, it becomes a ticket of format 3 with the same fields.
	again, err := ring.VerifyTicket(ring.SignTicket(got), "s1")
	if err != nil || again != want {
		t.Errorf("a format-2 ticket signed again: %+v, %v; want %+v", again, err, want)
	}
	// Tampered, it does not.
	for i := 0; i < len(v2); i++ {
		m := v2[:i] + string(v2[i]^1) + v2[i+1:]
		if _, err := ring.VerifyTicket(m, "s1"); err != token.ErrInvalid {
			t.Fatalf("format 2, byte %d changed: err = %v, want ErrInvalid", i, err)
		}
	}
	// The token is shorter by the sale id and its length.
	if n3 := len(ring.SignTicket(sampleTicket())); n3 >= 100 {
		t.Errorf("a sample ticket of format 3 is %d bytes", n3)
	}
}

func TestAdmissionID(t *testing.T) {
	id := token.AdmissionID("sale_1", "user_1")
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("AdmissionID = %q, want 32 hex digits", id)
	}
	if again := token.AdmissionID("sale_1", "user_1"); again != id {
		t.Errorf("AdmissionID is not stable: %q then %q", id, again)
	}
	seen := map[string][2]string{}
	for _, in := range [][2]string{
		{"sale_1", "user_1"},
		{"sale_1", "user_2"},
		{"sale_2", "user_1"},
		{"ab", "c"},
		{"a", "bc"},
		{"", "abc"},
		{"abc", ""},
		{"user_1", "sale_1"},
		{"a\x01", "b"},
		{"a", "\x01b"},
	} {
		id := token.AdmissionID(in[0], in[1])
		if prev, dup := seen[id]; dup {
			t.Errorf("AdmissionID%q == AdmissionID%q", prev, in)
		}
		seen[id] = in
	}
}

func TestConcurrentUse(t *testing.T) {
	ring := newRing(t, testKey("k1"), testKey("k2"))
	old := newRing(t, testKey("k2"))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				tk := sampleTicket()
				tk.Position = int64(g*1000 + i)
				signer := ring
				if i%2 == 1 {
					signer = old
				}
				got, err := ring.VerifyTicket(signer.SignTicket(tk), sampleSale)
				if err != nil || got.Position != tk.Position {
					t.Errorf("goroutine %d: %+v, %v", g, got, err)
					return
				}
				a := sampleAdmission()
				a.Epoch = int64(i)
				if got, err := ring.VerifyAdmission(signer.SignAdmission(a), t0); err != nil || got.Epoch != a.Epoch {
					t.Errorf("goroutine %d: %+v, %v", g, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestZeroKeyring(t *testing.T) {
	var zero token.Keyring
	s := newRing(t, testKey("k1")).SignTicket(sampleTicket())
	if _, err := zero.VerifyTicket(s, sampleSale); err != token.ErrInvalid {
		t.Errorf("zero Keyring VerifyTicket: %v, want ErrInvalid", err)
	}
	if _, err := zero.VerifyAdmission(s, t0); err != token.ErrInvalid {
		t.Errorf("zero Keyring VerifyAdmission: %v, want ErrInvalid", err)
	}
	if id := zero.SigningKeyID(); id != "" {
		t.Errorf("zero Keyring SigningKeyID = %q", id)
	}
}
