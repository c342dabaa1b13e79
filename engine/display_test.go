package engine_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestSaleDisplay: a sale's display (the shop's title, text, image,
// price, links, colour) is taken at create, published with the sale,
// replaced by a PATCH under If-Match and cleared by an empty one; a field
// a page could not show safely is refused with 400 bad_request, on create
// and on patch alike.
func TestSaleDisplay(t *testing.T) {
	h := newHarness(t, backends[0])
	display := map[string]any{
		"title": "Air Rouge <OG> — 1 of 100", "description": "Hand-stitched.\nShips in a week.",
		"imageUrl": "https://cdn.example.com/rouge.png", "priceText": "€ 199",
		"shopUrl": "https://shop.example.com/drops", "brandColor": "#c8102e", "logoUrl": "https://cdn.example.com/logo.svg",
	}
	created := h.createSale("rouge", map[string]any{"display": display})
	if !reflect.DeepEqual(created["display"], display) {
		t.Fatalf("created display %v, want %v", created["display"], display)
	}
	published := func() any {
		t.Helper()
		r := h.do("GET", "/sale/rouge", nil, nil)
		if r.status != 200 {
			t.Fatalf("GET /sale/rouge: %d %s", r.status, r.body)
		}
		return r.json(t)["display"]
	}
	if got := published(); !reflect.DeepEqual(got, display) {
		t.Fatalf("published display %v, want %v", got, display)
	}

	bad := []map[string]any{
		{"title": "tab\there"},
		{"title": "right-to-left \u202eoverride"},
		{"title": strings.Repeat("x", 201)},
		{"description": strings.Repeat("y", 2001)},
		{"priceText": "two\nlines"},
		{"imageUrl": "javascript:alert(1)"},
		{"imageUrl": "data:image/png;base64,AAAA"},
		{"shopUrl": "/relative/path"},
		{"shopUrl": "https://user:secret@shop.example.com/"},
		{"logoUrl": "https://shop.example.com/a b.svg"},
		{"brandColor": "red"},
		{"brandColor": "#12345"},
		{"unknownField": "x"},
	}
	for _, d := range bad {
		r := h.do("POST", "/admin/sales", nil, map[string]any{"sku": "bad", "initialStock": 1,
			"opensAt": h.clock.Now().Format("2006-01-02T15:04:05Z07:00"), "display": d})
		if r.status != 400 || r.code() != "bad_request" {
			t.Errorf("create with display %v: %d %s, want 400 bad_request", d, r.status, r.body)
		}
		r = h.do("PATCH", "/admin/sales/rouge", map[string]string{"If-Match": "1"}, map[string]any{"display": d})
		if r.status != 400 || r.code() != "bad_request" {
			t.Errorf("patch with display %v: %d %s, want 400 bad_request", d, r.status, r.body)
		}
	}

	// A patch replaces the display as a whole, under If-Match like any
	// other field, and the sale publishes it at once.
	if r := h.do("PATCH", "/admin/sales/rouge", nil, map[string]any{"display": map[string]any{"title": "x"}}); r.status != 428 {
		t.Fatalf("patch without If-Match: %d %s", r.status, r.body)
	}
	next := map[string]any{"title": "Air Rouge, restocked", "brandColor": "#004488"}
	r := h.do("PATCH", "/admin/sales/rouge", map[string]string{"If-Match": `"1"`}, map[string]any{"display": next})
	if r.status != 200 || !reflect.DeepEqual(r.json(t)["display"], any(next)) {
		t.Fatalf("patch display: %d %s", r.status, r.body)
	}
	if got := published(); !reflect.DeepEqual(got, any(next)) {
		t.Fatalf("published after the patch %v, want %v", got, next)
	}
	if r := h.do("PATCH", "/admin/sales/rouge", map[string]string{"If-Match": "1"}, map[string]any{"display": next}); r.status != 412 {
		t.Fatalf("patch at a stale version: %d %s", r.status, r.body)
	}
	// A patch that leaves display out keeps it.
	if r := h.do("PATCH", "/admin/sales/rouge", map[string]string{"If-Match": "2"}, map[string]any{"name": "Renamed"}); r.status != 200 {
		t.Fatalf("patch the name: %d %s", r.status, r.body)
	}
	if got := published(); !reflect.DeepEqual(got, any(next)) {
		t.Fatalf("a patch without display changed it to %v", got)
	}
	// An empty one clears it: the sale then publishes none.
	if r := h.do("PATCH", "/admin/sales/rouge", map[string]string{"If-Match": "3"}, map[string]any{"display": map[string]any{}}); r.status != 200 {
		t.Fatalf("clear the display: %d %s", r.status, r.body)
	}
	if got := published(); got != nil {
		t.Fatalf("a cleared display is still published: %v", got)
	}
}

// TestBrowserAskingForASaleIsSentToItsPage: GET /sale/SKU from a browser
// (HTML in Accept) is redirected to the waiting room /sale/SKU/ rather
// than shown raw JSON; an API client still gets the JSON, and the answer
// says it varies by Accept so that no cache mixes them up.
func TestBrowserAskingForASaleIsSentToItsPage(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("kicks", nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(accept string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", h.srv.URL+"/sale/kicks", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	resp := get(browser)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sale/kicks/" {
		t.Fatalf("a browser: %d Location %q, want 303 to /sale/kicks/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, accept := range []string{"", "application/json", "*/*"} {
		resp := get(accept)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("Accept %q: %d %s, want the JSON", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if !strings.Contains(resp.Header.Get("Vary"), "Accept") {
			t.Errorf("Accept %q: Vary %q, want Accept", accept, resp.Header.Get("Vary"))
		}
	}
	// An unknown SKU goes to the page too, which says there is no such
	// sale in the shopper's language; a path that cannot name a sale is
	// answered 404 in JSON, whoever asks.
	if resp := getPath(client, t, h.srv.URL+"/sale/nope", browser); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("an unknown SKU from a browser: %d, want 303", resp.StatusCode)
	}
	resp = getPath(client, t, h.srv.URL+"/sale/no%20such", browser)
	if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("a path that names no sale, from a browser: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func getPath(client *http.Client, t *testing.T, url, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	return resp
}
