package httpapi

import (
	"net/url"
	"testing"
)

// TestQueryValue: the poll's token is read as url.Values.Get reads it.
func TestQueryValue(t *testing.T) {
	for _, raw := range []string{
		"", "token=abc", "x=1&token=abc", "token=a%2Bb%3D&token=second", "token=a+b", "token=",
		"token", "tok%65n=escaped-key", "token=%zz", "token=a;b", "a=1;token=b&token=c", "x=1&&token=after-empty", "token=%zz&token=ok",
	} {
		want := ""
		if v, err := url.ParseQuery(raw); err == nil || v.Has("token") {
			want = v.Get("token")
		}
		if got := queryValue(raw, "token"); got != want {
			t.Errorf("queryValue(%q) = %q, url.ParseQuery says %q", raw, got, want)
		}
	}
}
