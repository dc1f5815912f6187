package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// libraryInternal is the import path prefix of the library's internal packages.
const libraryInternal = "github.com/batchclaim/batchclaim/internal/"

// The program uses the library as an embedder would, through its public packages only: no
// file of this module, test files and files behind build tags included, imports the library's
// internal/ packages (docs/architecture.md, Modules). Go would allow it, since the program's
// import path is under the library's; this test is what refuses it.
func TestImportsNoLibraryInternal(t *testing.T) {
	t.Parallel()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != "." && err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(p, libraryInternal) {
				t.Errorf("cmd/batchclaim/%s imports %s: use the library's public packages", filepath.ToSlash(path), p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d .go files, want the whole module", files)
	}
}
