package flashsale

import (
	"unicode"
	"unicode/utf8"
)

// The grammar of what enters the engine from outside, defined once: the
// HTTP layer checks every path value, query value, header and body string
// against it before any store is asked, so that nothing a client controls
// reaches a store as bytes the store might refuse (PostgreSQL refuses NUL
// and invalid UTF-8 in text, with an error that would be a 500).

// MaxSaleNameRunes is the longest sale name, in characters: a name is shown
// on the waiting-room page and in the operator's console, a line of text.
const MaxSaleNameRunes = 200

// MaxIDLen is the longest id the engine issues or accepts in a path.
const MaxIDLen = 64

// MaxInstrumentLen is the longest payment-instrument fingerprint, from the
// request body or the shopper JWT's claim alike.
const MaxInstrumentLen = 128

// ValidID reports whether s could be an id this engine issued (a
// reservation's, an order's, an event's, each a prefix and a ULID): 1 to
// MaxIDLen letters, digits, '_' or '-'. A path naming anything else names
// nothing, and is answered 404 without a lookup.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// ValidInstrument reports whether s may be a payment instrument's
// fingerprint: 1 to MaxInstrumentLen visible ASCII characters (no space,
// no control character, so never the gates' separator byte 0x1f).
func ValidInstrument(s string) bool {
	if s == "" || len(s) > MaxInstrumentLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ValidText reports whether s is text for a person of at most max
// characters: valid UTF-8 of printable characters (letters, marks, numbers,
// punctuation, symbols and spaces, and the zero-width joiners that emoji
// sequences need). Control characters (NUL, newlines, escapes) and other
// invisible format characters (such as the right-to-left override, which
// makes a text read otherwise than it is) are refused. The empty string is
// valid text; a caller that needs some says so.
func ValidText(s string, max int) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		return false
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) && r != '\u200c' && r != '\u200d' {
			return false
		}
	}
	return true
}

// CleanString reports whether s is valid UTF-8 without control characters
// (C0, DEL or C1): the least any string from outside must be before it is
// kept, compared or logged.
func CleanString(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || unicode.IsControl(r) {
			return false
		}
		i += n
	}
	return true
}
