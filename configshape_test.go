package batchclaim_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// configShapeProblems reads the Go files (tests left out) under root and reports every
// configuration type that does not take the one shape of docs/architecture.md ("One
// configuration shape"): a struct type named Config or ending in Config may have
//
//	func (c T) withDefaults() T       // fills the zero fields, nothing else
//	func (c T) validate() error       // checks the defaulted value
//	func (c T) Resolve() (T, error)   // withDefaults then validate, for callers that show the values
//
// and no other method of that family: no applyDefaults on a pointer, no exported WithDefaults
// or Validate, no withDefaults that returns an error, no Resolve of another signature, and no
// separate "resolved" struct with its own validate.
func configShapeProblems(t *testing.T, root string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var problems []string
	configs := map[string]bool{} // dir + "." + type name
	type method struct {
		pos     string
		dir     string
		recv    string
		ptr     bool
		name    string
		params  int
		results []string
	}
	var methods []method
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "tools":
				return filepath.SkipDir
			}
			if filepath.ToSlash(path) == "internal/db" { // generated
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						if _, isStruct := ts.Type.(*ast.StructType); isStruct && strings.HasSuffix(ts.Name.Name, "Config") {
							configs[dir+"."+ts.Name.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if decl.Recv == nil || len(decl.Recv.List) != 1 {
					continue
				}
				m := method{pos: fset.Position(decl.Pos()).String(), dir: dir, name: decl.Name.Name}
				rt := decl.Recv.List[0].Type
				if star, ok := rt.(*ast.StarExpr); ok {
					m.ptr, rt = true, star.X
				}
				if id, ok := rt.(*ast.Ident); ok {
					m.recv = id.Name
				}
				if decl.Type.Params != nil {
					m.params = decl.Type.Params.NumFields()
				}
				if decl.Type.Results != nil {
					for _, r := range decl.Type.Results.List {
						n := max(1, len(r.Names))
						for range n {
							m.results = append(m.results, types(r.Type))
						}
					}
				}
				methods = append(methods, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range methods {
		isConfig := configs[m.dir+"."+m.recv]
		switch lower := strings.ToLower(m.name); {
		case lower == "applydefaults" || lower == "setdefaults" || m.name == "WithDefaults":
			problems = append(problems, m.pos+": "+m.recv+"."+m.name+": use withDefaults() "+m.recv)
		case !isConfig:
			if m.name == "validate" && strings.HasPrefix(strings.ToLower(m.recv), "resolved") {
				problems = append(problems, m.pos+": "+m.recv+".validate: validate the Config itself, not a separate resolved struct")
			}
		case m.name == "withDefaults" && (m.ptr || m.params != 0 || len(m.results) != 1 || m.results[0] != m.recv):
			problems = append(problems, m.pos+": "+m.recv+".withDefaults must be func (c "+m.recv+") withDefaults() "+m.recv)
		case m.name == "validate" && (m.params != 0 || len(m.results) != 1 || m.results[0] != "error"):
			problems = append(problems, m.pos+": "+m.recv+".validate must be func (c "+m.recv+") validate() error")
		case m.name == "Validate":
			problems = append(problems, m.pos+": "+m.recv+".Validate: unexported validate, and Resolve for callers")
		case m.name == "Resolve" && (m.ptr || m.params != 0 || len(m.results) != 2 || m.results[0] != m.recv || m.results[1] != "error"):
			problems = append(problems, m.pos+": "+m.recv+".Resolve must be func (c "+m.recv+") Resolve() ("+m.recv+", error)")
		}
	}
	return problems
}

// types is a result type's source form, enough to compare with a receiver's name.
func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + types(e.X)
	case *ast.SelectorExpr:
		return types(e.X) + "." + e.Sel.Name
	}
	return "?"
}

// Every Config of both modules takes the one shape.
func TestConfigsTakeOneShape(t *testing.T) {
	t.Parallel()
	for _, p := range configShapeProblems(t, ".") {
		t.Error(p)
	}
}
