package flashsale

import (
	"strings"
	"testing"
)

// TestDisplayValidate: what a shop really writes passes (prices with
// narrow no-break spaces, emoji sequences, a description of several
// lines, any script); what a page could not show as written does not.
func TestDisplayValidate(t *testing.T) {
	good := []Display{
		{},
		{Title: "Air « Rouge » 👩‍👩‍👧", PriceText: "199,00\u202f€", Description: "Line one.\nLine two.\n\nそして日本語。"},
		{Title: "Size <42> & \"quotes\""}, // plain text: shown as written, never as markup
		{ImageURL: "https://cdn.example.com/a.png?w=1&h=2#x", ShopURL: "http://localhost:8080/", BrandColor: "#A1b2C3"},
		{Title: strings.Repeat("é", MaxDisplayTitle)},
	}
	for _, d := range good {
		if err := d.Validate(); err != nil {
			t.Errorf("%+v: %v", d, err)
		}
	}
	bad := []Display{
		{Title: "bell\a"},
		{Title: "a\u2066isolate"},
		{Title: "\xff"},
		{PriceText: "a\nb"},
		{Title: strings.Repeat("é", MaxDisplayTitle+1)},
		{ImageURL: "ftp://example.com/a.png"},
		{ImageURL: "https:opaque"},
		{ImageURL: "//example.com/a.png"},
		{ImageURL: "https://example.com/" + strings.Repeat("a", MaxDisplayURL)},
		{LogoURL: "https://example.com/\ta"},
		{BrandColor: "#abc"},
		{BrandColor: "#abcdeg"},
	}
	for _, d := range bad {
		if err := d.Validate(); ErrorCode(err) != CodeBadRequest {
			t.Errorf("%+v: %v, want bad_request", d, err)
		}
	}
}

// TestDisplayRecorded: the record's column holds NULL for no display and
// the JSON otherwise, and reads back what was written.
func TestDisplayRecorded(t *testing.T) {
	if v, err := (Display{}).Value(); v != nil || err != nil {
		t.Fatalf("the zero display is written as %v, %v; want NULL", v, err)
	}
	d := Display{Title: "Rouge", BrandColor: "#c8102e", ShopURL: "https://shop.example.com/"}
	v, err := d.Value()
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []any{v, []byte(v.(string))} {
		var got Display
		if err := got.Scan(src); err != nil || got != d {
			t.Errorf("Scan(%T) = %+v, %v; want %+v", src, got, err, d)
		}
	}
	got := d
	if err := got.Scan(nil); err != nil || !got.IsZero() {
		t.Errorf("Scan(NULL) = %+v, %v; want the zero display", got, err)
	}
	if err := got.Scan("{not json"); err == nil {
		t.Error("Scan of a broken column succeeded")
	}
}
