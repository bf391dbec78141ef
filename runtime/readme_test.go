package runtime_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readmeFragmentParams names, for each fragment of README.md (a ```go
// block without a package clause) that uses what its surrounding text
// made, those names with their types: the fragment is built as the body
// of a function of these parameters. Keyed by the fragment's first line.
var readmeFragmentParams = map[string]string{
	"// The server: a region its clients may READ, WRITE and update atomically.": "ctx context.Context, srt, crt *vrt.Runtime, srv, cli *vrt.Endpoint",
	"reg := prometheus.NewRegistry()":                                            "rt *vrt.Runtime",
}

// readmeUnbuilt names the ```go blocks of README.md not built here, each
// with the reason, keyed by the block's first line.
var readmeUnbuilt = map[string]string{
	`// Server: where it had lis, _ := net.Listen("tcp", ":7471")`: "gRPC is no dependency of this module; examples/rdmanet, a module of its own, serves and dials gRPC over rdmanet",
}

// snippetPackages are the packages a README fragment may use, by the name
// it uses them under: the standard library's, the runtime (vrt), the
// provider packages one chooses a provider from, rdmanet and metrics with
// Prometheus, theirs. The verbs package is not among them: the common
// path needs the runtime alone.
var snippetPackages = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "io": "io", "log": "log",
	"net": "net", "netip": "net/netip", "http": "net/http", "os": "os", "time": "time",
	"vrt":        "github.com/verbsrt/verbsrt/runtime",
	"rdmanet":    "github.com/verbsrt/verbsrt/runtime/rdmanet",
	"ibv":        "github.com/verbsrt/verbsrt/verbs/ibv",
	"rocev2":     "github.com/verbsrt/verbsrt/verbs/rocev2",
	"soft":       "github.com/verbsrt/verbsrt/verbs/soft",
	"metrics":    "github.com/verbsrt/verbsrt/metrics",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"promhttp":   "github.com/prometheus/client_golang/prometheus/promhttp",
}

// notForSnippets are the module's packages a README snippet must not
// import: verbs, which the runtime's names stand in for on the common
// path (a provider package is imported to choose a provider), and the
// engine.
var notForSnippets = []string{
	"github.com/verbsrt/verbsrt/verbs",
	"github.com/verbsrt/verbsrt/qpactor",
	"github.com/verbsrt/verbsrt/cqpoller",
	"github.com/verbsrt/verbsrt/internal/",
}

// TestReadmeSnippetsBuild: every ```go block of README.md builds with the
// module as it is, importing the runtime and, where it chooses a provider,
// a provider package; never verbs.
func TestReadmeSnippetsBuild(t *testing.T) {
	md, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := readmeSnippets(string(md))
	if len(snippets) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	for _, table := range []map[string]string{readmeFragmentParams, readmeUnbuilt} {
		for first := range table {
			if !slices.ContainsFunc(snippets, func(s snippet) bool { return s.first() == first }) {
				t.Errorf("no ```go block of README.md begins with %q", first)
			}
		}
	}
	var built []snippet
	for _, s := range snippets {
		if reason, ok := readmeUnbuilt[s.first()]; ok {
			t.Logf("README.md:%d not built: %s", s.line, reason)
			continue
		}
		built = append(built, s)
	}
	for _, p := range checkSnippets(t, built, readmeFragmentParams) {
		t.Error(p)
	}
}

// TestReadmeSnippetCheckFails: the check of README's snippets reports a
// snippet that uses an unknown name, one that uses verbs, and one that
// imports it.
func TestReadmeSnippetCheckFails(t *testing.T) {
	snippets := readmeSnippets("```go\nn := notDeclaredAnywhere + 1\n```\n" +
		"```go\nfmt.Println(verbs.ErrClosed)\n```\n" +
		"```go\npackage main\n\nimport \"github.com/verbsrt/verbsrt/verbs\"\n\nfunc main() { _ = verbs.ErrClosed }\n```\n")
	problems := strings.Join(checkSnippets(t, snippets, nil), "\n")
	for _, want := range []string{"README.md:2", "notDeclaredAnywhere", "README.md:5: uses verbs.ErrClosed", "README.md:10: imports github.com/verbsrt/verbsrt/verbs"} {
		if !strings.Contains(problems, want) {
			t.Errorf("the check's report lacks %q:\n%s", want, problems)
		}
	}
}

// snippet is one ```go block of a Markdown text: its text and the line
// of its first line.
type snippet struct {
	line int
	text string
}

// first returns the snippet's first line, which keys the tables above.
func (s snippet) first() string {
	first, _, _ := strings.Cut(s.text, "\n")
	return strings.TrimSpace(first)
}

