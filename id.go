package flashsale

import "github.com/oklog/ulid/v2"

// NewID returns a new opaque, time-ordered id with a prefix that says what it
// names ("sale_", "res_", "ord_"). Safe for concurrent use.
func NewID(prefix string) string {
	return prefix + ulid.Make().String()
}
