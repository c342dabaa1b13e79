package memory

import (
	"math"
	"testing"
)

// TestPlaceTable: every place put is got back exactly, through growth and
// for the places whose fields do not fit a slot (kept beside it); keys
// sharing one half are different shoppers; each visits each place once.
func TestPlaceTable(t *testing.T) {
	var tb placeTable
	const base = int64(1_780_000_000_000)
	want := map[userKey]place{}
	put := func(k userKey, p place) {
		t.Helper()
		if _, ok := tb.get(k); ok {
			t.Fatalf("%v has a place before it was given", k)
		}
		tb.put(k, p)
		want[k] = p
	}
	for i := range 100_000 {
		x := uint64(i) * 0x9e3779b97f4a7c15
		put(userKey{x, x ^ 0xabcdef}, place{pos: int64(i + 1), arrival: base + int64(i%5000) - 2000})
	}
	// The same first half, another second: another shopper.
	put(userKey{1, 2}, place{pos: 200_001, arrival: base})
	put(userKey{1, 3}, place{pos: 200_002, arrival: base})
	// Fields a slot cannot hold.
	put(userKey{7, 7}, place{pos: math.MaxUint32 + 1, arrival: base})
	put(userKey{7, 8}, place{pos: 5, arrival: tb.base + math.MaxInt32 + 1})
	put(userKey{7, 9}, place{pos: 6, arrival: tb.base + math.MinInt32 - 1})
	put(userKey{7, 11}, place{pos: 7, arrival: tb.base + math.MinInt32}) // fits, just
	put(userKey{7, 10}, place{pos: -1, arrival: base})
	if tb.len() != len(want) || len(tb.over) != 4 {
		t.Fatalf("len %d (%d beside the slots), want %d (4)", tb.len(), len(tb.over), len(want))
	}
	for k, p := range want {
		if got, ok := tb.get(k); !ok || got != p {
			t.Fatalf("%v: %+v %v, want %+v", k, got, ok, p)
		}
	}
	if _, ok := tb.get(userKey{1, 4}); ok {
		t.Fatal("a key never put has a place")
	}
	seen := map[userKey]bool{}
	tb.each(func(k userKey, p place) {
		if seen[k] || want[k] != p {
			t.Fatalf("each: %v %+v (seen %v, want %+v)", k, p, seen[k], want[k])
		}
		seen[k] = true
	})
	if len(seen) != len(want) {
		t.Fatalf("each visited %d of %d", len(seen), len(want))
	}
	if load := float64(tb.n) / float64(len(tb.slots)); load > maxLoad {
		t.Fatalf("load %.2f", load)
	}
}
