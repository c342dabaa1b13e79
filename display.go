package flashsale

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Display is how a sale looks to its shoppers on the waiting-room page:
// the shop's product, price and brand (contract: a sale's `display`).
// Every field is optional; the zero value shows the sale's name alone.
// Text fields are plain text, shown as text and never as markup.
//
// The record keeps it as one JSON text column: Value and Scan convert it,
// so a store passes a Display as a query argument and scans into one.
type Display struct {
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty" text:"multiline"`
	ImageURL    string `json:"imageUrl,omitempty"`
	PriceText   string `json:"priceText,omitempty"`
	// ShopURL is where the page sends a shopper after the sale (an order
	// confirmed, sold out, closed, not selected).
	ShopURL string `json:"shopUrl,omitempty"`
	// BrandColor is "#rrggbb".
	BrandColor string `json:"brandColor,omitempty"`
	LogoURL    string `json:"logoUrl,omitempty"`
}

// Limits of a Display's fields, in characters (runes); a URL's in bytes.
const (
	MaxDisplayTitle       = 200
	MaxDisplayDescription = 2000
	MaxDisplayPriceText   = 64
	MaxDisplayURL         = 2048
)

var brandColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// IsZero reports whether the display sets nothing.
func (d Display) IsZero() bool { return d == Display{} }

// Validate reports the first field a page could not show safely, as a
// CodeBadRequest *Error, or nil: text that is not printable UTF-8 (a
// description may break lines) or too long, a URL that is not absolute
// http(s) (no javascript:, data: or credentials), a colour that is not
// #rrggbb.
func (d Display) Validate() error {
	for _, f := range []struct {
		name, v   string
		max       int
		multiline bool
	}{
		{"display.title", d.Title, MaxDisplayTitle, false},
		{"display.description", d.Description, MaxDisplayDescription, true},
		{"display.priceText", d.PriceText, MaxDisplayPriceText, false},
	} {
		if err := plainText(f.name, f.v, f.max, f.multiline); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{
		{"display.imageUrl", d.ImageURL}, {"display.shopUrl", d.ShopURL}, {"display.logoUrl", d.LogoURL},
	} {
		if err := webURL(f.name, f.v); err != nil {
			return err
		}
	}
	if d.BrandColor != "" && !brandColor.MatchString(d.BrandColor) {
		return Errorf(CodeBadRequest, "display.brandColor must be a colour as #rrggbb")
	}
	return nil
}

func plainText(name, v string, max int, multiline bool) error {
	if !utf8.ValidString(v) {
		return Errorf(CodeBadRequest, "%s must be UTF-8 text", name)
	}
	if n := utf8.RuneCountInString(v); n > max {
		return Errorf(CodeBadRequest, "%s must be at most %d characters", name, max)
	}
	for _, r := range v {
		if r == '\n' && multiline {
			continue
		}
		// Control characters, and the bidirectional embeddings, overrides
		// and isolates, could make the text shown differ from the text
		// stored (or spill over what follows it on the page).
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) ||
			unicode.Is(unicode.Bidi_Control, r) && r != 0x200e && r != 0x200f {
			return Errorf(CodeBadRequest, "%s must be printable text (no control characters)", name)
		}
	}
	return nil
}

func webURL(name, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	switch {
	case len(v) > MaxDisplayURL:
		return Errorf(CodeBadRequest, "%s must be at most %d bytes", name, MaxDisplayURL)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return Errorf(CodeBadRequest, "%s must be an absolute http or https URL", name)
	case u.User != nil:
		return Errorf(CodeBadRequest, "%s must not carry a user name or password", name)
	case strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return Errorf(CodeBadRequest, "%s must not contain spaces or control characters", name)
	}
	return nil
}

// Value implements driver.Valuer: NULL for the zero display, else its JSON.
func (d Display) Value() (driver.Value, error) {
	if d.IsZero() {
		return nil, nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// Scan implements sql.Scanner, from NULL, text or bytes of JSON.
func (d *Display) Scan(src any) error {
	*d = Display{}
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("flashsale: scan a display from %T", src)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, d); err != nil {
		return errors.Join(errors.New("flashsale: the recorded display is not JSON"), err)
	}
	return nil
}
