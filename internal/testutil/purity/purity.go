// Package purity checks that a protocol core stays pure (STYLE.md rule 3):
// its non-test files import no I/O, clock, lock or logging package and start
// no goroutine. Each pure package calls Check from a test.
package purity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Forbidden are the imports a pure core may not have; sub-packages (os/exec,
// net/http, sync/atomic, log/slog, …) are forbidden with their parent.
var Forbidden = []string{"os", "net", "time", "sync", "io/fs", "log"}

// Check fails t if a non-test Go file in the current directory (the package
// under test) imports a Forbidden package or starts a goroutine. pkg names
// the package in messages; hint says what to do instead.
func Check(t *testing.T, pkg, hint string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range Forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s: imports %q: package %s must stay pure (no I/O, clock, locks or logging); %s",
						fset.Position(imp.Pos()), path, pkg, hint)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement: package %s must not start goroutines", fset.Position(g.Pos()), pkg)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files found: is the test running in the package directory?")
	}
}
