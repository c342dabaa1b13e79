package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/client"
)

// liveView is the part of the live feed's event `sale` the terminal view
// shows (GET /admin/sales/{sku}/live).
type liveView struct {
	SKU                string           `json:"sku"`
	Name               string           `json:"name"`
	State              string           `json:"state"`
	PauseReason        string           `json:"pauseReason"`
	PauseCause         string           `json:"pauseCause"`
	InitialStock       int64            `json:"initialStock"`
	OpensAt            time.Time        `json:"opensAt"`
	AdmissionPerSecond int64            `json:"admissionPerSecond"`
	Counter            *int64           `json:"counter"`
	Pending            int64            `json:"pending"`
	Confirmed          int64            `json:"confirmed"`
	Expired            int64            `json:"expired"`
	Cancelled          int64            `json:"cancelled"`
	AdmittedUpTo       int64            `json:"admittedUpTo"`
	Waiting            int64            `json:"waiting"`
	Rejections         map[string]int64 `json:"rejections"`
	Gate               string           `json:"gate"`
	Warm               bool             `json:"warm"`
	Invariant          struct {
		OK         bool       `json:"ok"`
		CheckedAt  *time.Time `json:"checkedAt"`
		Difference int64      `json:"difference"`
		Reason     string     `json:"reason"`
	} `json:"invariant"`
	Pacing *struct {
		Rate        float64 `json:"rate"`
		Outstanding int64   `json:"outstanding"`
		Capacity    int64   `json:"capacity"`
		Healthy     bool    `json:"healthy"`
	} `json:"pacing"`
	Outbox *struct {
		Pending    int64   `json:"pending"`
		LagSeconds float64 `json:"lagSeconds"`
		Dead       int64   `json:"dead"`
	} `json:"outbox"`
	Edges []struct {
		ID      string `json:"id"`
		HasSale bool   `json:"hasSale"`
	} `json:"edges"`
	Errors    []string   `json:"errors"`
	At        time.Time  `json:"at"`
	SoldOutAt *time.Time `json:"soldOutAt"`
	Rates     struct {
		Admissions float64            `json:"admissions"`
		Reserves   float64            `json:"reserves"`
		Wins       float64            `json:"wins"`
		Rejections map[string]float64 `json:"rejections"`
	} `json:"rates"`
}

