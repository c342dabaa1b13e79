package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"

	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/sdk"
	"github.com/flashsale/flashsale/waitroom"
)

// specPath is the OpenAPI document of every route this package serves.
const specPath = "../docs/openapi.yaml"

// TestOpenAPI holds docs/openapi.yaml to the router, both ways: every
// route registered in this package (read from the source, so that a route
// added behind a Config option nobody sets in a test is still seen) is in
// the document, and every operation in the document is answered by the
// mux with that route. The document must also be valid OpenAPI 3.1, and
// every example in it must match its schema, so that a reader can trust
// what the examples show.
func TestOpenAPI(t *testing.T) {
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatalf("%s: %v", specPath, err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("%s is OpenAPI %s; want 3.1", specPath, v)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("%s: %v", specPath, err)
	}
	if ok, verrs := schema_validation.ValidateOpenAPIDocument(doc); !ok {
		for _, e := range verrs {
			t.Errorf("%s is not valid OpenAPI 3.1: %s (%s)", specPath, e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  at %s (line %d): %s", se.KeywordLocation, se.Line, se.Reason)
			}
		}
		t.FailNow()
	}

	documented := map[string]bool{}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			documented[strings.ToUpper(method)+" "+path] = true
			checkExamples(t, strings.ToUpper(method)+" "+path, op)
		}
	}

	registered := registeredRoutes(t)
	for _, route := range sortedKeys(registered) {
		if !documented[route] {
			t.Errorf("the server serves %s (httpapi/%s); %s does not describe it", route, registered[route], specPath)
		}
	}
	s := fullServer()
	for _, route := range sortedKeys(documented) {
		method, path, _ := strings.Cut(route, " ")
		probe := httptest.NewRequest(method, concrete(path), nil)
		_, pattern := s.mux.Handler(probe)
		served := pattern != "" && pattern != "/" && pattern != "/admin/" && openAPIPath(pattern) == route
		switch {
		case !served:
			t.Errorf("%s describes %s, which the server does not serve (the mux answers %q)", specPath, route, pattern)
		case registered[route] == "":
			t.Errorf("%s is served, but not found in httpapi's source: does registeredRoutes miss a way of registering?", route)
		}
	}
}

// checkExamples validates every example of op (parameters, request
// bodies, responses and their headers) against its schema.
func checkExamples(t *testing.T, route string, op *v3.Operation) {
	t.Helper()
	sv := schema_validation.NewSchemaValidator()
	check := func(where string, schema *base.SchemaProxy, example any) {
		if schema == nil {
			t.Errorf("%s %s: an example with no schema", route, where)
			return
		}
		if ok, errs := sv.ValidateSchemaObject(schema.Schema(), example); !ok {
			for _, e := range errs {
				t.Errorf("%s %s: the example does not match its schema: %s", route, where, e.Reason)
				for _, se := range e.SchemaValidationErrors {
					t.Errorf("  at %s (line %d): %s", se.KeywordLocation, se.Line, se.Reason)
				}
			}
		}
	}
	media := func(where string, content func() []mediaTypeAt) {
		for _, m := range content() {
			n := 0
			if m.mt.Example != nil {
				n++
				check(where+" "+m.name, m.mt.Schema, decodeNode(t, m.mt.Example))
			}
			if m.mt.Examples != nil {
				for name, ex := range m.mt.Examples.FromOldest() {
					n++
					check(where+" "+m.name+" example "+name, m.mt.Schema, decodeNode(t, ex.Value))
				}
			}
			if n == 0 {
				t.Errorf("%s %s %s: no example", route, where, m.name)
			}
		}
	}
	for _, p := range op.Parameters {
		if p.Example != nil {
			check("parameter "+p.Name, p.Schema, decodeNode(t, p.Example))
		}
	}
	if op.RequestBody != nil {
		media("request body", func() []mediaTypeAt { return mediaTypes(op.RequestBody.Content) })
	}
	if op.Responses == nil || op.Responses.Codes == nil || op.Responses.Codes.Len() == 0 {
		t.Errorf("%s: no responses", route)
		return
	}
	for code, resp := range op.Responses.Codes.FromOldest() {
		media("response "+code, func() []mediaTypeAt { return mediaTypes(resp.Content) })
		if resp.Headers != nil {
			for name, h := range resp.Headers.FromOldest() {
				if h.Example != nil {
					check("response "+code+" header "+name, h.Schema, decodeNode(t, h.Example))
				}
			}
		}
	}
}

