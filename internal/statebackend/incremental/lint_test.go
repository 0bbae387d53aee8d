package incremental

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFileSystemAndClockSeams fails if a non-test file of the package
// imports os or io/ioutil, or calls time.Now or time.Since: every local
// file operation goes through Options.FS and time through Options.Clock,
// so that tests can inject local-disk errors and time.
func TestFileSystemAndClockSeams(t *testing.T) {
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
		timeName := ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch p {
			case "os", "io/ioutil", "os/exec":
				t.Errorf("%s: imports %q: go through Options.FS (vfs.FS) instead", fset.Position(imp.Pos()), p)
			case "time":
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && timeName != "" && x.Name == timeName &&
				(sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") &&
				name != "options.go" { // the default of Options.Clock
				t.Errorf("%s: time.%s: use Options.Clock", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
