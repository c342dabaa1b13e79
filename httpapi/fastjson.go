package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// The two answers every waiting shopper asks for over and over, the status
// and the ticket, are encoded by hand: encoding/json's reflection was the
// largest part of the edge's own work per poll. The output is byte for
// byte what encoding/json writes for the same structs (fastjson_test.go
// holds it to that), so clients see no difference.

var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeAnswer writes a JSON body that append built, with writeJSON's headers.
func writeAnswer(w http.ResponseWriter, status int, appendBody func([]byte) []byte) {
	bp := answerBuffers.Get().(*[]byte)
	b := appendBody((*bp)[:0])
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Cache-Control"] = noStore
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if cap(b) <= 16<<10 {
		*bp = b
		answerBuffers.Put(bp)
	}
}

func (s *statusJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"state":`...)
	b = appendString(b, string(s.State))
	if s.OpensAt != nil {
		b = append(b, `,"opensAt":"`...)
		b = s.OpensAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = appendIntField(b, `,"position":`, s.Position)
	b = appendIntField(b, `,"estimatedWaitSeconds":`, s.EstimatedWaitSeconds)
	b = appendStringField(b, `,"admissionToken":`, s.AdmissionToken)
	b = appendIntField(b, `,"expiresIn":`, s.ExpiresIn)
	if s.Final != nil {
		b = append(b, `,"final":`...)
		b = strconv.AppendBool(b, *s.Final)
	}
	b = appendIntField(b, `,"unitsLeft":`, s.UnitsLeft)
	b = appendStringField(b, `,"chance":`, s.Chance)
	b = appendStringField(b, `,"token":`, s.Token)
	b = appendIntField(b, `,"opensInSeconds":`, s.OpensInSeconds)
	if c := s.Challenge; c != nil {
		b = append(b, `,"challenge":{"algorithm":`...)
		b = appendString(b, c.Algorithm)
		b = append(b, `,"salt":`...)
		b = appendString(b, c.Salt)
		b = append(b, `,"difficultyBits":`...)
		b = strconv.AppendInt(b, int64(c.DifficultyBits), 10)
		b = append(b, `,"expiresIn":`...)
		b = strconv.AppendInt(b, c.ExpiresIn, 10)
		b = append(b, '}')
	}
	return append(b, '}', '\n')
}

func (t *ticketJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"token":`...)
	b = appendString(b, t.Token)
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, t.Position, 10)
	b = append(b, `,"estimatedWaitSeconds":`...)
	b = strconv.AppendInt(b, t.EstimatedWaitSeconds, 10)
	return append(b, '}', '\n')
}

// appendIntField appends an omitempty pointer field.
func appendIntField(b []byte, key string, v *int64) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), *v, 10)
}

// appendStringField appends an omitempty string field.
func appendStringField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, key...), v)
}

// appendString appends s as a JSON string. Tokens and states are plain
// ASCII and go straight in; anything else is left to encoding/json, so the
// escaping is always its own.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			var q bytes.Buffer
			enc := json.NewEncoder(&q)
			enc.SetEscapeHTML(false) // as writeJSON
			// A copy goes to the encoder: s itself would then escape,
			// and with it every answer built from it, on the common path
			// too (each poll's answer was two allocations for it).
			_ = enc.Encode(string([]byte(s))) // cannot fail for a string
			return append(b, bytes.TrimSuffix(q.Bytes(), []byte{'\n'})...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
