package rehearsal

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

// WriteHTML writes the report as one self-contained page, readable on a
// phone: the verdict, the funnel (linear: each bar its share of the crowd,
// every shopper in exactly one row), the rush charted on real time axes
// with the crowd's arrival and the sell-out marked, the whole sale, and
// the tables of the text report. No script, no outside resource.
func (rep *Report) WriteHTML(w io.Writer) error {
	var text bytes.Buffer
	rep.WriteText(&text)
	pass, why := rep.Verdict()
	rushFrom, rushTo := rep.rush()
	units := []series{
		{"units left", "#2563eb", func(p Point) float64 { return float64(p.UnitsLeft) }, false},
		{"units taken (held or sold)", "#d97706", func(p Point) float64 { return float64(p.Pending) }, false},
	}
	data := map[string]any{
		"R":      rep,
		"Text":   text.String(),
		"Pass":   pass,
		"Why":    why,
		"Funnel": rep.Funnel,
		"Crowd":  int64(rep.Config.Users),
		"Ends":   FunnelEnds(rep.Funnel),
		"Stock":  rep.chart("The rush: units left and units taken", rushFrom, rushTo, units),
		"Admit": rep.chart("The rush: admissions and requests a second (averaged over a second)", rushFrom, rushTo, []series{
			{"places admitted/s", "#16a34a", func(p Point) float64 { return p.Admissions }, true},
			{"reserves/s", "#dc2626", func(p Point) float64 { return p.Reserves }, true},
			{"polls/s ÷ 100", "#6b7280", func(p Point) float64 { return p.Polls / 100 }, true}}),
		"Latency": rep.chart("The rush: latency p99 in each 100 ms (ms, wall time)", rushFrom, rushTo, []series{{"status p99", "#6b7280", func(p Point) float64 { return p.StatusP99 }, false}, {"reserve p99", "#dc2626", func(p Point) float64 { return p.ReserveP99 }, false}}),
	}
	if len(rep.Timeline) > 1 {
		all0, all1 := rep.Timeline[0].At, rep.Timeline[len(rep.Timeline)-1].At
		if all1-all0 > 1.5*(rushTo-rushFrom) {
			data["Whole"] = rep.chart("The whole sale: units left and units taken (holds expiring, units sold again)", all0, all1, units)
		}
	}
	return page.Execute(w, data)
}

// rush is the span of the timeline to chart closely, in seconds since the
// open: the crowd's arrival (30% of it before the open) and the sell-out,
// with a little after.
func (rep *Report) rush() (from, to float64) {
	a := rep.Config.Arrival.Seconds()
	from, to = -0.3*a, 0.7*a
	if rep.SoldOutSeen {
		to = math.Max(to, rep.SoldOutAt)
	}
	to += 0.15 * (to - from)
	if n := len(rep.Timeline); n > 1 {
		from = math.Max(from, rep.Timeline[0].At)
		to = math.Min(to, rep.Timeline[n-1].At)
	}
	if to <= from {
		to = from + 1
	}
	return from, to
}

type series struct {
	name  string
	color string
	value func(Point) float64
	// perSecond: a rate, drawn averaged over the last second.
	perSecond bool
}

