package rehearsal

import (
	"bytes"
	"strings"
	"testing"
)

// TestUnsold: units left in stock once the sale settled are reported with
// where they came from, as the record and the stock at the crowd's end
// tell it; a sale with none left, or with holds still pending, says
// nothing.
func TestUnsold(t *testing.T) {
	settled := storeFigures{Initial: 10, Confirmed: 9, Counter: 1}
	for _, tc := range []struct {
		name  string
		store storeFigures
		gone  *StockAt
		want  string
	}{
		{"all sold", storeFigures{Initial: 10, Confirmed: 10}, &StockAt{Pending: 2}, ""},
		{"holds pending", storeFigures{Initial: 10, Confirmed: 8, Pending: 1, Counter: 1}, &StockAt{Counter: 1, Pending: 1}, ""},
		{"came back after", settled, &StockAt{Pending: 3},
			"unsold: 1, returned by holds that ended after the last shopper had left (none in stock then, 3 held)"},
		{"left behind", settled, &StockAt{Counter: 1},
			"unsold: 1, in stock when the last shopper left (1 then, 0 held)"},
		{"both", storeFigures{Initial: 10, Confirmed: 7, Counter: 3}, &StockAt{Counter: 1, Pending: 2},
			"unsold: 3; 1 in stock when the last shopper left, the rest returned by holds that ended after (2 held then)"},
		{"not read", settled, nil, "unsold: 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Report{Store: tc.store, CrowdGone: tc.gone}
			if got := unsold(rep); got != tc.want {
				t.Fatalf("unsold = %q, want %q", got, tc.want)
			}
			var text, page bytes.Buffer
			rep.WriteText(&text)
			if err := rep.WriteHTML(&page); err != nil {
				t.Fatal(err)
			}
			for what, out := range map[string]string{"text": text.String(), "HTML": page.String()} {
				if has := strings.Contains(out, "unsold"); has != (tc.want != "") {
					t.Errorf("the %s report mentions unsold units: %v, want %v", what, has, tc.want != "")
				}
			}
		})
	}
}