// watchSale follows the sale's live feed until ctx ends (Ctrl-C): on a
// terminal it redraws the figures in place every second; otherwise it
// prints a line a second. A dropped stream is reopened with Last-Event-ID,
// so a restart or a deploy of the server shows as a pause in the figures.
func watchSale(ctx context.Context, cl *operator, sku string, term bool, stdout io.Writer) error {
	width := terminalWidth(stdout)
	if term {
		fmt.Fprint(stdout, "\x1b[?25l\x1b[2J") // hide the cursor, clear the screen
		defer fmt.Fprint(stdout, "\x1b[?25h\n")
	}
	var (
		lastID   string
		last     *liveView
		failures int
	)
	for {
		err := cl.LiveAfter(ctx, sku, lastID, func(ev client.LiveEvent) error {
			if ev.ID != "" {
				lastID = ev.ID
			}
			if ev.Event != "sale" {
				return nil
			}
			var v liveView
			if json.Unmarshal(ev.Data, &v) != nil {
				return nil
			}
			failures = 0
			last = &v
			if term {
				fmt.Fprint(stdout, "\x1b[H"+strings.ReplaceAll(renderLive(&v, width, true), "\n", "\x1b[K\n")+"\x1b[J")
			} else {
				fmt.Fprintln(stdout, liveLine(&v))
			}
			return nil
		})
		if ctx.Err() != nil {
			return nil // Ctrl-C: a clean end
		}
		var apiErr *client.Error
		if errors.As(err, &apiErr) {
			if apiErr.Status == http.StatusNotFound {
				return fmt.Errorf("there is no sale %s on %s", sku, cl.base)
			}
			if apiErr.Status < 500 {
				return cl.fail(err)
			}
		}
		failures++
		wait := min(time.Duration(1<<min(failures-1, 4))*time.Second, 15*time.Second)
		status := fmt.Sprintf("the feed was cut (%v); reconnecting in %s", describeCut(cl.fail(err)), wait)
		if last != nil {
			status += fmt.Sprintf("; these figures are from %s", last.At.UTC().Format("15:04:05 UTC"))
		}
		if term {
			fmt.Fprintf(stdout, "\x1b[7m %s \x1b[0m\x1b[K\n", status)
		} else {
			fmt.Fprintf(stdout, "# %s\n", status)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func describeCut(err error) string {
	if err == nil {
		return "the server closed it"
	}
	return err.Error()
}

// isTerminal reports whether w is a terminal that understands the
// cursor's escape codes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// terminalWidth is w's width in columns, COLUMNS, or 80.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if n := fileColumns(f); n > 0 {
			return n
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}

// renderLive is the terminal view of one event: units left with a bar,
// the waiting room, the rates, holds, the invariant, pacing, rejections,
// the outbox and the gate, in lines at most width wide. With color, the
// state and anything failing are highlighted.
func renderLive(v *liveView, width int, color bool) string {
	width = max(width, 50)
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	var b strings.Builder
	// line writes a label and its text, the text wrapped at its " · "
	// separators onto lines of its own when the terminal is narrow.
	line := func(label, text string) {
		const indent = 13
		cur := fmt.Sprintf(" %-11s ", label)
		for i, part := range strings.Split(text, " · ") {
			switch {
			case i == 0:
				cur += part
			case visible(cur)+3+visible(part) <= width:
				cur += " · " + part
			default:
				b.WriteString(clip(cur, width))
				b.WriteByte('\n')
				cur = strings.Repeat(" ", indent) + part
			}
		}
		b.WriteString(clip(cur, width))
		b.WriteByte('\n')
	}
	state := strings.ToUpper(strings.ReplaceAll(v.State, "_", " "))
	switch v.State {
	case "paused":
		state = paint("1;31", state)
	case "open":
		state = paint("1;32", state)
	default:
		state = paint("1", state)
	}
	name := v.Name
	if name == "" {
		name = v.SKU
	}
	head := fmt.Sprintf(" %s (%s) · %s", name, v.SKU, state)
	clock := v.At.UTC().Format("15:04:05 UTC")
	pad := width - visible(head) - len(clock) - 1
	b.WriteString(clip(head+strings.Repeat(" ", max(pad, 1))+clock, width))
	b.WriteString("\n")
	if v.State == "paused" {
		who := "by the engine (fail closed)"
		if v.PauseCause == "operator" {
			who = "by an operator"
		}
		b.WriteString(clip(paint("31", fmt.Sprintf(" Paused %s: %s", who, v.PauseReason)), width))
		b.WriteString("\n")
	}
	b.WriteString("\n")

	left := "–"
	share := 0.0
	if v.Counter != nil {
		left = thousands(*v.Counter)
		share = float64(*v.Counter) / math.Max(float64(v.InitialStock), 1)
	}
	figures := fmt.Sprintf("%s of %s", left, thousands(v.InitialStock))
	barWidth := max(width-len(figures)-24, 10)
	filled := int(math.Round(share * float64(barWidth)))
	line("Units left", fmt.Sprintf("%s  [%s%s] %3.0f%%", figures, strings.Repeat("#", filled),
		strings.Repeat(".", barWidth-filled), share*100))
	switch {
	case v.SoldOutAt != nil:
		line("", fmt.Sprintf("sold out at %s, %s after the open", v.SoldOutAt.UTC().Format("15:04:05 UTC"),
			v.SoldOutAt.Sub(v.OpensAt).Round(time.Second)))
	case v.Counter == nil:
		line("", map[string]string{"not_loaded": "the gate holds no counter yet", "unreachable": "the stock gate does not answer",
			"retired": "the sale is over and retired from the gate"}[v.Gate])
	case v.At.Before(v.OpensAt):
		line("", fmt.Sprintf("opens in %s", v.OpensAt.Sub(v.At).Round(time.Second)))
	}
	line("Waiting", fmt.Sprintf("%s · admitted %s", thousands(v.Waiting), thousands(v.AdmittedUpTo)))
	line("A second", fmt.Sprintf("admissions %s · reserves %s · units taken %s · rejections %s",
		rate(v.Rates.Admissions), rate(v.Rates.Reserves), rate(v.Rates.Wins), rate(sum(v.Rates.Rejections))))
	line("Holds", fmt.Sprintf("%s pending · %s confirmed · %s expired · %s cancelled", thousands(v.Pending),
		thousands(v.Confirmed), thousands(v.Expired), thousands(v.Cancelled)))
	inv := paint("32", "holds")
	if !v.Invariant.OK {
		inv = paint("1;31", "FAILED")
	}
	checked := "not checked yet"
	if v.Invariant.CheckedAt != nil {
		checked = fmt.Sprintf("checked %s ago", v.At.Sub(*v.Invariant.CheckedAt).Round(time.Second))
	}
	line("Invariant", fmt.Sprintf("%s · %s · difference %d", inv, checked, v.Invariant.Difference))
	switch {
	case v.Pacing != nil:
		health := "healthy"
		if !v.Pacing.Healthy {
			health = paint("33", "backing off")
		}
		line("Pacing", fmt.Sprintf("%s/s, %s · %s admitted not yet reserved · room for %s", rate(v.Pacing.Rate), health,
			thousands(v.Pacing.Outstanding), thousands(v.Pacing.Capacity)))
	case v.AdmissionPerSecond == 0:
		line("Pacing", "none: everyone is admitted at the open")
	default:
		line("Pacing", "not yet")
	}
	line("Rejections", rejectionsText(v))
	if v.Outbox != nil {
		dead := fmt.Sprintf("%d dead letters", v.Outbox.Dead)
		if v.Outbox.Dead > 0 {
			dead = paint("31", dead)
		}
		line("Outbox", fmt.Sprintf("%s waiting · oldest %s · %s", thousands(v.Outbox.Pending),
			time.Duration(v.Outbox.LagSeconds*float64(time.Second)).Round(time.Second), dead))
	}
	warm := "warm"
	if !v.Warm {
		warm = "not warm"
	}
	edges := "no edge"
	if n := len(v.Edges); n > 0 {
		ready := 0
		for _, e := range v.Edges {
			if e.HasSale {
				ready++
			}
		}
		edges = fmt.Sprintf("%d of %d edges hold the sale", ready, n)
	}
	line("Gate", fmt.Sprintf("%s · %s · %s", strings.ReplaceAll(v.Gate, "_", " "), warm, edges))
	if len(v.Errors) > 0 {
		line("Not read", strings.Join(v.Errors, ", "))
	}
	return b.String()
}

// liveLine is the plain view of one event: one line of key=value pairs.
func liveLine(v *liveView) string {
	left := "-"
	if v.Counter != nil {
		left = strconv.FormatInt(*v.Counter, 10)
	}
	inv := "ok"
	if !v.Invariant.OK {
		inv = "FAILED"
	}
	s := fmt.Sprintf("%s sku=%s state=%s left=%s/%d waiting=%d admitted=%d admissions/s=%s reserves/s=%s wins/s=%s "+
		"rejections/s=%s pending=%d confirmed=%d invariant=%s difference=%d",
		v.At.UTC().Format(time.RFC3339), v.SKU, v.State, left, v.InitialStock, v.Waiting, v.AdmittedUpTo,
		rate(v.Rates.Admissions), rate(v.Rates.Reserves), rate(v.Rates.Wins), rate(sum(v.Rates.Rejections)),
		v.Pending, v.Confirmed, inv, v.Invariant.Difference)
	if v.Pacing != nil {
		s += fmt.Sprintf(" pacing=%s/s", rate(v.Pacing.Rate))
	}
	if v.SoldOutAt != nil {
		s += " sold_out_at=" + v.SoldOutAt.UTC().Format(time.RFC3339)
	}
	if v.State == "paused" {
		s += fmt.Sprintf(" paused_by=%s reason=%q", v.PauseCause, v.PauseReason)
	}
	return s
}

// rejectionsText lists the codes told no, busiest first: a second now,
// and in all.
func rejectionsText(v *liveView) string {
	codes := make([]string, 0, len(v.Rejections))
	for c := range v.Rejections {
		codes = append(codes, c)
	}
	if len(codes) == 0 {
		return "none"
	}
	sort.Slice(codes, func(i, j int) bool {
		if v.Rejections[codes[i]] != v.Rejections[codes[j]] {
			return v.Rejections[codes[i]] > v.Rejections[codes[j]]
		}
		return codes[i] < codes[j]
	})
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s %s/s (%s)", c, rate(v.Rates.Rejections[c]), thousands(v.Rejections[c]))
	}
	return strings.Join(parts, " · ")
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// rate formats a figure a second: "0", "0.4", "12", "1,250".
func rate(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 10:
		return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64)
	}
	return thousands(int64(math.Round(x)))
}

// thousands formats n with commas: 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// visible is the width of s on a terminal: its runes, escape codes left
// out.
func visible(s string) int {
	n, esc := 0, false
	for _, r := range s {
		switch {
		case esc:
			esc = r != 'm'
		case r == '\x1b':
			esc = true
		default:
			n++
		}
	}
	return n
}

// clip cuts s to at most width columns on a terminal, escape codes not
// counted, and ends a cut colored line with a reset.
func clip(s string, width int) string {
	if visible(s) <= width {
		return s
	}
	var b strings.Builder
	n, esc, colored := 0, false, false
loop:
	for _, r := range s {
		switch {
		case esc:
			esc = r != 'm'
		case r == '\x1b':
			esc, colored = true, true
		case n == width-1:
			break loop
		default:
			n++
		}
		b.WriteRune(r)
	}
	b.WriteString("…")
	if colored {
		b.WriteString("\x1b[0m")
	}
	return b.String()
}
