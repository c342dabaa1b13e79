package main

import (
	"context"
	"fmt"
	"io"
	"sort"
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
	c, err := newOperator(*server, *adminToken, 30*time.Second, nil, stdout)
	if err != nil {
		return err
	}
	switch sub {
	case "stats":
		if len(positional) != 0 {
			return usageError{"outbox stats: unexpected arguments: " + strings.Join(positional, " ")}
		}
		return c.print(c.Outbox(ctx))
	case "dead":
		if len(positional) != 0 {
			return usageError{"outbox dead: unexpected arguments: " + strings.Join(positional, " ")}
		}
		if *limit < 1 {
			// The client leaves a limit below 1 out, for the server's
			// default; the server refuses one.
			return fmt.Errorf("--limit %d: the limit is from 1 to 10000", *limit)
		}
		events, err := c.DeadEvents(ctx, *limit)
		if err != nil {
			return c.fail(err)
		}
		if output.value == "json" {
			return c.printAnswer()
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tTYPE\tATTEMPTS\tDEAD AT\tLAST ERROR")
		for _, e := range events {
			deadAt := ""
			if e.DeadAt != nil {
				deadAt = stamp(*e.DeadAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.EventID, e.Type, e.Attempts, deadAt, e.LastError)
		}
		return tw.Flush()
	default: // replay
		if len(positional) != 1 {
			return usageError{"outbox replay: give exactly one event id (flashsale outbox dead lists them)"}
		}
		return c.print(c.Replay(ctx, positional[0]))
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
	c, err := newOperator(*server, *adminToken, 30*time.Second, nil, stdout)
	if err != nil {
		return err
	}
	arg := positional[0]
	switch sub {
	case "list":
		orders, err := c.Orders(ctx, arg)
		if err != nil {
			return c.fail(err)
		}
		if output.value == "json" {
			return c.printAnswer()
		}
		sort.SliceStable(orders, func(i, j int) bool { return orders[i].CreatedAt.After(orders[j].CreatedAt) })
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ORDER\tSHOPPER\tUNITS\tSTATE\tVERSION\tCREATED AT")
		for _, o := range orders {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", o.OrderID, o.UserID, o.Quantity, o.State, o.Version, stamp(o.CreatedAt))
		}
		return tw.Flush()
	case "history":
		return c.print(c.OrderHistory(ctx, arg))
	}
	if err := require(fs, "version"); err != nil {
		return err
	}
	if *version < 1 {
		return usageError{fmt.Sprintf("order %s: --version %d: the version is a number from 1 (flashsale order list shows it)", sub, *version)}
	}
	adm := c.Admin
	if *operator != "" {
		adm = adm.WithOperator(*operator)
	}
	switch sub {
	case "ship":
		return c.print(adm.Ship(ctx, arg, *version, *reason))
	case "cancel":
		return c.print(adm.CancelOrder(ctx, arg, *version, *reason))
	default: // refund
		return c.print(adm.Refund(ctx, arg, *version, *reason))
	}
}