type mediaTypeAt struct {
	name string
	mt   *v3.MediaType
}

func mediaTypes(content *orderedmap.Map[string, *v3.MediaType]) []mediaTypeAt {
	var out []mediaTypeAt
	if content == nil {
		return nil
	}
	for name, mt := range content.FromOldest() {
		out = append(out, mediaTypeAt{name, mt})
	}
	return out
}

// decodeNode turns a YAML example into the value JSON would decode it to.
func decodeNode(t *testing.T, n interface{ Decode(any) error }) any {
	t.Helper()
	var v any
	if err := n.Decode(&v); err != nil {
		t.Fatalf("an example does not decode: %v", err)
	}
	return v
}

// registeredRoutes reads the routes this package registers from its
// source: every call of Handle or HandleFunc on a *http.ServeMux whose
// pattern names a method, keyed as the OpenAPI document keys them, with
// the file it is in. Catch-alls without a method (404 and 405 in the
// contract's shape) are no routes of their own.
func registeredRoutes(t *testing.T) map[string]string {
	t.Helper()
	// The values of the identifiers patterns are built from, beyond
	// string literals. An unknown one fails the test, to be added here.
	consts := map[string]string{"waitroom.SnapshotsPath": waitroom.SnapshotsPath, "sdk.Prefix": sdk.Prefix}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	routes := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			pattern, ok := stringValue(call.Args[0], consts)
			if !ok {
				t.Errorf("%s: a route whose pattern this test cannot read; add its identifiers to consts", fset.Position(call.Pos()))
				return true
			}
			if !strings.Contains(pattern, " ") {
				return true
			}
			routes[openAPIPath(pattern)] = f
			return true
		})
	}
	if len(routes) < 30 {
		t.Fatalf("found only %d routes in httpapi's source: has the way routes are registered changed?", len(routes))
	}
	return routes
}

// stringValue evaluates a pattern: string literals joined with +, and the
// identifiers in consts.
func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, ok1 := stringValue(e.X, consts)
		r, ok2 := stringValue(e.Y, consts)
		return l + r, ok1 && ok2
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			v, ok := consts[x.Name+"."+e.Sel.Name]
			return v, ok
		}
	}
	return "", false
}

// openAPIPath turns a mux pattern into the document's key: "GET
// /sale/{sku}/{$}" is "GET /sale/{sku}/", and a subtree such as "GET
// /assets/" (every path below it) is "GET /assets/{file}".
func openAPIPath(pattern string) string {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	switch {
	case strings.HasSuffix(path, "/{$}"):
		path = strings.TrimSuffix(path, "{$}")
	case strings.HasSuffix(path, "/"):
		path += "{file}"
	}
	return method + " " + path
}

var templateParam = regexp.MustCompile(`\{[^}]+\}`)

// concrete fills a templated path with values the mux routes like real ones.
func concrete(path string) string {
	return templateParam.ReplaceAllStringFunc(path, func(p string) string {
		if p == "{file}" {
			return "app.js"
		}
		return "x1"
	})
}

// fullServer is a server of every role with every optional route on.
func fullServer() *Server {
	return New(Config{
		Role:    RoleAll,
		Page:    http.NotFoundHandler(),
		Console: http.NotFoundHandler(),
		MintDemoToken: func(string) (string, time.Duration, error) {
			return "", 0, nil
		},
		Metrics: metrics.New(),
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
