package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/client"
)

const saleUsage = `Usage:
  flashsale sale create --sku SKU --stock N [--opens-at RFC3339|+DURATION] [flags]
  flashsale sale list [-o table|json]
  flashsale sale show SKU
  flashsale sale update SKU [--rate N] [--closes-at T] [--name TEXT] [flags] [--retry]
  flashsale sale watch SKU              the sale live, redrawn every second (Ctrl-C ends it)
  flashsale sale pause SKU [--reason TEXT]
  flashsale sale resume SKU
  flashsale sale rebuild SKU
  flashsale sale audit SKU [--cancel]   orders matching automation patterns; --cancel
                                        cancels those the published policy cancels
  flashsale sale counter-log SKU [--limit N] [-o table|json]
                                        the gate's log of counter changes
  flashsale sale invites SKU --count N [-o table|json]
                                        issues N single-use invite codes

Every subcommand takes --server (FLASHSALE_SERVER, default http://127.0.0.1:8080)
and --admin-token (FLASHSALE_ADMIN_TOKEN); "flashsale sale SUBCOMMAND --help"
lists its flags.
`

// saleCommands describes each subcommand for its --help.
var saleCommands = map[string]command{
	"create": {name: "sale create", args: "--sku SKU --stock N [flags]",
		about: "Creates a sale. It opens at --opens-at (now by default: a time in the past opens it at once)."},
	"list": {name: "sale list", args: "[-o table|json]", about: "Lists the sales with their live figures."},
	"show": {name: "sale show", args: "SKU", about: "Prints the sale with its live figures, as JSON."},
	"update": {name: "sale update", args: "SKU [--rate N] [--closes-at T] [--name TEXT] [flags]",
		about: "Changes the sale: only the flags given. The sale's version is read first and the change is made\n" +
			"only if nobody changed the sale meanwhile; --retry reads it again and repeats the change if someone did."},
	"watch": {name: "sale watch", args: "SKU [--plain]",
		about: "Shows the sale live, from the server's feed (GET /admin/sales/SKU/live), redrawn every second:\n" +
			"units left with a bar, the rates, the invariant, pacing. Ctrl-C ends it. When standard output is\n" +
			"not a terminal (or with --plain) it prints one line a second instead."},
	"pause":  {name: "sale pause", args: "SKU [--reason TEXT]", about: "Pauses the sale: reserves are refused until it is resumed."},
	"resume": {name: "sale resume", args: "SKU", about: "Resumes a paused sale."},
	"rebuild": {name: "sale rebuild", args: "SKU",
		about: "Rebuilds a paused sale's counter from the record (initial - confirmed - pending); the sale stays paused."},
	"audit": {name: "sale audit", args: "SKU [--cancel]",
		about: "Lists the orders that match automation patterns; --cancel cancels those the published policy cancels."},
	"counter-log": {name: "sale counter-log", args: "SKU [--limit N] [-o table|json]",
		about: "Lists the gate's log of the counter's changes, newest first."},
	"invites": {name: "sale invites", args: "SKU --count N [-o table|json]",
		about: "Issues N single-use invite codes for the sale (1 to 10000), one a line. A shopper who redeems one\n" +
			"(POST /sale/SKU/redeem) is admitted ahead of the line. The server keeps only their hashes: this is\n" +
			"the one time they are shown, so keep the output. The sale's view counts them (invites)."},
}

// saleFields names the create and update flags after the API's fields,
// for the server's messages.
var saleFields = apiFields{
	"initialStock": "stock", "opensAt": "opens-at", "closesAt": "closes-at", "holdSeconds": "hold-seconds",
	"perUserLimit": "per-user-limit", "fairness": "fairness", "registrationClosesAt": "registration-closes-at",
	"admissionPerSecond": "rate", "minAccountAgeSeconds": "min-account-age", "challengeBits": "challenge-bits",
	"shards": "shards", "sku": "sku", "name": "name", "count": "count",
}

