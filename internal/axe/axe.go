// Package axe runs axe-core, the accessibility engine (the npm package,
// pinned in this directory's package.json and installed here with
// `npm ci --prefix internal/axe`), on the pages the browser tests drive:
// the operator's console and the waiting room. Tests put its source into
// the page through the DevTools protocol (which the pages' strict Content
// Security Policy does not govern), or serve it with Handler, then run
// Script and read the violations with Parse.
//
// Nothing here is fetched from the network at test time: without the
// installed package, Source says so, and the tests skip (and fail under
// CI=true, whose .ci/run installs it).
//
// Overselling is neither prevented nor caused here (a test helper).
package axe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Dir is the directory of package.json and node_modules.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "internal/axe"
	}
	return filepath.Dir(file)
}

// Source returns axe.min.js, or an error naming the command that installs
// it.
func Source() ([]byte, error) {
	path := filepath.Join(Dir(), "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("axe-core is not installed (npm ci --prefix internal/axe): %w", err)
	}
	return b, nil
}

// Script is the expression that runs axe on the whole document, against
// the WCAG 2.x A and AA rules and axe's best practices, and resolves to
// the violations as JSON. It needs axe defined in the page (Source
// evaluated first).
const Script = `axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice']}, resultTypes: ['violations']})
  .then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary)}))))`

// Violation is one rule a page breaks, with the elements that break it.
type Violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"` // minor, moderate, serious or critical
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// Parse reads Script's result.
func Parse(result string) ([]Violation, error) {
	var vs []Violation
	if err := json.Unmarshal([]byte(result), &vs); err != nil {
		return nil, fmt.Errorf("axe's answer %.200q: %w", result, err)
	}
	return vs, nil
}

// Serious returns the violations whose impact is serious or critical.
func Serious(vs []Violation) []Violation {
	var out []Violation
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			out = append(out, v)
		}
	}
	return out
}

// Describe lists violations one a line, for a test's failure.
func Describe(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s (%s): %s\n", v.ID, v.Impact, v.Help)
		for _, n := range v.Nodes {
			fmt.Fprintf(&b, "    %s\n", strings.ReplaceAll(n, "\n", " "))
		}
	}
	return b.String()
}