// chart draws the timeline's series between from and to (seconds since
// the open) as an SVG line chart: ticks on round values of both axes, the
// open and the sell-out marked, the crowd's arrival shaded.
func (rep *Report) chart(title string, from, to float64, ss []series) template.HTML {
	const w, h, left, right, top, bottom = 480.0, 200.0, 46.0, 8.0, 8.0, 24.0
	var pts []Point
	for _, p := range rep.Timeline {
		if p.At >= from && p.At <= to {
			pts = append(pts, p)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<figure><figcaption>%s</figcaption><svg viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`,
		template.HTMLEscapeString(title), w, h+bottom+22, template.HTMLEscapeString(title))
	if len(pts) < 2 {
		b.WriteString(`<text x="10" y="20">no timeline</text></svg></figure>`)
		return template.HTML(b.String())
	}
	// Rates are averaged over the last second of the sale: measured in
	// windows of 100 ms, the pacer's rounds and the polls' rhythm would
	// draw a comb.
	vals := map[string][]float64{}
	ymax := 0.0
	for _, s := range ss {
		v := make([]float64, len(pts))
		for i, p := range pts {
			v[i] = s.value(p)
			if s.perSecond {
				sum, n := 0.0, 0
				for j := i; j >= 0 && p.At-pts[j].At < 1; j-- {
					sum += s.value(pts[j])
					n++
				}
				v[i] = sum / float64(n)
			}
			ymax = math.Max(ymax, v[i])
		}
		vals[s.name] = v
	}
	yticks := niceTicks(ymax, 4)
	ytop := yticks[len(yticks)-1]
	pw, ph := w-left-right, h-top
	sx := func(x float64) float64 { return left + (x-from)/(to-from)*pw }
	sy := func(y float64) float64 { return top + (1-y/ytop)*ph }
	// The crowd's arrival, shaded.
	a := rep.Config.Arrival.Seconds()
	if a0, a1 := math.Max(-0.3*a, from), math.Min(0.7*a, to); a1 > a0 {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f59e0b" fill-opacity="0.10"/>`,
			sx(a0), top, sx(a1)-sx(a0), ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#92400e">the crowd arrives</text>`, sx(a0)+3, top+ph-5)
	}
	for _, v := range yticks {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#e5e7eb"/>`, left, w-right, sy(v), sy(v))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end" fill="#4b5563">%s</text>`, left-4, sy(v)+4, short(v))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#6b7280"/>`, left, w-right, top+ph, top+ph)
	for _, t := range timeTicks(from, to, 6) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#6b7280"/>`, sx(t), sx(t), top+ph, top+ph+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#4b5563">%s</text>`, sx(t), top+ph+16, tickText(t))
	}
	labelled := math.Inf(-1)
	mark := func(at float64, label, color string) {
		if at < from || at > to {
			return
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`, sx(at), sx(at), top, top+ph, color)
		if sx(at)-labelled < 14 {
			return // too close to the last label to be read beside it
		}
		labelled = sx(at)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="%s" text-anchor="end" transform="rotate(-90 %.1f %.1f)">%s</text>`,
			sx(at)-3, top+2, color, sx(at)-3, top+2, label)
	}
	mark(0, "open", "#111827")
	if rep.SoldOutSeen {
		mark(rep.SoldOutAt, "sold out", "#b91c1c")
	}
	for _, s := range ss {
		var path strings.Builder
		for i, p := range pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, sx(p.At), sy(vals[s.name][i]))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6"/>`, path.String(), s.color)
	}
	// The legend, and the axis's unit, below.
	x := left
	for _, s := range ss {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="3" fill="%s"/><text x="%.0f" y="%.0f" font-size="11" fill="#111827">%s</text>`,
			x, h+bottom+6, s.color, x+16, h+bottom+11, template.HTMLEscapeString(s.name))
		x += 24 + 6.2*float64(len([]rune(s.name)))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end" fill="#4b5563">s since the open</text>`, w-right, h+bottom+11)
	b.WriteString(`</svg></figure>`)
	return template.HTML(b.String())
}

// niceTicks returns round values from 0 covering max, about n of them.
func niceTicks(hi float64, n int) []float64 {
	if hi <= 0 {
		hi = 1
	}
	raw := hi / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow * 10
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	var out []float64
	for v := 0.0; ; v += step {
		out = append(out, v)
		if v >= hi {
			return out
		}
	}
}

// timeTicks returns round moments (seconds since the open) from from to to,
// at most about n, always on whole steps: 0.1, 0.2, 0.5, 1, 2, 5, 10, 15,
// 30 seconds, minutes.
func timeTicks(from, to float64, n int) []float64 {
	step := 3600.0
	for _, s := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600} {
		if (to-from)/s <= float64(n) {
			step = s
			break
		}
	}
	var out []float64
	for t := math.Ceil(from/step) * step; t <= to+1e-9; t += step {
		out = append(out, math.Round(t*10)/10)
	}
	return out
}

