package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

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
	var rd io.Reader
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		if !strings.HasSuffix(strings.TrimRight(src, "/"), "/draw") {
			src = strings.TrimRight(src, "/") + "/draw"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, err
		}
		resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s answered %d: the draw may not have run yet", src, resp.StatusCode)
		}
		rd = resp.Body
	} else {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rd = f
	}
	var doc waitroom.DrawDocument
	if err := json.NewDecoder(rd).Decode(&doc); err != nil {
		return nil, fmt.Errorf("read the draw: %w", err)
	}
	return &doc, nil
}
