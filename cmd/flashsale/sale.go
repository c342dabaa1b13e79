package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

const saleUsage = `Usage:
  flashsale sale create --sku SKU --stock N [--opens-at RFC3339|+DURATION] [flags]
  flashsale sale list
  flashsale sale show SKU
  flashsale sale pause SKU [--reason TEXT]
  flashsale sale resume SKU
  flashsale sale rebuild SKU
  flashsale sale audit SKU [--cancel]   orders matching automation patterns; --cancel
                                        cancels those the published policy cancels
  flashsale sale counter-log SKU [--limit N]   the gate's log of counter changes

Every subcommand takes --server (FLASHSALE_SERVER, default http://127.0.0.1:8080)
and --admin-token (FLASHSALE_ADMIN_TOKEN).
`

// saleCmd drives the operator routes of a running server.
func saleCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, saleUsage)
		return usageError{"sale: no subcommand given"}
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("sale "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "address of the flashsale server")
	adminToken := fs.String("admin-token", "", "bearer token for /admin/ routes")
	var (
		sku, name, opensAt, closesAt, fairness, reason, regClosesAt *string
		stock, hold, perUser, rate, challenge, shards, limit        *int
		minAge                                                      *time.Duration
		cancelOrders                                                *bool
		display                                                     map[string]*string
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
		fairness = fs.String("fairness", "fifo", "fifo, random or lottery")
		regClosesAt = fs.String("registration-closes-at", "", "lottery: when registration closes")
		rate = fs.Int("admission-per-second", 0, "waiting-room admissions a second (0: everyone at the open)")
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
	case "pause":
		reason = fs.String("reason", "", "why the sale is paused")
	case "counter-log":
		limit = fs.Int("limit", 50, "how many of the newest entries")
	case "audit":
		cancelOrders = fs.Bool("cancel", false, "cancel the orders the published policy cancels (their units return to stock)")
	case "list", "show", "resume", "rebuild":
	default:
		fmt.Fprint(stderr, saleUsage)
		return usageError{fmt.Sprintf("sale: unknown subcommand %q", sub)}
	}
	positional, err := parseInterspersed(fs, args, getenv)
	if err != nil {
		return err
	}
	c := &adminClient{base: strings.TrimRight(*server, "/"), token: *adminToken, http: &http.Client{Timeout: 30 * time.Second}}
	needSKU := func() (string, error) {
		if len(positional) != 1 {
			return "", usageError{fmt.Sprintf("sale %s: give exactly one SKU", sub)}
		}
		return url.PathEscape(positional[0]), nil
	}
	switch sub {
	case "create":
		if len(positional) > 0 {
			return usageError{"sale create: unexpected arguments"}
		}
		if *sku == "" {
			return usageError{"sale create: --sku is required"}
		}
		now := time.Now()
		body := map[string]any{
			"sku": *sku, "name": *name, "initialStock": *stock, "holdSeconds": *hold, "perUserLimit": *perUser,
			"fairness": *fairness, "admissionPerSecond": *rate, "minAccountAgeSeconds": int(minAge.Seconds()),
			"challengeBits": *challenge, "shards": *shards,
		}
		for _, t := range []struct {
			key, val string
		}{{"opensAt", *opensAt}, {"closesAt", *closesAt}, {"registrationClosesAt", *regClosesAt}} {
			if t.val == "" {
				continue
			}
			at, err := parseWhen(t.val, now)
			if err != nil {
				return usageError{fmt.Sprintf("sale create: %s: %v", t.key, err)}
			}
			body[t.key] = at
		}
		d := map[string]string{}
		for k, v := range display {
			if *v != "" {
				d[k] = *v
			}
		}
		if len(d) > 0 {
			body["display"] = d
		}
		return c.do(ctx, http.MethodPost, "/admin/sales", body, stdout)
	case "list":
		var out struct {
			Sales []struct {
				SKU          string `json:"sku"`
				State        string `json:"state"`
				InitialStock int    `json:"initialStock"`
				Counter      *int64 `json:"counter"`
				Pending      int64  `json:"pending"`
				Confirmed    int64  `json:"confirmed"`
				OpensAt      string `json:"opensAt"`
				Invariant    struct {
					OK bool `json:"ok"`
				} `json:"invariant"`
			} `json:"sales"`
		}
		if err := c.decode(ctx, http.MethodGet, "/admin/sales", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SKU\tSTATE\tSTOCK\tCOUNTER\tPENDING\tCONFIRMED\tINVARIANT\tOPENS AT")
		for _, s := range out.Sales {
			counter := "-"
			if s.Counter != nil {
				counter = fmt.Sprint(*s.Counter)
			}
			inv := "ok"
			if !s.Invariant.OK {
				inv = "FAILED"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\n", s.SKU, s.State, s.InitialStock, counter, s.Pending, s.Confirmed, inv, s.OpensAt)
		}
		return tw.Flush()
	case "show", "resume", "rebuild", "pause", "audit", "counter-log":
		s, err := needSKU()
		if err != nil {
			return err
		}
		switch sub {
		case "show":
			return c.do(ctx, http.MethodGet, "/admin/sales/"+s, nil, stdout)
		case "pause":
			return c.do(ctx, http.MethodPost, "/admin/sales/"+s+"/pause", map[string]string{"reason": *reason}, stdout)
		case "counter-log":
			return c.do(ctx, http.MethodGet, fmt.Sprintf("/admin/sales/%s/audit?limit=%d", s, *limit), nil, stdout)
		case "audit":
			if *cancelOrders {
				return c.do(ctx, http.MethodPost, "/admin/sales/"+s+"/automation/cancel", nil, stdout)
			}
			return c.do(ctx, http.MethodGet, "/admin/sales/"+s+"/automation", nil, stdout)
		default:
			return c.do(ctx, http.MethodPost, "/admin/sales/"+s+"/"+sub, nil, stdout)
		}
	}
	return nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string, getenv func(string) string) ([]string, error) {
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
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

// parseWhen reads RFC 3339, or +DURATION from now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if strings.HasPrefix(s, "+") {
		d, err := time.ParseDuration(s[1:])
		if err != nil {
			return time.Time{}, err
		}
		return now.Add(d).UTC().Truncate(time.Second), nil
	}
	return time.Parse(time.RFC3339, s)
}

type adminClient struct {
	base  string
	token string
	http  *http.Client
	// header is sent with every request (If-Match, X-Operator).
	header http.Header
}

// do sends a request and prints the JSON answer, indented.
func (c *adminClient) do(ctx context.Context, method, path string, body any, stdout io.Writer) error {
	var raw json.RawMessage
	if err := c.decode(ctx, method, path, body, &raw); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := stdout.Write(buf.Bytes())
	return err
}

func (c *adminClient) decode(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("the server at %s did not answer: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%s (%s, HTTP %d)", e.Error.Message, e.Error.Code, resp.StatusCode)
		}
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.Unmarshal(data, out)
}
