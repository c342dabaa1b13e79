package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/flashsale/flashsale/waitroom"
)

// TestAnswersEncodeAsEncodingJSON: the hand-encoded status and ticket
// answers are byte for byte what encoding/json (as writeJSON sets it up)
// writes for the same values.
func TestAnswersEncodeAsEncodingJSON(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	yes, no := true, false
	at := time.Date(2026, 8, 1, 10, 0, 0, 123000000, time.UTC)
	statuses := []statusJSON{
		{State: waitroom.StateScheduled, OpensAt: &at, OpensInSeconds: i(90)},
		{State: waitroom.StateWaiting, Position: i(341902), EstimatedWaitSeconds: i(0), UnitsLeft: i(-1), Chance: "likely"},
		{State: waitroom.StateWaiting, Position: i(1), EstimatedWaitSeconds: i(730), UnitsLeft: i(9120), Chance: "possible", Token: "t.k-_"},
		{State: waitroom.StateAdmitted, AdmissionToken: "adm.abc-_", ExpiresIn: i(120)},
		{State: waitroom.StateSoldOut, Final: &no},
		{State: waitroom.StateSoldOut, Final: &yes},
		{State: waitroom.StatePaused},
		{State: waitroom.StateChallenge, Challenge: &challengeJSON{Algorithm: "sha256", Salt: "v1.1785578520.16.abc\"", DifficultyBits: 16, ExpiresIn: 90}},
		{State: "odd \"state\"\n\u2028 é <&>", Token: "\x01\\"},
	}
	for _, s := range statuses {
		compare(t, &s, s.appendJSON(nil))
	}
	for _, tk := range []ticketJSON{{Token: "abc.def", Position: 7, EstimatedWaitSeconds: 0}, {Token: "ü\"", Position: -1}} {
		compare(t, &tk, tk.appendJSON(nil))
	}
}

func compare(t *testing.T, v any, got []byte) {
	t.Helper()
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("hand-encoded %s\nencoding/json %s", got, want.Bytes())
	}
}
