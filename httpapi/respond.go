package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/logsample"
)

// MaxBody is the largest request body accepted (contract: 413 too_large).
const MaxBody = 16 << 10

// statusOf maps every error code to its HTTP status: the one table.
var statusOf = map[flashsale.Code]int{
	flashsale.CodeBadRequest:           http.StatusBadRequest,
	flashsale.CodeTooLarge:             http.StatusRequestEntityTooLarge,
	flashsale.CodeUnauthenticated:      http.StatusUnauthorized,
	flashsale.CodeInvalidToken:         http.StatusUnauthorized,
	flashsale.CodeAdmissionRequired:    http.StatusForbidden,
	flashsale.CodeAdmissionInvalid:     http.StatusForbidden,
	flashsale.CodeAdmissionExpired:     http.StatusForbidden,
	flashsale.CodeAdmissionUsed:        http.StatusForbidden,
	flashsale.CodeNotEligible:          http.StatusForbidden,
	flashsale.CodeChallengeFailed:      http.StatusForbidden,
	flashsale.CodeForbidden:            http.StatusForbidden,
	flashsale.CodeInviteInvalid:        http.StatusForbidden,
	flashsale.CodeInviteUsed:           http.StatusConflict,
	flashsale.CodeRateLimited:          http.StatusTooManyRequests,
	flashsale.CodeSalePaused:           http.StatusServiceUnavailable,
	flashsale.CodeUnavailable:          http.StatusServiceUnavailable,
	flashsale.CodeOverloaded:           http.StatusServiceUnavailable,
	flashsale.CodeSoldOut:              http.StatusConflict,
	flashsale.CodeLimitReached:         http.StatusConflict,
	flashsale.CodeReservationExpired:   http.StatusConflict,
	flashsale.CodeReservationCancelled: http.StatusConflict,
	flashsale.CodeReservationConfirmed: http.StatusConflict,
	flashsale.CodeNotPaused:            http.StatusConflict,
	flashsale.CodeRegistrationClosed:   http.StatusConflict,
	flashsale.CodeClosed:               http.StatusConflict,
	flashsale.CodeNotSelected:          http.StatusConflict,
	flashsale.CodeNotRegistered:        http.StatusConflict,
	"not_admitted":                     http.StatusConflict,
	flashsale.CodeSaleExists:           http.StatusConflict,
	flashsale.CodeNotOpen:              http.StatusConflict,
	flashsale.CodeInvalidState:         http.StatusConflict,
	"rebuild_required":                 http.StatusConflict,
	flashsale.CodeIdempotencyKeyReused: http.StatusUnprocessableEntity,
	flashsale.CodeNotFound:             http.StatusNotFound,
	flashsale.CodeVersionConflict:      http.StatusPreconditionFailed,
	flashsale.CodePreconditionRequired: http.StatusPreconditionRequired,
	flashsale.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	flashsale.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	flashsale.CodeInternal:             http.StatusInternalServerError,
}

// StatusOf returns the HTTP status of an error code.
func StatusOf(code flashsale.Code) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

type errorBody struct {
	Error struct {
		Code    flashsale.Code `json:"code"`
		Message string         `json:"message"`
	} `json:"error"`
}

// writeError answers err with its code, a safe message and, where the
// client is asked to come back, Retry-After. The client sees only a safe
// message; the log has the cause (see logAnswer).
func writeError(w http.ResponseWriter, logger *slog.Logger, r *http.Request, err error) {
	code := flashsale.ErrorCode(err)
	status := StatusOf(code)
	var fe *flashsale.Error
	if errors.As(err, &fe) && fe.RetryAfter > 0 {
		setRetryAfter(w, fe.RetryAfter)
	} else if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		setRetryAfter(w, time.Second)
	}
	logAnswer(logger, r, code, err)
	var body errorBody
	body.Error.Code = code
	body.Error.Message = flashsale.ErrorMessage(err)
	writeJSON(w, status, body)
}

func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int64(math.Ceil(d.Seconds()))
	if secs < 1 {
		secs = 1
	}
	if secs < int64(len(retryAfterValues)) {
		// The header's value as net/http keeps it, made once: a poll is
		// told when to come back every time, in whole seconds of a short
		// range, and Set allocated the slice (and the string) per answer.
		w.Header()["Retry-After"] = retryAfterValues[secs]
		return
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
}

