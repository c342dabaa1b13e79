package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/waitroom"
)

// verifyCmd recomputes a published draw from its seed and entrants, checks
// the seed against its commitment, and, given a shopper, says where the
// draw placed them.
func verifyCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags(command{name: "verify", args: "[--user ID] [--commitment HEX] URL|FILE",
		about: "Recomputes a random or lottery sale's published draw and checks its seed against the commitment.\n" +
			"URL is a sale's draw (http://host/sale/SKU/draw) or the sale itself (http://host/sale/SKU);\n" +
			"FILE a saved copy of the draw. Exit status 1 when the draw does not verify."}, stdout)
	user := fs.String("user", "", "also say where the draw placed this shopper (by the pseudonym of their user id)")
	commitment := fs.String("commitment", "", "the seed commitment you saw published before the draw (default: the document's)")
	positional, err := parseInterspersed(fs, args, getenv)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usageError{"verify: give the draw's URL or file (flashsale verify --help)"}
	}
	doc, err := readDraw(ctx, positional[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sale %s (%s), %s draw of %d entrants, algorithm %s\n", doc.SKU, doc.SaleID, doc.Fairness, len(doc.Order), doc.Algorithm)
	if *commitment != "" && !strings.EqualFold(*commitment, doc.SeedCommitment) {
		fmt.Fprintf(stdout, "MISMATCH: the document's commitment %s is not the one published before the draw (%s)\n", doc.SeedCommitment, *commitment)
		return fmt.Errorf("the draw does not verify")
	}
	if err := doc.Verify(); err != nil {
		fmt.Fprintf(stdout, "MISMATCH: %v\n", err)
		return fmt.Errorf("the draw does not verify")
	}
	fmt.Fprintf(stdout, "OK: SHA-256(seed) matches the commitment %s, and the seed orders the entrants exactly as published.\n", doc.SeedCommitment)
	if doc.Winners > 0 {
		fmt.Fprintf(stdout, "The first %d places are the lottery's winners.\n", doc.Winners)
	}
	if *user != "" {
		p := waitroom.Pseudonym(doc.SaleID, *user)
		place := 0
		for i, q := range doc.Order {
			if q == p {
				place = i + 1
				break
			}
		}
		switch {
		case place == 0:
			fmt.Fprintf(stdout, "%s (pseudonym %s) is not among the entrants.\n", *user, p)
		case doc.Winners > 0 && place > doc.Winners:
			fmt.Fprintf(stdout, "%s (pseudonym %s) was drawn at place %d: not selected.\n", *user, p, place)
		default:
			fmt.Fprintf(stdout, "%s (pseudonym %s) was drawn at place %d.\n", *user, p, place)
		}
	}
	return nil
}

func readDraw(ctx context.Context, src string) (*waitroom.DrawDocument, error) {
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		return fetchDraw(ctx, src)
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var doc waitroom.DrawDocument
	if err := json.NewDecoder(f).Decode(&doc); err != nil {
		return nil, fmt.Errorf("read the draw: %w", err)
	}
	return &doc, nil
}

// fetchDraw asks the server for the sale's published draw; src is the
// sale's URL (http://host/sale/SKU) or its draw's.
func fetchDraw(ctx context.Context, src string) (*waitroom.DrawDocument, error) {
	sale := strings.TrimSuffix(strings.TrimRight(src, "/"), "/draw")
	i := strings.LastIndex(sale, "/sale/")
	if i < 0 || sale[i+len("/sale/"):] == "" || strings.Contains(sale[i+len("/sale/"):], "/") {
		return nil, fmt.Errorf("%s is not a sale's URL: give http://host/sale/SKU or http://host/sale/SKU/draw", src)
	}
	sku, err := url.PathUnescape(sale[i+len("/sale/"):])
	if err != nil {
		return nil, fmt.Errorf("%s is not a sale's URL: %w", src, err)
	}
	// A draw of many entrants takes a while to fetch.
	c, err := client.New(sale[:i], client.WithHTTPClient(&http.Client{Timeout: 5 * time.Minute}))
	if err != nil {
		return nil, err
	}
	doc, err := c.Draw(ctx, sku)
	var e *client.Error
	if errors.As(err, &e) {
		return nil, fmt.Errorf("%s/draw answered %d: the draw may not have run yet", sale, e.Status)
	}
	if err != nil {
		return nil, err
	}
	d := waitroom.DrawDocument(*doc)
	return &d, nil
}