// tickText labels a moment relative to the open: "0", "+5s", "−10s",
// "+1m30s", "+0.5s".
func tickText(t float64) string {
	if math.Abs(t) < 1e-9 {
		return "0"
	}
	sign := "+"
	if t < 0 {
		sign, t = "−", -t
	}
	if t < 60 || t != math.Trunc(t) {
		return sign + fmt.Sprintf("%gs", t)
	}
	m, sec := int(t)/60, int(t)%60
	if sec == 0 {
		return fmt.Sprintf("%s%dm", sign, m)
	}
	return fmt.Sprintf("%s%dm%02ds", sign, m, sec)
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", math.Round(v/1e5)/10)
	case v >= 1e3:
		return fmt.Sprintf("%gk", math.Round(v/1e2)/10)
	case v != math.Trunc(v):
		return fmt.Sprintf("%g", math.Round(v*10)/10)
	}
	return fmt.Sprintf("%.0f", v)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"thousands": thousands,
	"unsold":    unsold,
	"int64":     func(n int) int64 { return int64(n) },
	"pct":       func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"sentence": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"add": func(ns ...int64) int64 {
		var t int64
		for _, n := range ns {
			t += n
		}
		return t
	},
	"width": func(f float64) template.CSS {
		// A bar's width: its share of the crowd, at least a hairline when
		// anyone is there.
		if f <= 0 {
			return "width:0"
		}
		return template.CSS(fmt.Sprintf("width:max(2px, %.2f%%)", f*100))
	},
	"dur": func(d time.Duration) string { return durText(d) },
	// ratio is a p99 against its idle baseline; within says whether it
	// keeps issue 7's bound of twice idle, as a class for its cell.
	"ratio": func(d, idle time.Duration) string { return fmt.Sprintf("%.1f×", float64(d)/float64(max(idle, 1))) },
	"within": func(d, idle time.Duration) string {
		if d <= 2*idle {
			return "ok"
		}
		return "over"
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rehearsal {{.R.SKU}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
*{box-sizing:border-box}
body{font:16px/1.45 system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;color:#111827;background:#fff}
h1{font-size:1.35rem;margin:.2em 0;overflow-wrap:anywhere} h2{font-size:1.1rem;margin-top:2em}
.verdict{padding:.75em 1em;border-radius:8px;background:#ecfdf5;border:2px solid #10b981;font-weight:600}
.verdict.bad{background:#fef2f2;border-color:#ef4444}
.funnel{display:grid;grid-template-columns:minmax(0,1fr) auto auto;gap:.15em 0;align-items:center}
.funnel .name{overflow-wrap:anywhere} .funnel .n,.funnel .share{text-align:right;font-variant-numeric:tabular-nums;padding-left:.75em}
.funnel .stage{font-weight:700;border-top:1px solid #e5e7eb;padding-top:.35em;margin-top:.2em}
.funnel .end{color:#374151;padding-left:1.2em} .funnel .share{color:#6b7280;font-size:.88em}
.funnel .bar{grid-column:1/-1;height:8px;background:#f3f4f6;border-radius:4px;overflow:hidden;margin-bottom:.2em}
.funnel .bar div{height:100%;background:#2563eb} .funnel .bar.end div{background:#9ca3af}
.funnel .total{font-weight:700;border-top:2px solid #111827;padding-top:.35em}
figure{margin:1.5em 0} figcaption{font-weight:600;margin-bottom:.3em} svg{width:100%;height:auto;display:block}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px;max-width:100%}
.scroll{overflow-x:auto}
table{border-collapse:collapse} th,td{padding:.3em .6em;text-align:right;font-variant-numeric:tabular-nums}
th:first-child,td:first-child{text-align:left} td.ok{background:#ecfdf5} td.over{background:#fef2f2}
.last{font-size:1.1rem;font-weight:700;margin:2em 0 1em}
.last.pass{color:#047857} .last.fail{color:#b91c1c}
</style></head><body>
<h1>Rehearsal of sale {{.R.SKU}}</h1>
<p>{{thousands (int64 .R.Config.Users)}} shoppers for {{thousands (int64 .R.Config.Units)}} units, fairness {{.R.Config.Fairness}}. {{sentence .R.Mode}}.</p>
<p class="verdict{{if not .Pass}} bad{{end}}">{{if .Pass}}PASS{{else}}FAIL{{end}}: {{.Why}}.</p>
<p>The record, checked after the sale: {{thousands .R.Store.Confirmed}} units confirmed and {{thousands .R.Store.Pending}} pending of {{thousands .R.Store.Initial}}, {{thousands .R.Store.Counter}} left in the gate; counter + confirmed + pending = {{thousands (add .R.Store.Counter .R.Store.Confirmed .R.Store.Pending)}}, oversold {{.R.Oversold}}.</p>
{{with unsold .R}}<p>{{.}}.</p>{{end}}
{{if gt .R.BotPopulationShare 0.0}}<p>Bots were {{pct .R.BotPopulationShare}} of the crowd and won {{pct .R.BotUnitShare}} of the units sold.</p>{{end}}
<h2>The funnel: where each shopper ended</h2>
<p><small>Each bar is its share of the {{thousands .Crowd}} shoppers, on a linear scale. Every shopper is in exactly one of the rows marked − or in <b>bought</b>; those rows add up to {{thousands .Ends}}.</small></p>
<div class="funnel">
{{range .Funnel}}{{if .Stage}}<div class="name stage">{{.Name}}</div><div class="n stage">{{thousands .Count}}</div><div class="share stage">{{pct .Share}}</div>
<div class="bar"><div style="{{width .Share}}"></div></div>
{{else}}<div class="name end">− {{.Name}}</div><div class="n">{{thousands .Count}}</div><div class="share">{{pct .Share}}</div>
<div class="bar end"><div style="{{width .Share}}"></div></div>
{{end}}{{end}}<div class="name total">= shoppers</div><div class="n total">{{thousands .Ends}}</div><div class="share total"></div>
</div>
<h2>The rush</h2>
<p><small>Time in seconds of the sale since it opened{{if .R.Compressed}} (the sale's own clock: in process its minutes take seconds){{end}}; the shaded band is the crowd arriving.</small></p>
{{.Stock}}
{{.Admit}}
{{.Latency}}
{{with .Whole}}<h2>The whole sale</h2>{{.}}{{end}}
{{with .R.Quiet}}<h2>Isolation <small>(p99 beside the big sale, wall time; within 2× of idle is the bound)</small></h2>
{{if .Note}}<p><small>{{.Note}}</small></p>{{end}}
<div class="scroll"><table><tr><th></th><th>idle</th><th>whole sale</th><th>in the rush</th></tr>
{{range .Lines}}<tr><td>{{.Name}}</td><td>{{dur .Idle}}</td><td class="{{within .During .Idle}}">{{dur .During}} ({{ratio .During .Idle}})</td>{{if .RushN}}<td class="{{within .Rush .Idle}}">{{dur .Rush}} ({{ratio .Rush .Idle}})</td>{{else}}<td>-</td>{{end}}</tr>
{{end}}</table></div>
<p>{{if (index .Lines 0).RushN}}The rush is while the crowd arrived, the busiest seconds of the sale. {{end}}Quiet shoppers refused or not admitted at once: {{thousands .Failed}}.</p>{{end}}
<h2>All figures</h2>
<pre>{{.Text}}</pre>
<p class="last {{if .Pass}}pass{{else}}fail{{end}}">{{if .Pass}}PASS{{else}}FAIL{{end}}: {{.Why}}.</p>
</body></html>
`))