// retryAfterValues are the Retry-After header's values for 0 to 120 s.
var retryAfterValues = func() (v [121][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

// jsonBuffer is a response body being encoded. They are pooled: the
// waiting room answers every poll with one, and a fresh buffer and encoder
// per answer were a measurable share of the edge's work.
type jsonBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonBuffers = sync.Pool{New: func() any {
	b := new(jsonBuffer)
	b.enc = json.NewEncoder(&b.buf)
	b.enc.SetEscapeHTML(false)
	return b
}}

// Header values shared by every JSON answer, set without allocating.
var (
	contentTypeJSON = []string{"application/json"}
	noStore         = []string{"no-store"}
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := jsonBuffers.Get().(*jsonBuffer)
	defer func() {
		if b.buf.Cap() <= 64<<10 { // do not keep the rare large body alive
			b.buf.Reset()
			jsonBuffers.Put(b)
		}
	}()
	if err := b.enc.Encode(v); err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"An internal error occurred; it has been logged."}}`, http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Cache-Control"] = noStore
	w.WriteHeader(status)
	_, _ = w.Write(b.buf.Bytes())
}

// decode reads a JSON body of at most MaxBody bytes into v, refusing
// unknown fields and trailing data. An empty body leaves v as it is when
// optional, else it is a bad request.
func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return flashsale.Errorf(flashsale.CodeTooLarge, "The request body is larger than %d bytes.", MaxBody)
		}
		return flashsale.Errorf(flashsale.CodeBadRequest, "The request body could not be read.")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return flashsale.Errorf(flashsale.CodeBadRequest, "A JSON body is required.")
	}
	if !utf8.Valid(body) {
		// encoding/json would quietly make each bad byte U+FFFD.
		return flashsale.Errorf(flashsale.CodeBadRequest, "The JSON body is not valid UTF-8.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return flashsale.Errorf(flashsale.CodeBadRequest, "The JSON body is malformed: %s.", describe(err))
	}
	if dec.More() {
		return flashsale.Errorf(flashsale.CodeBadRequest, "The JSON body has data after its end.")
	}
	if _, err := dec.Token(); err != io.EOF {
		return flashsale.Errorf(flashsale.CodeBadRequest, "The JSON body has data after its end.")
	}
	if field := cleanStrings(reflect.ValueOf(v), ""); field != "" {
		return flashsale.Errorf(flashsale.CodeBadRequest, "Field %s must be text without control characters.", strconv.Quote(field))
	}
	return nil
}

// describe says what was wrong with a JSON body, in a person's words:
// without echoing the body beyond a field's name, and without a Go type
// name (encoding/json's own messages name the handler's types).
func describe(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var parse *time.ParseError
	switch {
	case errors.As(err, &syn):
		return "invalid JSON at byte " + strconv.FormatInt(syn.Offset, 10)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return "field " + strconv.Quote(typ.Field) + " must be " + kindOf(typ.Type)
		}
		return "the body must be " + kindOf(typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it ends too early"
	case errors.As(err, &parse), strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
		return "a time must be a string in RFC 3339, such as 2026-08-01T10:00:00Z"
	}
	msg := err.Error()
	const unknown = "json: unknown field "
	if field, ok := strings.CutPrefix(msg, unknown); ok {
		if len(field) > 66 {
			field = field[:64] + `…"`
		}
		return "unknown field " + field
	}
	return "it is not the expected object"
}

// logAnswer logs an error answer at the level it deserves. A crowd is
// answered no thousands of times a second, every answer expected (4xx,
// 503 overloaded, 503 sale_paused): those are counted in the metrics
// (flashsale_http_requests_total, flashsale_rejections_total) and logged
// at DEBUG only. ERROR is kept for what an operator must act on: a bug
// (internal) or a store that does not answer (unavailable); and as a store
// that fails, fails for every request, those lines are sampled: the first
// of each code in a second is written, with how many were left out
// before it.
func logAnswer(logger *slog.Logger, r *http.Request, code flashsale.Code, err error) {
	switch code {
	case flashsale.CodeInternal, flashsale.CodeUnavailable:
		if n, ok := errorLines.Allow(sampleKey{logger, code}, time.Now()); ok {
			logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err,
				"suppressed", n)
		}
		return
	}
	if logger.Enabled(r.Context(), slog.LevelDebug) {
		logger.Debug("request answered no", "method", r.Method, "path", r.URL.Path, "code", code,
			"status", StatusOf(code), "err", err)
	}
}

// errorLines samples the ERROR lines of failed requests, per logger and
// code. It is shared by every Server of the process, so that servers that
// share a logger share its budget; a process has few loggers.
var errorLines logsample.Sampler

// sampleKey is what a line is sampled by: its logger and its code.
type sampleKey struct {
	logger *slog.Logger
	code   flashsale.Code
}

// kindOf names what a JSON value must be to fill a Go value of type t.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "a time in RFC 3339"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uintptr:
		return "a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return "an array"
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "an object"
	}
	return "of another type"
}
