package flashsale

import (
	"strings"
	"testing"
)

func TestHasSeparator(t *testing.T) {
	for _, s := range []string{"", "a", "abcdefg", "abcdefgh", "abcdefghijklmnopq", "\x1f", "abcdefgh\x1f", "abcdefg\x1fh", "\x1fbcdefghij", "abc\x1e\x20\x9f\xff", strings.Repeat("\x3f", 33)} {
		if got, want := HasSeparator(s), strings.Contains(s, "\x1f"); got != want {
			t.Errorf("HasSeparator(%q) = %v; want %v", s, got, want)
		}
	}
	for i := range 40 {
		b := []byte(strings.Repeat("x", 40))
		b[i] = 0x1f
		if !HasSeparator(string(b)) {
			t.Errorf("HasSeparator misses the separator at %d", i)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := GateReserve{SaleID: "s", ReservationID: "r", UserID: "u", IdempotencyKey: "k", Quantity: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*GateReserve){
		func(r *GateReserve) { r.Quantity = 0 },
		func(r *GateReserve) { r.UserID = "" },
		func(r *GateReserve) { r.Instrument = "card\x1f2" },
	} {
		r := ok
		bad(&r)
		if r.Validate() == nil {
			t.Errorf("%+v: no error", r)
		}
	}
	if _, err := ValidateHolds([]Hold{{ReservationID: "r", UserID: "u", Quantity: 1}, {ReservationID: "r", UserID: "v", Quantity: 1}}); err == nil {
		t.Error("a hold twice: no error")
	}
	if n, err := ValidateHolds([]Hold{{ReservationID: "r", UserID: "u", Quantity: 2}, {ReservationID: "q", UserID: "v", Quantity: 1}}); n != 3 || err != nil {
		t.Errorf("two holds: %d units, %v", n, err)
	}
}
