package purchase

import (
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

func TestAnswerCacheExpiresAndIsBounded(t *testing.T) {
	now := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	c := newAnswerCache(3, time.Minute)
	sold := flashsale.Errorf(flashsale.CodeSoldOut, "sold out")
	c.put("a", answer{hash: "h", err: sold}, now)
	if a, ok := c.get("a", now.Add(59*time.Second)); !ok || a.err != sold {
		t.Fatalf("within the TTL: %+v %v", a, ok)
	}
	if _, ok := c.get("a", now.Add(time.Minute)); ok {
		t.Fatal("served after the TTL")
	}
	for i := 0; i < 10; i++ {
		c.put(fmt.Sprint(i), answer{hash: "h", err: sold}, now)
	}
	if len(c.entries) > 3 {
		t.Fatalf("%d entries kept, limit 3", len(c.entries))
	}
	if _, ok := c.get("9", now); !ok {
		t.Fatal("the newest entry was evicted")
	}
	if _, ok := c.get("0", now); ok {
		t.Fatal("the oldest entry survived past the limit")
	}
}

func TestRequestHashSeparatesFields(t *testing.T) {
	if RequestHash("s", 1, "ab") == RequestHash("s", 1, "a") || RequestHash("s", 1, "") == RequestHash("s", 2, "") ||
		RequestHash("sa", 1, "") == RequestHash("s", 1, "a") {
		t.Fatal("different requests share a hash")
	}
	if first, again := RequestHash("s", 1, "x"), RequestHash("s", 1, "x"); first != again {
		t.Fatal("the same request hashes differently")
	}
}

func TestCheck(t *testing.T) {
	sale := &flashsale.Sale{PerUserLimit: 2}
	for _, c := range []struct {
		key, fp string
		qty     int
		ok      bool
	}{
		{"k", "", 1, true}, {"k", "card", 2, true}, {"", "", 1, false}, {"k", "", 0, false}, {"k", "", 3, false},
		{"with space", "", 1, false}, {string(make([]byte, 256)), "", 1, false}, {"k", "bad\x1ffp", 1, false},
	} {
		err := Check(sale, c.key, c.qty, c.fp)
		if (err == nil) != c.ok || (err != nil && flashsale.ErrorCode(err) != flashsale.CodeBadRequest) {
			t.Errorf("Check(%q, %d, %q) = %v", c.key, c.qty, c.fp, err)
		}
	}
}

// TestSharedAnswerRoundTrip: a rejection kept for the fleet comes back
// with its request hash, code and message, whatever the message holds.
func TestSharedAnswerRoundTrip(t *testing.T) {
	in := answer{hash: "h1", err: flashsale.Errorf(flashsale.CodeSoldOut, "Sold out;\x1f with a separator")}
	out, ok := decodeAnswer(in.encode())
	if !ok || out.hash != "h1" || flashsale.ErrorCode(out.err) != flashsale.CodeSoldOut ||
		out.err.(*flashsale.Error).Message != "Sold out;\x1f with a separator" {
		t.Fatalf("round trip: %+v, %t", out, ok)
	}
	for _, bad := range []string{"", "h1", "h1\x1f"} {
		if _, ok := decodeAnswer(bad); ok {
			t.Errorf("decoded %q", bad)
		}
	}
}
