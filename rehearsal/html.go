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

// WriteHTML writes the report as one self-contained page: the funnel as
// bars, stock and admissions over time, latency over time, and the tables
// of the text report. No script, no outside resource.
func (rep *Report) WriteHTML(w io.Writer) error {
	var text bytes.Buffer
	rep.WriteText(&text)
	data := map[string]any{
		"R":       rep,
		"Text":    text.String(),
		"Funnel":  rep.funnelBars(),
		"Stock":   rep.chart("Units left and units taken, over time", "s since the open", []series{{"units left", "#2563eb", func(p Point) float64 { return float64(p.UnitsLeft) }}, {"units taken (held or sold)", "#f59e0b", func(p Point) float64 { return float64(p.Pending) }}}),
		"Admit":   rep.chart("Admissions and requests a second", "s since the open", []series{{"admitted/s", "#16a34a", func(p Point) float64 { return p.Admissions }}, {"reserves/s", "#dc2626", func(p Point) float64 { return p.Reserves }}, {"polls/s ÷ 100", "#6b7280", func(p Point) float64 { return p.Polls / 100 }}}),
		"Latency": rep.chart("Latency p99 in each 100 ms (ms, wall time)", "s since the open", []series{{"status p99", "#6b7280", func(p Point) float64 { return p.StatusP99 }}, {"reserve p99", "#dc2626", func(p Point) float64 { return p.ReserveP99 }}}),
	}
	return page.Execute(w, data)
}

type bar struct {
	Name  string
	Count int64
	Width float64 // percent of the widest, on a log scale
	Note  string
}

// funnelBars is the funnel from arrivals to orders, each layer's width on
// a log scale so that ten thousand shows beside two million.
func (rep *Report) funnelBars() []bar {
	rows := []bar{{Name: "arrived", Count: rep.Arrived}}
	var rejected int64
	for _, c := range rep.Rejections {
		rejected += c.Count
	}
	rows = append(rows,
		bar{Name: "admitted", Count: rep.Admitted},
		bar{Name: "reserved", Count: rep.Reserved},
		bar{Name: "confirmed", Count: rep.Store.Confirmed, Note: "from the record"},
		bar{Name: "requests rejected", Count: rejected, Note: "all layers, all codes"},
		bar{Name: "gave up", Count: rep.GaveUp})
	top := math.Log10(float64(max(rep.Arrived, 1)) + 1)
	for i := range rows {
		rows[i].Width = 100 * math.Log10(float64(rows[i].Count)+1) / top
	}
	return rows
}

type series struct {
	name  string
	color string
	value func(Point) float64
}

