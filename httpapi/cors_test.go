package httpapi

import (
	"slices"
	"testing"
)

func TestParseCORSOrigins(t *testing.T) {
	got, err := ParseCORSOrigins(" HTTPS://Shop.Example:443, http://127.0.0.1:8081 ,https://[::1]:9000/,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://shop.example", "http://127.0.0.1:8081", "https://[::1]:9000"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, err := ParseCORSOrigins(""); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %q %v", got, err)
	}
	for _, bad := range []string{"*", "https://*.shop.example", "shop.example", "ftp://shop.example",
		"https://shop.example/checkout", "https://shop.example?x=1", "https://user@shop.example", "null", "https://"} {
		if _, err := ParseCORSOrigins("https://ok.example," + bad); err == nil {
			t.Errorf("%q was accepted as an origin", bad)
		}
	}
}