// readmeSnippets returns the ```go blocks of md.
func readmeSnippets(md string) []snippet {
	var out []snippet
	var cur *snippet
	for i, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{line: i + 2}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// checkSnippets builds each snippet as a package of its own and returns
// what is wrong: the compiler's errors, at README.md's lines, and each use
// or import of a package of notForSnippets. A snippet with a package
// clause is a file as it stands; one of imports only has them checked;
// any other is a fragment, the body of a function returning an error
// whose parameters params gives, importing the packages of
// snippetPackages it names.
func checkSnippets(t *testing.T, snippets []snippet, params map[string]string) []string {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build README's snippets with")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	overlay := map[string]string{}
	var problems, pkgs []string
	for i, s := range snippets {
		src, found := snippetSource(s, params[s.first()])
		problems = append(problems, found...)
		name := filepath.Join(dir, fmt.Sprintf("snippet%d.go", i))
		if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		pkg := fmt.Sprintf("./internal/readmesnippets/snippet%d", i)
		overlay[filepath.Join(root, pkg, "snippet.go")] = name
		pkgs = append(pkgs, pkg)
	}
	js, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, append([]string{"build", "-overlay", overlayFile}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		problems = append(problems, fmt.Sprintf("README's snippets do not build (%v):\n%s", err, out))
	}
	return problems
}

// snippetSource returns the Go file that builds s, with //line comments
// that put its lines at README.md's, and what it finds wrong with s's
// imports or its uses of packages.
func snippetSource(s snippet, params string) (src string, problems []string) {
	at := fmt.Sprintf("//line README.md:%d\n", s.line)
	fset := token.NewFileSet()
	if importsOnly(s.text) {
		// An import declaration shown alone: its paths must exist.
		f, _ := parser.ParseFile(fset, "", "package snippet\n"+at+s.text, parser.ImportsOnly)
		var b strings.Builder
		b.WriteString("package snippet\n\n")
		for _, imp := range f.Imports {
			fmt.Fprintf(&b, "import _ %s\n", imp.Path.Value)
		}
		return b.String(), forbiddenImports(fset, f)
	}
	if f, err := parser.ParseFile(fset, "", at+s.text, parser.ImportsOnly); err == nil {
		return at + s.text, forbiddenImports(fset, f)
	}
	body := fmt.Sprintf("package snippet\n\nfunc snippet(%s) error {\n%s%s\treturn nil\n}\n", params, at, s.text)
	f, err := parser.ParseFile(fset, "", body, 0)
	if err != nil {
		// The compiler reports it, at README's line.
		return body, nil
	}
	var imports []string
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok {
			if id.Name == "verbs" {
				problems = append(problems, fmt.Sprintf("%s: uses verbs.%s: the runtime's names stand in for verbs' on the common path",
					position(fset, sel.Pos()), sel.Sel.Name))
			}
			if path, ok := snippetPackages[id.Name]; ok && !used[id.Name] {
				used[id.Name] = true
				imports = append(imports, fmt.Sprintf("%s %q", id.Name, path))
			}
		}
		return true
	})
	slices.Sort(imports)
	// What the fragment declares at its top level and leaves for the
	// text after it to use, it uses here.
	var uses strings.Builder
	for _, stmt := range f.Decls[0].(*ast.FuncDecl).Body.List {
		for _, id := range declared(stmt) {
			if id.Name != "_" {
				fmt.Fprintf(&uses, "\t_ = %s\n", id.Name)
			}
		}
	}
	src = fmt.Sprintf("package snippet\n\nimport (\n\t%s\n)\n\nfunc snippet(%s) error {\n%s%s//line snippet.go:1\n%s\treturn nil\n}\n",
		strings.Join(imports, "\n\t"), params, at, s.text, uses.String())
	return src, problems
}

// importsOnly reports whether text declares imports and nothing else.
func importsOnly(text string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+text, 0)
	if err != nil {
		return false
	}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); !ok || g.Tok != token.IMPORT {
			return false
		}
	}
	return len(f.Decls) > 0
}

// position returns where pos is in README.md: file and line.
func position(fset *token.FileSet, pos token.Pos) string {
	p := fset.Position(pos)
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

// forbiddenImports reports the imports of f of packages in notForSnippets.
func forbiddenImports(fset *token.FileSet, f *ast.File) []string {
	var problems []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		for _, p := range notForSnippets {
			if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
				problems = append(problems, fmt.Sprintf("%s: imports %s: the runtime's names stand in for it on the common path",
					position(fset, imp.Pos()), path))
			}
		}
	}
	return problems
}

// declared returns the names stmt declares in the scope it is in.
func declared(stmt ast.Stmt) []*ast.Ident {
	var ids []*ast.Ident
	switch st := stmt.(type) {
	case *ast.AssignStmt:
		if st.Tok == token.DEFINE {
			for _, e := range st.Lhs {
				if id, ok := e.(*ast.Ident); ok {
					ids = append(ids, id)
				}
			}
		}
	case *ast.DeclStmt:
		if g, ok := st.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				ids = append(ids, spec.(*ast.ValueSpec).Names...)
			}
		}
	}
	return ids
}
