package watermark

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImports keep the package pure: no I/O, no clock, no goroutine
// coordination, no logging. Sub-packages (os/exec, net/http, sync/atomic,
// log/slog, …) are forbidden with their parent.
var forbiddenImports = []string{"os", "net", "time", "sync", "io/fs", "log"}

// TestPurity fails if a non-test file of the package imports a forbidden
// package or starts a goroutine.
func TestPurity(t *testing.T) {
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
			for _, bad := range forbiddenImports {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s: imports %q: package watermark must stay pure (no I/O, clock, locks or logging); take `now` as an argument and let the task do it",
						fset.Position(imp.Pos()), path)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement: package watermark must not start goroutines", fset.Position(g.Pos()))
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files found: is the test running in the package directory?")
	}
}
