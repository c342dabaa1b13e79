package httpapi

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/flashsale/flashsale"
)

// Bad input never reaches a store: every request is screened, before the
// mux, for what no route takes (screen), and every JSON body for strings
// that no field takes (cleanStrings, from decode). A store is then asked
// only about values of the grammar in the root package (flashsale.ValidSKU,
// ValidID, CleanString): PostgreSQL refuses NUL and invalid UTF-8 in text
// with an error, which used to surface as 500 on every route that names a
// sale, a reservation, an order or an event.

// screenedHeaders are the headers a route reads a value from that may be
// kept, compared or logged: each must be printable ASCII. Authorization is
// left to the verifiers, whose refusal (401) says more.
// They are kept in canonical form and read from the map directly:
// Header.Values canonicalizes its argument, which cost every poll an
// allocation for "X-Edge-ID" (canonically "X-Edge-Id").
var screenedHeaders = func() []string {
	names := []string{"Idempotency-Key", "X-Admission-Token", "X-Ticket", "If-Match", "X-Operator", "X-Edge-ID"}
	for i, n := range names {
		names[i] = http.CanonicalHeaderKey(n)
	}
	return names
}()

// screen answers what no route takes: a path, query or screened header
// with control characters or invalid UTF-8 (400), and a path naming a
// sale, reservation, order or event that cannot exist (404), so that no
// store is asked about it.
func screen(r *http.Request) error {
	if !flashsale.CleanString(r.URL.Path) {
		return flashsale.Errorf(flashsale.CodeBadRequest, "The path has control characters or invalid UTF-8, which no route takes.")
	}
	if !cleanQuery(r.URL.RawQuery) {
		return flashsale.Errorf(flashsale.CodeBadRequest, "The query has control characters or invalid UTF-8, which no parameter takes.")
	}
	for _, name := range screenedHeaders {
		for _, v := range r.Header[name] {
			if !printableASCII(v) {
				return flashsale.Errorf(flashsale.CodeBadRequest, "The %s header must be printable ASCII.", name)
			}
		}
	}
	switch kind, v := pathName(r.URL); {
	case kind == "sku" && !flashsale.ValidSKU(v):
		return flashsale.Errorf(flashsale.CodeNotFound, "No such sale.")
	case kind != "" && kind != "sku" && !flashsale.ValidID(v):
		return flashsale.Errorf(flashsale.CodeNotFound, "No such %s.", kind)
	}
	return nil
}

// pathNames are the path prefixes whose next segment names something, and
// what it names.
var pathNames = []struct{ prefix, kind string }{
	{"/sale/", "sku"},
	{"/admin/sales/", "sku"},
	{"/reservations/", "reservation"},
	{"/admin/orders/", "order"},
	{"/admin/outbox/", "event"},
}

// pathName returns what u's named segment names ("sku", or the kind of
// id) and the segment, unescaped as the mux reads it (segments are cut on
// the escaped path, so an escaped slash stays in its segment); "" when the
// path names nothing.
func pathName(u *url.URL) (kind, value string) {
	p := u.EscapedPath()
	for _, n := range pathNames {
		if rest, ok := strings.CutPrefix(p, n.prefix); ok {
			seg, _, _ := strings.Cut(rest, "/")
			if rest == "" {
				return "", "" // the collection itself (GET /admin/sales/ is no route either way)
			}
			if value, err := url.PathUnescape(seg); err == nil {
				return n.kind, value
			}
			return n.kind, "" // not the grammar of anything
		}
	}
	return "", ""
}

// cleanQuery reports whether every key and value of the raw query,
// unescaped, is clean text. The poll's query (a token of URL-safe
// characters) takes the first, cheap branch.
func cleanQuery(raw string) bool {
	if printableASCII(raw) && !strings.Contains(raw, "%") {
		return true
	}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		key, value, _ := strings.Cut(pair, "=")
		for _, s := range []string{key, value} {
			u, err := url.QueryUnescape(s)
			if err != nil {
				u = s // as url.ParseQuery: a malformed pair is skipped; its bytes must still be clean
			}
			if !flashsale.CleanString(u) {
				return false
			}
		}
	}
	return true
}

// printableASCII reports whether s is all printable ASCII (space to '~').
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// cleanStrings returns the JSON name of the first string in v (a decoded
// body) that is not clean text (flashsale.CleanString), or "" when all
// are. It walks every exported field, element and map entry, so a field
// added to a body later is covered without a word here. A string field
// tagged text:"multiline" may also hold line feeds.
func cleanStrings(v reflect.Value, name string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return cleanStrings(v.Elem(), name)
	case reflect.String:
		if !flashsale.CleanString(v.String()) {
			return name
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			field := f.Name
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
				field = tag
			}
			if f.Anonymous {
				field = name
			} else if name != "" {
				field = name + "." + field
			}
			fv := v.Field(i)
			if f.Tag.Get("text") == "multiline" && fv.Kind() == reflect.String {
				// Text a person writes in paragraphs (a product's
				// description): line feeds are its own, nothing else.
				if !flashsale.CleanString(strings.ReplaceAll(fv.String(), "\n", "")) {
					return field
				}
				continue
			}
			if bad := cleanStrings(fv, field); bad != "" {
				return bad
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if bad := cleanStrings(v.Index(i), name); bad != "" {
				return bad
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if bad := cleanStrings(it.Key(), name); bad != "" {
				return bad
			}
			if bad := cleanStrings(it.Value(), name); bad != "" {
				return bad
			}
		}
	}
	return ""
}