// saleCmd drives the operator routes of a running server.
func saleCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, saleUsage)
		return usageError{"sale: no subcommand given"}
	}
	if isHelp(args) {
		fmt.Fprint(stdout, saleUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	c, ok := saleCommands[sub]
	if !ok {
		fmt.Fprint(stderr, saleUsage)
		return usageError{fmt.Sprintf("sale: unknown subcommand %q", sub)}
	}
	fs := newFlags(c, stdout)
	server := fs.String("server", "http://127.0.0.1:8080", "address of the flashsale server")
	adminToken := fs.String("admin-token", "", "bearer token for /admin/ routes")
	var (
		sku, name, opensAt, closesAt, reason, regClosesAt *string
		stock, hold, perUser, rate, challenge, shards     *int
		limit                                             *int
		minAge                                            *time.Duration
		cancelOrders, retry, plain                        *bool
		fairness, output                                  *choice
		display                                           map[string]*string
	)
	switch sub {
	case "create":
		sku = fs.String("sku", "", "the SKU on sale (required)")
		name = fs.String("name", "", "the sale's name")
		stock = fs.Int("stock", 0, "units on sale (required)")
		opensAt = fs.String("opens-at", "+0s", "when it opens: RFC 3339, or +DURATION from now")
		closesAt = fs.String("closes-at", "", "when it closes: RFC 3339, or +DURATION from now")
		hold = fs.Int("hold-seconds", 600, "how long a reservation holds its units")
		perUser = fs.Int("per-user-limit", 1, "units one shopper may buy")
		fairness = &choice{value: "fifo", choices: []string{"fifo", "random", "lottery"}}
		fs.Var(fairness, "fairness", "fifo, random or lottery")
		regClosesAt = fs.String("registration-closes-at", "", "lottery: when registration closes")
		rate = fs.Int("rate", 0, "waiting-room admissions a second (0: everyone at the open)")
		fs.IntVar(rate, "admission-per-second", 0, "same as --rate")
		minAge = fs.Duration("min-account-age", 0, "minimum account age, e.g. 720h")
		challenge = fs.Int("challenge-bits", 0, "proof-of-work difficulty at admission (0: none)")
		shards = fs.Int("shards", 1, "gates the counter is split over")
		// The sale's display on the waiting-room page (contract: display).
		display = map[string]*string{
			"title":       fs.String("title", "", "page: the product's title (plain text)"),
			"description": fs.String("description", "", "page: the product's description (plain text)"),
			"imageUrl":    fs.String("image-url", "", "page: the product's image (an http(s) URL)"),
			"priceText":   fs.String("price-text", "", "page: the price as shown, e.g. \"€ 199\""),
			"shopUrl":     fs.String("shop-url", "", "page: where shoppers go after the sale (an http(s) URL)"),
			"brandColor":  fs.String("brand-color", "", "page: the shop's colour, #rrggbb"),
			"logoUrl":     fs.String("logo-url", "", "page: the shop's logo (an http(s) URL)"),
		}
	case "update":
		name = fs.String("name", "", "the sale's new name")
		closesAt = fs.String("closes-at", "", "when it closes: RFC 3339, or +DURATION from now")
		rate = fs.Int("rate", 0, "waiting-room admissions a second (0: everyone at once)")
		fs.IntVar(rate, "admission-per-second", 0, "same as --rate")
		hold = fs.Int("hold-seconds", 0, "how long a new reservation holds its units")
		perUser = fs.Int("per-user-limit", 0, "units one shopper may buy")
		minAge = fs.Duration("min-account-age", 0, "minimum account age, e.g. 720h")
		challenge = fs.Int("challenge-bits", 0, "proof-of-work difficulty at admission (0: none)")
		stock = fs.Int("stock", 0, "units on sale (only before the sale opens)")
		retry = fs.Bool("retry", false, "if the sale changed since it was read, read it again and repeat the change (up to 3 times)")
	case "watch":
		plain = fs.Bool("plain", false, "one line a second, even on a terminal")
	case "pause":
		reason = fs.String("reason", "", "why the sale is paused")
	case "counter-log":
		limit = fs.Int("limit", 50, "how many of the newest entries")
		output = outputFlag(fs)
	case "list":
		output = outputFlag(fs)
	case "invites":
		limit = fs.Int("count", 0, "how many codes to issue, 1 to 10000 (required)")
		output = outputFlag(fs)
	case "audit":
		cancelOrders = fs.Bool("cancel", false, "cancel the orders the published policy cancels (their units return to stock)")
	}
	positional, err := parseInterspersed(fs, args, getenv)
	if err != nil {
		return err
	}
	// The live stream lasts as long as the operator watches: no timeout.
	timeout := 30 * time.Second
	if sub == "watch" {
		timeout = 0
	}
	cl, err := newOperator(*server, *adminToken, timeout, saleFields, stdout)
	if err != nil {
		return err
	}
	needSKU := func() (string, error) {
		if len(positional) != 1 {
			return "", usageError{fmt.Sprintf("sale %s: give exactly one SKU (flashsale sale %s --help)", sub, sub)}
		}
		return positional[0], nil
	}
	switch sub {
	case "create":
		if len(positional) > 0 {
			return usageError{"sale create: unexpected arguments: " + strings.Join(positional, " ")}
		}
		if err := require(fs, "sku", "stock"); err != nil {
			return err
		}
		set := given(fs)
		now := time.Now()
		// The client leaves a zero out, for the server's default: a zero
		// given here is refused, as the server refuses an explicit one.
		for _, f := range []struct {
			flag string
			v    int
		}{{"hold-seconds", *hold}, {"per-user-limit", *perUser}, {"shards", *shards}} {
			if f.v == 0 {
				return fmt.Errorf("--%s must be at least 1", f.flag)
			}
		}
		body := client.NewSale{SKU: *sku, Name: *name, InitialStock: *stock, HoldSeconds: *hold, PerUserLimit: *perUser,
			Fairness: flashsale.Fairness(fairness.value), AdmissionPerSecond: *rate, MinAccountAgeSeconds: int(minAge.Seconds()),
			ChallengeBits: *challenge, Shards: *shards}
		for _, t := range []struct {
			flag, val string
			dst       *time.Time
		}{
			{"opens-at", *opensAt, &body.OpensAt}, {"closes-at", *closesAt, &body.ClosesAt},
			{"registration-closes-at", *regClosesAt, &body.RegistrationClosesAt}} {
			if t.val == "" && t.flag != "opens-at" {
				continue
			}
			at, err := parseWhen(t.flag, t.val, now)
			if err != nil {
				return err
			}
			*t.dst = at
		}
		if set["registration-closes-at"] && fairness.value != "lottery" {
			return usageError{"sale create: --registration-closes-at is for --fairness lottery"}
		}
		d := client.Display{Title: *display["title"], Description: *display["description"], ImageURL: *display["imageUrl"],
			PriceText: *display["priceText"], ShopURL: *display["shopUrl"], BrandColor: *display["brandColor"],
			LogoURL: *display["logoUrl"]}
		if d != (client.Display{}) {
			body.Display = &d
		}
		return cl.print(cl.CreateSale(ctx, body))
	case "list":
		if len(positional) > 0 {
			return usageError{"sale list: unexpected arguments: " + strings.Join(positional, " ")}
		}
		sales, err := cl.Sales(ctx)
		if err != nil {
			return cl.fail(err)
		}
		if output.value == "json" {
			return cl.printAnswer()
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SKU\tSTATE\tSTOCK\tLEFT\tPENDING\tCONFIRMED\tWAITING\tINVARIANT\tOPENS AT")
		for _, s := range sales {
			counter := "-"
			if s.Counter != nil {
				counter = strconv.FormatInt(*s.Counter, 10)
			}
			inv := "ok"
			if !s.Invariant.OK {
				inv = "FAILED"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", s.SKU, s.State, s.InitialStock, counter, s.Pending,
				s.Confirmed, s.Waiting, inv, stamp(s.OpensAt))
		}
		return tw.Flush()
	}
	s, err := needSKU()
	if err != nil {
		return err
	}
	switch sub {
	case "show":
		return cl.print(cl.Sale(ctx, s))
	case "update":
		return updateSale(ctx, cl, fs, s, updateFlags{name: name, closesAt: closesAt, rate: rate, hold: hold,
			perUser: perUser, minAge: minAge, challenge: challenge, stock: stock, retry: *retry}, stdout, stderr)
	case "watch":
		return watchSale(ctx, cl, s, !*plain && isTerminal(stdout), stdout)
	case "pause":
		return cl.print(cl.Pause(ctx, s, *reason))
	case "counter-log":
		if *limit < 1 {
			// The client leaves a limit below 1 out, for the server's
			// default; the server refuses one.
			return fmt.Errorf("--limit %d: the limit is from 1 to 10000", *limit)
		}
		log, err := cl.Audit(ctx, s, *limit)
		if err != nil {
			return cl.fail(err)
		}
		if output.value == "json" {
			return cl.printAnswer()
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tAT\tOP\tDELTA\tCOUNTER\tSOURCE\tRESERVATION")
		for _, e := range log.Entries {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%+d\t%d\t%s\t%s\n", e.Seq, stamp(e.At), e.Op, e.Delta, e.Counter, e.Source, e.ReservationID)
		}
		return tw.Flush()
	case "invites":
		if err := require(fs, "count"); err != nil {
			return err
		}
		// Not repeated on a lost answer: that would issue another batch.
		codes, err := cl.IssueInvites(ctx, s, *limit)
		if err != nil {
			return cl.fail(err)
		}
		if output.value == "json" {
			return cl.printAnswer()
		}
		// One code a line and nothing else, for a mailing's script.
		for _, c := range codes {
			fmt.Fprintln(stdout, c)
		}
		return nil
	case "audit":
		if *cancelOrders {
			return cl.print(cl.CancelAutomation(ctx, s))
		}
		return cl.print(cl.Automation(ctx, s))
	case "resume":
		return cl.print(cl.Resume(ctx, s))
	default: // rebuild
		return cl.print(cl.Rebuild(ctx, s))
	}
}

// updateFlags are sale update's flags.
type updateFlags struct {
	name, closesAt                        *string
	rate, hold, perUser, challenge, stock *int
	minAge                                *time.Duration
	retry                                 bool
}

// updateSale changes the flags given, if nobody changed the sale since its
// version was read; with retry, it reads the version again and repeats the
// change (up to three times) when someone did.
func updateSale(ctx context.Context, cl *operator, fs *flag.FlagSet, sku string, f updateFlags, stdout, stderr io.Writer) error {
	set := given(fs)
	var body client.SalePatch
	if set["name"] {
		body.Name = f.name
	}
	if set["closes-at"] {
		at, err := parseWhen("closes-at", *f.closesAt, time.Now())
		if err != nil {
			return err
		}
		body.ClosesAt = &at
	}
	for _, p := range []struct {
		flag string
		v    *int
		dst  **int
	}{{"rate", f.rate, &body.AdmissionPerSecond}, {"admission-per-second", f.rate, &body.AdmissionPerSecond},
		{"hold-seconds", f.hold, &body.HoldSeconds}, {"per-user-limit", f.perUser, &body.PerUserLimit},
		{"challenge-bits", f.challenge, &body.ChallengeBits}, {"stock", f.stock, &body.InitialStock}} {
		if set[p.flag] {
			*p.dst = p.v
		}
	}
	if set["min-account-age"] {
		age := int(f.minAge.Seconds())
		body.MinAccountAgeSeconds = &age
	}
	if body == (client.SalePatch{}) {
		return usageError{"sale update: give at least one change, e.g. --rate 200 (flashsale sale update --help)"}
	}
	for attempt := 1; ; attempt++ {
		sale, err := cl.Sale(ctx, sku)
		if err != nil {
			return cl.fail(err)
		}
		err = cl.print(cl.UpdateSale(ctx, sku, sale.Version, body))
		if !errors.Is(err, client.ErrVersionConflict) {
			return err
		}
		if !f.retry {
			return fmt.Errorf("the sale changed since its version %d was read, so nothing was changed; "+
				"run the command again to apply it over the new version, or add --retry", sale.Version)
		}
		if attempt == 3 {
			return fmt.Errorf("the sale kept changing (three attempts); nothing was changed")
		}
		fmt.Fprintf(stderr, "flashsale: the sale changed since version %d was read; reading it again\n", sale.Version)
	}
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string, getenv func(string) string) ([]string, error) {
	var positional []string
	rest := args
	for {
		if err := parseQuiet(fs, rest); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	// Environment defaults for flags not given.
	if err := parseFlags(fs, nil, getenv); err != nil {
		return nil, err
	}
	return positional, nil
}

// parseWhen reads the flag's time: RFC 3339, or +DURATION from now.
func parseWhen(flagName, s string, now time.Time) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err == nil && d >= 0 {
			return now.Add(d).UTC().Truncate(time.Second), nil
		}
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageError{fmt.Sprintf("--%s %q: not a time: give RFC 3339 (2026-08-01T10:00:00Z) or +DURATION from now (+15m)", flagName, s)}
}

// printJSON prints a JSON answer, indented.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
