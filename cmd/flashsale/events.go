package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const outboxUsage = `Usage:
  flashsale outbox stats            events waiting, the age of the oldest, dead letters
  flashsale outbox dead [--limit N] [-o table|json]
                                    the dead letters, newest first
  flashsale outbox replay ID        give a dead letter a new life: pending, due now

Every subcommand takes --server (FLASHSALE_SERVER, default http://127.0.0.1:8080)
and --admin-token (FLASHSALE_ADMIN_TOKEN).
`

// outboxCommands describes each subcommand for its --help.
var outboxCommands = map[string]command{
	"stats":  {name: "outbox stats", about: "Prints the events waiting, the age of the oldest, and the dead letters."},
	"dead":   {name: "outbox dead", args: "[--limit N] [-o table|json]", about: "Lists the dead letters, newest first."},
	"replay": {name: "outbox replay", args: "ID", about: "Gives a dead letter a new life: pending, due now."},
}

// outboxCmd drives the operator routes of the outbox.
func outboxCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, outboxUsage)
		return usageError{"outbox: no subcommand given"}
	}
	if isHelp(args) {
		fmt.Fprint(stdout, outboxUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	cmd, ok := outboxCommands[sub]
	if !ok {
		fmt.Fprint(stderr, outboxUsage)
		return usageError{fmt.Sprintf("outbox: unknown subcommand %q", sub)}
	}
	fs := newFlags(cmd, stdout)
	server := fs.String("server", "http://127.0.0.1:8080", "address of the flashsale server")
	adminToken := fs.String("admin-token", "", "bearer token for /admin/ routes")
	var limit *int
	var output *choice
	if sub == "dead" {
		limit = fs.Int("limit", 100, "how many of the newest dead letters")
		output = outputFlag(fs)
	}
	positional, err := parseInterspersed(fs, args, getenv)
	if err != nil {
		return err
	}
	c := &adminClient{base: strings.TrimRight(*server, "/"), token: *adminToken, http: &http.Client{Timeout: 30 * time.Second}}
	switch sub {
	case "stats":
		if len(positional) != 0 {
			return usageError{"outbox stats: unexpected arguments: " + strings.Join(positional, " ")}
		}
		return c.do(ctx, http.MethodGet, "/admin/outbox", nil, stdout)
	case "dead":
		if len(positional) != 0 {
			return usageError{"outbox dead: unexpected arguments: " + strings.Join(positional, " ")}
		}
		var raw json.RawMessage
		if err := c.decode(ctx, http.MethodGet, fmt.Sprintf("/admin/outbox/dead?limit=%d", *limit), nil, &raw); err != nil {
			return err
		}
		if output.value == "json" {
			return printJSON(stdout, raw)
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
		if err := json.Unmarshal(raw, &out); err != nil {
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
			return usageError{"outbox replay: give exactly one event id (flashsale outbox dead lists them)"}
		}
		return c.do(ctx, http.MethodPost, "/admin/outbox/"+url.PathEscape(positional[0])+"/replay", map[string]any{}, stdout)
	}
}

const orderUsage = `Usage:
  flashsale order list SKU [-o table|json]       the sale's orders
  flashsale order history ID                     the order and its audit trail
  flashsale order ship|cancel|refund ID --version N [--reason TEXT] [--operator NAME]
                                                 move the order if it is still at version N;
                                                 cancel and refund return its units to stock

Every subcommand takes --server (FLASHSALE_SERVER, default http://127.0.0.1:8080)
and --admin-token (FLASHSALE_ADMIN_TOKEN).
`

// orderCommands describes each subcommand for its --help.
var orderCommands = map[string]command{
	"list":    {name: "order list", args: "SKU [-o table|json]", about: "Lists the sale's orders."},
	"history": {name: "order history", args: "ID", about: "Prints the order and its audit trail."},
	"ship": {name: "order ship", args: "ID --version N [--reason TEXT] [--operator NAME]",
		about: "Marks the order shipped, if it is still at version N (flashsale order list shows it)."},
	"cancel": {name: "order cancel", args: "ID --version N [--reason TEXT] [--operator NAME]",
		about: "Cancels the order, if it is still at version N; its units go back to stock."},
	"refund": {name: "order refund", args: "ID --version N [--reason TEXT] [--operator NAME]",
		about: "Refunds the order, if it is still at version N; its units go back to stock."},
}

// orderCmd drives the operator routes of orders.
func orderCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, orderUsage)
		return usageError{"order: no subcommand given"}
	}
	if isHelp(args) {
		fmt.Fprint(stdout, orderUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	cmd, ok := orderCommands[sub]
	if !ok {
		fmt.Fprint(stderr, orderUsage)
		return usageError{fmt.Sprintf("order: unknown subcommand %q", sub)}
	}
	fs := newFlags(cmd, stdout)
	server := fs.String("server", "http://127.0.0.1:8080", "address of the flashsale server")
	adminToken := fs.String("admin-token", "", "bearer token for /admin/ routes")
	var (
		version          *int64
		reason, operator *string
		output           *choice
	)
	switch sub {
	case "ship", "cancel", "refund":
		version = fs.Int64("version", 0, "the order's version as you read it (required)")
		reason = fs.String("reason", "", "why, for the audit trail")
		operator = fs.String("operator", "", "who, for the audit trail")
	case "list":
		output = outputFlag(fs)
	}
	positional, err := parseInterspersed(fs, args, getenv)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usageError{fmt.Sprintf("order %s: give exactly one %s (flashsale order %s --help)", sub,
			map[bool]string{true: "SKU", false: "order id"}[sub == "list"], sub)}
	}
	c := &adminClient{base: strings.TrimRight(*server, "/"), token: *adminToken, http: &http.Client{Timeout: 30 * time.Second}}
	arg := url.PathEscape(positional[0])
	switch sub {
	case "list":
		var raw json.RawMessage
		if err := c.decode(ctx, http.MethodGet, "/admin/orders?sku="+url.QueryEscape(positional[0]), nil, &raw); err != nil {
			return err
		}
		if output.value == "json" {
			return printJSON(stdout, raw)
		}
		var out struct {
			Orders []struct {
				OrderID   string `json:"orderId"`
				UserID    string `json:"userId"`
				Quantity  int    `json:"quantity"`
				State     string `json:"state"`
				Version   int64  `json:"version"`
				CreatedAt string `json:"createdAt"`
			} `json:"orders"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return err
		}
		sort.SliceStable(out.Orders, func(i, j int) bool { return out.Orders[i].CreatedAt > out.Orders[j].CreatedAt })
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ORDER\tSHOPPER\tUNITS\tSTATE\tVERSION\tCREATED AT")
		for _, o := range out.Orders {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", o.OrderID, o.UserID, o.Quantity, o.State, o.Version, o.CreatedAt)
		}
		return tw.Flush()
	case "history":
		return c.do(ctx, http.MethodGet, "/admin/orders/"+arg+"/history", nil, stdout)
	}
	if err := require(fs, "version"); err != nil {
		return err
	}
	if *version < 1 {
		return usageError{fmt.Sprintf("order %s: --version %d: the version is a number from 1 (flashsale order list shows it)", sub, *version)}
	}
	c.header = http.Header{"If-Match": {strconv.FormatInt(*version, 10)}}
	if *operator != "" {
		c.header.Set("X-Operator", *operator)
	}
	body := map[string]string{}
	if *reason != "" {
		body["reason"] = *reason
	}
	return c.do(ctx, http.MethodPost, "/admin/orders/"+arg+"/"+sub, body, stdout)
}
