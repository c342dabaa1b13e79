package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const outboxUsage = `Usage:
  flashsale outbox stats            events waiting, the age of the oldest, dead letters
  flashsale outbox dead [--limit N] the dead letters, newest first
  flashsale outbox replay ID        give a dead letter a new life: pending, due now

Every subcommand takes --server (FLASHSALE_SERVER, default http://127.0.0.1:8080)
and --admin-token (FLASHSALE_ADMIN_TOKEN).
`

// outboxCmd drives the operator routes of the outbox.
func outboxCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, outboxUsage)
		return usageError{"outbox: no subcommand given"}
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("outbox "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "address of the flashsale server")
	adminToken := fs.String("admin-token", "", "bearer token for /admin/ routes")
	var limit *int
	switch sub {
	case "dead":
		limit = fs.Int("limit", 100, "how many of the newest dead letters")
	case "stats", "replay":
	default:
		fmt.Fprint(stderr, outboxUsage)
		return usageError{fmt.Sprintf("outbox: unknown subcommand %q", sub)}
	}
	positional, err := parseInterspersed(fs, args, getenv)
	if err != nil {
		return err
	}
	c := &adminClient{base: strings.TrimRight(*server, "/"), token: *adminToken, http: &http.Client{Timeout: 30 * time.Second}}
	switch sub {
	case "stats":
		if len(positional) != 0 {
			return usageError{"outbox stats: unexpected arguments"}
		}
		return c.do(ctx, http.MethodGet, "/admin/outbox", nil, stdout)
	case "dead":
		if len(positional) != 0 {
			return usageError{"outbox dead: unexpected arguments"}
		}
		var out struct {
			Events []struct {
				EventID   string `json:"eventId"`
				Type      string `json:"type"`
				Attempts  int    `json:"attempts"`
				DeadAt    string `json:"deadAt"`
				LastError string `json:"lastError"`
			} `json:"events"`
		}
		if err := c.decode(ctx, http.MethodGet, fmt.Sprintf("/admin/outbox/dead?limit=%d", *limit), nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tTYPE\tATTEMPTS\tDEAD AT\tLAST ERROR")
		for _, e := range out.Events {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.EventID, e.Type, e.Attempts, e.DeadAt, e.LastError)
		}
		return tw.Flush()
	default: // replay
		if len(positional) != 1 {
			return usageError{"outbox replay: give exactly one event id"}
		}
		return c.do(ctx, http.MethodPost, "/admin/outbox/"+url.PathEscape(positional[0])+"/replay", nil, stdout)
	}
}

const orderUsage = `Usage:
  flashsale order list SKU                       the sale's orders
  flashsale order history ID                     the order and its audit trail
  flashsale order ship|cancel|refund ID --version N [--reason TEXT] [--operator NAME]
                                                 move the order if it is still at version N;
                                                 cancel and refund return its units to stock

Every subcommand takes --server (FLASHSALE_SERVER, default http://127.0.0.1:8080)
and --admin-token (FLASHSALE_ADMIN_TOKEN).
`

// orderCmd drives the operator routes of orders.
func orderCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, orderUsage)
		return usageError{"order: no subcommand given"}
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("order "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "address of the flashsale server")
	adminToken := fs.String("admin-token", "", "bearer token for /admin/ routes")
	var (
		version          *int64
		reason, operator *string
	)
	switch sub {
	case "ship", "cancel", "refund":
		version = fs.Int64("version", 0, "the order's version as you read it (required)")
		reason = fs.String("reason", "", "why, for the audit trail")
		operator = fs.String("operator", "", "who, for the audit trail")
	case "list", "history":
	default:
		fmt.Fprint(stderr, orderUsage)
		return usageError{fmt.Sprintf("order: unknown subcommand %q", sub)}
	}
	positional, err := parseInterspersed(fs, args, getenv)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usageError{fmt.Sprintf("order %s: give exactly one %s", sub, map[bool]string{true: "SKU", false: "order id"}[sub == "list"])}
	}
	c := &adminClient{base: strings.TrimRight(*server, "/"), token: *adminToken, http: &http.Client{Timeout: 30 * time.Second}}
	arg := url.PathEscape(positional[0])
	switch sub {
	case "list":
		return c.do(ctx, http.MethodGet, "/admin/orders?sku="+url.QueryEscape(positional[0]), nil, stdout)
	case "history":
		return c.do(ctx, http.MethodGet, "/admin/orders/"+arg+"/history", nil, stdout)
	}
	if *version < 1 {
		return usageError{fmt.Sprintf("order %s: --version is required (read it with flashsale order list)", sub)}
	}
	c.header = http.Header{"If-Match": {strconv.FormatInt(*version, 10)}}
	if *operator != "" {
		c.header.Set("X-Operator", *operator)
	}
	var body any
	if *reason != "" {
		body = map[string]string{"reason": *reason}
	}
	return c.do(ctx, http.MethodPost, "/admin/orders/"+arg+"/"+sub, body, stdout)
}
