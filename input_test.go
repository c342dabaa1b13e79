package flashsale_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestSKUGrammar: "." and ".." name no sale (a path cannot carry them as a
// segment), nor anything with bytes outside the grammar.
func TestSKUGrammar(t *testing.T) {
	for _, sku := range []string{"a", "sku-1", "A_b.c", "...", ".a", strings.Repeat("x", 128)} {
		if !flashsale.ValidSKU(sku) {
			t.Errorf("ValidSKU(%q) = false", sku)
		}
	}
	for _, sku := range []string{"", ".", "..", "a/b", "a\x00", "a b", "é", "a%00", strings.Repeat("x", 129)} {
		if flashsale.ValidSKU(sku) {
			t.Errorf("ValidSKU(%q) = true", sku)
		}
	}
}

func TestIDGrammar(t *testing.T) {
	for _, id := range []string{flashsale.NewID("res_"), flashsale.NewID("ord_"), flashsale.NewEventID(), "r1"} {
		if !flashsale.ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
	for _, id := range []string{"", "res_\x00", "a.b", "..", "a/b", "\xff", strings.Repeat("x", 65)} {
		if flashsale.ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
}

func TestInstrumentGrammar(t *testing.T) {
	for _, fp := range []string{"card-1", "tok_9Zx+/=", strings.Repeat("x", 128)} {
		if !flashsale.ValidInstrument(fp) {
			t.Errorf("ValidInstrument(%q) = false", fp)
		}
	}
	for _, fp := range []string{"", "a b", "a\x1fb", "a\x00", "é", strings.Repeat("x", 129)} {
		if flashsale.ValidInstrument(fp) {
			t.Errorf("ValidInstrument(%q) = true", fp)
		}
	}
}

func TestTextGrammar(t *testing.T) {
	for _, s := range []string{"", "Red sneaker, size 42", "Café crème — 限定", "Family 👨\u200d👩\u200d👧", "tab\u3000wide"} {
		if !flashsale.ValidText(s, 200) || !flashsale.CleanString(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"a\x00b", "line\nbreak", "tab\t", "esc\x1b[31m", "del\x7f", "c1\u0085", "\xff\xfe", "bidi\u202eevil"} {
		if flashsale.ValidText(s, 200) {
			t.Errorf("ValidText(%q) = true", s)
		}
	}
	for _, s := range []string{"a\x00b", "line\nbreak", "del\x7f", "c1\u0085", "\xc3\x28"} {
		if flashsale.CleanString(s) {
			t.Errorf("CleanString(%q) = true", s)
		}
	}
	if flashsale.ValidText(strings.Repeat("é", 201), 200) || !flashsale.ValidText(strings.Repeat("é", 200), 200) {
		t.Error("the bound counts characters, not bytes")
	}
}

// TestSaleNameIsBoundedText: a sale's name is printable text of at most
// MaxSaleNameRunes characters; a SKU of "." or ".." is refused.
func TestSaleNameIsBoundedText(t *testing.T) {
	base := func() *flashsale.Sale {
		s := &flashsale.Sale{SKU: "s", Name: "Fine", InitialStock: 1, OpensAt: time.Unix(1, 0)}
		s.ApplyDefaults()
		return s
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*flashsale.Sale){
		func(s *flashsale.Sale) { s.Name = "bell\x07" },
		func(s *flashsale.Sale) { s.Name = "nul\x00" },
		func(s *flashsale.Sale) { s.Name = strings.Repeat("n", flashsale.MaxSaleNameRunes+1) },
		func(s *flashsale.Sale) { s.SKU = "." },
		func(s *flashsale.Sale) { s.SKU = ".." },
	} {
		s := base()
		mut(s)
		if err := s.Validate(); flashsale.ErrorCode(err) != flashsale.CodeBadRequest {
			t.Errorf("%q/%q: %v, want bad_request", s.SKU, s.Name, err)
		}
	}
}
