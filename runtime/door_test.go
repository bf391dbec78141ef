package runtime_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// engine is what a user of the runtime must never see: the packages
// that implement it.
var engine = []string{
	"github.com/verbsrt/verbsrt/qpactor",
	"github.com/verbsrt/verbsrt/cqpoller",
	"github.com/verbsrt/verbsrt/internal/",
}

// TestDoorShowsNoEngine: the runtime is all a user imports, so no exported
// function, method, type, field, constant or variable of it names a type of
// the engine (qpactor, cqpoller, internal packages), and no exported type
// is an alias into another package, which go doc would show through.
func TestDoorShowsNoEngine(t *testing.T) {
	fset := token.NewFileSet()
	bp, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(bp.GoFiles, bp.CgoFiles...) {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]string{} // local name -> path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			imports[local] = path
		}
		// names reports the engine packages that expr mentions.
		names := func(expr ast.Node) []string {
			var found []string
			ast.Inspect(expr, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				id, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				path := imports[id.Name]
				for _, e := range engine {
					if path == e || strings.HasSuffix(e, "/") && strings.HasPrefix(path, e) {
						found = append(found, id.Name+"."+sel.Sel.Name)
					}
				}
				return true
			})
			return found
		}
		report := func(pos token.Pos, what string, found []string) {
			if len(found) > 0 {
				t.Errorf("%s: %s names the engine: %s", fset.Position(pos), what, strings.Join(found, ", "))
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				report(d.Pos(), d.Name.Name, names(d.Type))
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if s.Assign.IsValid() {
							t.Errorf("%s: %s is an alias (%s)", fset.Position(s.Pos()), s.Name.Name, name)
						}
						report(s.Pos(), "type "+s.Name.Name, exportedParts(s.Type, names))
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Type != nil {
								report(n.Pos(), n.Name, names(s.Type))
							}
						}
					}
				}
			}
		}
	}
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// exportedParts returns what names finds in the parts of a type a user
// sees: the exported fields of a struct, the methods of an interface, the
// whole of any other type.
func exportedParts(typ ast.Expr, names func(ast.Node) []string) []string {
	var fields *ast.FieldList
	switch t := typ.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return names(typ)
	}
	var found []string
	for _, f := range fields.List {
		exported := len(f.Names) == 0 // embedded: its methods are promoted
		for _, n := range f.Names {
			exported = exported || n.IsExported()
		}
		if exported {
			found = append(found, names(f.Type)...)
		}
	}
	return found
}
