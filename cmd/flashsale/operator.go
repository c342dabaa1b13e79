package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flashsale/flashsale/client"
)

// operator is the commands' client of a server's operator routes: the Go
// client, keeping each answer's body as the server sent it, so that a
// command prints the server's own JSON (every field of it, those of a
// newer server included) rather than what the client's types make of it.
type operator struct {
	*client.Admin
	// base is --server, for the messages.
	base  string
	token string
	out   io.Writer
	// fields names the command's flags after the API's fields, for the
	// server's messages.
	fields apiFields
	// answer is the body of the last answer.
	answer []byte
}

// newOperator returns the client of the server at --server, with the admin
// token, printing to out; timeout bounds each request (zero: none, for a
// live stream).
func newOperator(server, token string, timeout time.Duration, fields apiFields, out io.Writer) (*operator, error) {
	o := &operator{base: strings.TrimRight(server, "/"), token: token, out: out, fields: fields}
	c, err := client.New(o.base, client.WithHTTPClient(&http.Client{Timeout: timeout}),
		client.WithAnswers(func(_ int, body []byte) { o.answer = body }))
	if err != nil {
		return nil, fmt.Errorf("--server %q: not a URL such as http://127.0.0.1:8080", server)
	}
	o.Admin = c.Admin(token)
	return o, nil
}

// print prints the answer of the call that returned err, indented, or says
// what went wrong: o.print(o.Sale(ctx, sku)).
func (o *operator) print(_ any, err error) error {
	if err != nil {
		return o.fail(err)
	}
	return printJSON(o.out, o.answer)
}

// printAnswer prints the last answer as is, indented.
func (o *operator) printAnswer() error { return printJSON(o.out, o.answer) }

// apiError is an error answer of the server, in the operator's words: its
// message names the command's flags for the API's fields, and a 401 says
// which flag gives the token.
type apiError struct {
	err     *client.Error
	message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (%s, HTTP %d)", e.message, e.err.Code, e.err.Status)
}

// Unwrap gives the server's answer: errors.Is(err, client.ErrVersionConflict).
func (e *apiError) Unwrap() error { return e.err }

// fail turns a call's error into one that says what to do.
func (o *operator) fail(err error) error {
	var e *client.Error
	if errors.As(err, &e) {
		if e.Code == "" {
			return fmt.Errorf("the server answered HTTP %d", e.Status)
		}
		msg := o.fields.say(e.Message)
		if e.Status == http.StatusUnauthorized {
			msg = "the server wants its admin token: give --admin-token or set FLASHSALE_ADMIN_TOKEN"
			if o.token != "" {
				msg = "the server refused this admin token (--admin-token, FLASHSALE_ADMIN_TOKEN)"
			}
		}
		return &apiError{err: e, message: msg}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("the server at %s did not answer (--server): %w", o.base, ue)
	}
	return err
}

// stamp is a time as the server's JSON writes it.
func stamp(t time.Time) string { return t.Format(time.RFC3339Nano) }