// chart draws the timeline's series as an SVG line chart.
func (rep *Report) chart(title, xlabel string, ss []series) template.HTML {
	const w, h, left, bottom = 760.0, 220.0, 56.0, 28.0
	pts := rep.Timeline
	var b strings.Builder
	fmt.Fprintf(&b, `<figure><figcaption>%s</figcaption><svg viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`,
		template.HTMLEscapeString(title), w, h+bottom, template.HTMLEscapeString(title))
	if len(pts) < 2 {
		b.WriteString(`<text x="10" y="20">no timeline</text></svg></figure>`)
		return template.HTML(b.String())
	}
	x0, x1 := pts[0].At, pts[len(pts)-1].At
	ymax := 0.0
	for _, s := range ss {
		for _, p := range pts {
			ymax = math.Max(ymax, s.value(p))
		}
	}
	if ymax <= 0 {
		ymax = 1
	}
	sx := func(x float64) float64 { return left + (x-x0)/(x1-x0)*(w-left-10) }
	sy := func(y float64) float64 { return 10 + (1-y/ymax)*(h-20) }
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/>`, left, h-10, w-10, h-10)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="10" x2="%.0f" y2="%.0f" stroke="#999"/>`, left, left, h-10)
	fmt.Fprintf(&b, `<text x="4" y="16" font-size="11">%s</text><text x="4" y="%.0f" font-size="11">0</text>`, short(ymax), h-10)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11">%.0f</text><text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%.0f %s</text>`,
		left, h+8, x0, w-10, h+8, x1, template.HTMLEscapeString(xlabel))
	for k, s := range ss {
		var path strings.Builder
		for i, p := range pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, sx(p.At), sy(s.value(p)))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, path.String(), s.color)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f" font-size="11">%s</text>`,
			left+10+float64(k)*170, h+12, s.color, left+24+float64(k)*170, h+21, template.HTMLEscapeString(s.name))
	}
	b.WriteString(`</svg></figure>`)
	return template.HTML(b.String())
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"thousands": thousands,
	"unsold":    unsold,
	"int64":     func(n int) int64 { return int64(n) },
	"pct":       func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"dur":       func(d time.Duration) string { return durText(d) },
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
body{font:15px/1.45 system-ui,sans-serif;max-width:820px;margin:2em auto;padding:0 1em;color:#111}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:2em}
.verdict{padding:.8em 1em;border-radius:6px;background:#ecfdf5;border:1px solid #10b981}
.verdict.bad{background:#fef2f2;border-color:#ef4444}
.bar{display:flex;align-items:center;gap:.6em;margin:.25em 0}
.bar span.name{width:11em;text-align:right;color:#444}
.bar div{background:#2563eb;height:1.1em;border-radius:3px}
.bar span.n{font-variant-numeric:tabular-nums}
figure{margin:1.5em 0} figcaption{font-weight:600;margin-bottom:.3em} svg{width:100%;height:auto}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}
table{border-collapse:collapse} th,td{padding:.3em .8em;text-align:right;font-variant-numeric:tabular-nums}
th:first-child,td:first-child{text-align:left} td.ok{background:#ecfdf5} td.over{background:#fef2f2}
</style></head><body>
<h1>Rehearsal of sale {{.R.SKU}}</h1>
<p>{{thousands (int64 .R.Config.Users)}} shoppers for {{thousands (int64 .R.Config.Units)}} units, fairness {{.R.Config.Fairness}}. {{.R.Mode}}.</p>
{{if eq .R.Oversold 0}}<p class="verdict">Nothing oversold: the record holds {{thousands .R.Store.Confirmed}} confirmed and {{thousands .R.Store.Pending}} pending units of {{thousands .R.Store.Initial}}; counter + confirmed + pending = {{thousands .R.Store.Initial}}.</p>
{{else}}<p class="verdict bad">OVERSOLD by {{.R.Oversold}} units.</p>{{end}}
{{with unsold .R}}<p>{{.}}.</p>{{end}}
{{if gt .R.BotPopulationShare 0.0}}<p>Bots were {{pct .R.BotPopulationShare}} of the crowd and won {{pct .R.BotUnitShare}} of the units sold.</p>{{end}}
<h2>The funnel <small>(bars on a log scale)</small></h2>
{{range .Funnel}}<div class="bar"><span class="name">{{.Name}}</span><div style="width:{{printf "%.1f" .Width}}%"></div><span class="n">{{thousands .Count}}</span> <small>{{.Note}}</small></div>
{{end}}
<h2>Over time</h2>
{{.Stock}}
{{.Admit}}
{{.Latency}}
{{with .R.Quiet}}<h2>Isolation <small>(p99 beside the big sale, wall time; within 2× of idle is the bound)</small></h2>
{{if .Note}}<p><small>{{.Note}}</small></p>{{end}}
<table><tr><th></th><th>idle</th><th>whole sale</th><th>in the rush</th></tr>
{{range .Lines}}<tr><td>{{.Name}}</td><td>{{dur .Idle}}</td><td class="{{within .During .Idle}}">{{dur .During}} ({{ratio .During .Idle}})</td>{{if .RushN}}<td class="{{within .Rush .Idle}}">{{dur .Rush}} ({{ratio .Rush .Idle}})</td>{{else}}<td>-</td>{{end}}</tr>
{{end}}</table>
<p>{{if (index .Lines 0).RushN}}The rush is while the crowd arrived, the busiest seconds of the sale. {{end}}Quiet shoppers refused or not admitted at once: {{thousands .Failed}}.</p>{{end}}
<h2>All figures</h2>
<pre>{{.Text}}</pre>
</body></html>
`))
