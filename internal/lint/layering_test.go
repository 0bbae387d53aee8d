package lint

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/weirstream/weir"

// layers ranks every package of the module (by longest path prefix,
// relative to the module root; "." is the root package): a package may
// import packages of its own rank or a lower one, never a higher one.
//
// This is DESIGN.md §3 read as the code needs it. Binaries sit on top,
// then the root API, then the connectors. The public contract packages
// (codec, state, connector) import nothing of weir and every layer uses
// them, so they sit at the bottom, and so do the pure cores and leaf
// helpers (internal/checkpoint's metadata types are what storage and the
// state backends persist). In between, from the top: the control plane
// and REST glue, the runtime, the job graph, the data plane and state
// backends and storage.
var layers = map[string]int{
	"cmd":      100,
	"cli":      100, // the command line behind cmd/weir and users' own mains (cli.Main)
	"examples": 100,
	"bench":    100,
	"nexmark":  100,
	// Test tooling: only tests import it (a non-test import fails here).
	"internal/testutil": 100,
	"internal/lint":     100,

	".": 90,

	"connectors": 80, // and only connector: see connectorsImportOnly

	"internal/cluster":            60,
	"internal/rest":               60,
	"internal/web":                60,
	"internal/metrics/promexport": 60,
	"internal/ha":                 58, // etcd leadership and the leader's fenced store; cluster and cmd use it
	"internal/deploy":             57,
	"internal/jobmaster":          55,

	"internal/runtime": 50,
	"internal/graph":   45,

	"internal/network":                  40,
	"internal/storage":                  40,
	"internal/statebackend/heap":        40,
	"internal/statebackend/pebble":      40,
	"internal/statebackend/statetest":   40,
	"internal/statebackend/incremental": 40,
	"internal/statebackend":             35,

	"internal/checkpoint":            20,
	"internal/jobstate":              20,
	"internal/opstate":               20,
	"internal/window":                20,
	"internal/watermark":             20,
	"internal/keygroup":              20,
	"internal/typeinfo":              20,
	"internal/adapt":                 20,
	"internal/blame":                 20,
	"internal/restart":               20,
	"internal/config":                20,
	"internal/metrics":               20,
	"internal/timerqueue":            20,
	"internal/network/credit":        20,
	"internal/statebackend/snapshot": 20,

	"codec":     10,
	"state":     10,
	"connector": 10,
	"window":    10, // public window package, if it comes
}

// allowed are the imports that break the layering today, each with why;
// a new one fails the test.
var allowed = map[[2]string]string{
	// datagen reads whether a record type holds pointers to choose its
	// fill loop; the helper is 30 lines of reflection it could copy.
	{"connectors/datagen", "internal/typeinfo"}: "connector reaches an internal helper",
}

// rankOf returns the rank of package dir and the prefix that gave it.
func rankOf(dir string) (int, string, bool) {
	if dir == "." {
		return layers["."], ".", true
	}
	for p := dir; p != "." && p != "/"; p = filepath.Dir(p) {
		if r, ok := layers[p]; ok {
			return r, p, true
		}
	}
	return 0, "", false // the root package's rank is its own, not its subdirectories'

}

// imports returns, by package directory (relative to the module root),
// the module's packages that its non-test files import.
func imports(t *testing.T, root string) map[string][]string {
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if p == module {
				p = "."
			} else if after, ok := strings.CutPrefix(p, module+"/"); ok {
				p = after
			} else {
				continue
			}
			if !slices.Contains(out[rel], p) {
				out[rel] = append(out[rel], p)
			}
		}
		if _, ok := out[rel]; !ok {
			out[rel] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func moduleRoot(t *testing.T) string {
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", dir, err)
	}
	return dir
}

// violations returns the imports of imps that run up a layer, or that
// leave a connector for anything but connector, each as a line naming the
// two packages.
func violations(imps map[string][]string) []string {
	var out []string
	for _, pkg := range slices.Sorted(func(yield func(string) bool) {
		for k := range imps {
			if !yield(k) {
				return
			}
		}
	}) {
		rank, _, ok := rankOf(pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s has no layer: add it to layers in internal/lint/layering_test.go", pkg))
			continue
		}
		for _, imp := range imps[pkg] {
			if _, ok := allowed[[2]string{pkg, imp}]; ok {
				continue
			}
			irank, _, ok := rankOf(imp)
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s imports %s, which has no layer: add it to layers in internal/lint/layering_test.go", pkg, imp))
			case irank > rank:
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): an import up a layer (DESIGN.md §3)", pkg, rank, imp, irank))
			case strings.HasPrefix(pkg, "connectors/") && imp != "connector" && !strings.HasPrefix(imp, "connectors/"):
				out = append(out, fmt.Sprintf("%s imports %s: a connector depends on connector only", pkg, imp))
			}
		}
	}
	return out
}

// TestLayering fails for every import that runs up a layer of DESIGN.md
// §3, naming both packages.
func TestLayering(t *testing.T) {
	for _, v := range violations(imports(t, moduleRoot(t))) {
		t.Error(v)
	}
}

// TestLayeringCatches feeds the check imports that break the rules: each
// must be reported with both package names.
func TestLayeringCatches(t *testing.T) {
	tests := []struct {
		pkg, imp string
	}{
		{"internal/checkpoint", "internal/storage"},
		{"internal/runtime", "."},
		{"internal/storage", "internal/rest"},
		{"connectors/kafka", "internal/runtime"},
		{"connectors/kafka", "state"},
		{"state", "internal/checkpoint"},
		{".", "internal/testutil/multiset"},
	}
	for _, tt := range tests {
		got := violations(map[string][]string{tt.pkg: {tt.imp}})
		if len(got) != 1 || !strings.Contains(got[0], tt.pkg) || !strings.Contains(got[0], tt.imp) {
			t.Errorf("%s importing %s: got %q, want one violation naming both", tt.pkg, tt.imp, got)
		}
	}
	if got := violations(map[string][]string{"internal/nosuchroom": nil}); len(got) != 1 || !strings.Contains(got[0], "has no layer") {
		t.Errorf("a package without a layer: got %q, want it reported (not ranked as the root package)", got)
	}
	for _, ok := range [][2]string{{".", "internal/runtime"}, {"internal/runtime", "internal/graph"}, {"connectors/kafka", "connector"}, {"internal/rest/local", "internal/runtime"}} {
		if got := violations(map[string][]string{ok[0]: {ok[1]}}); len(got) != 0 {
			t.Errorf("%s importing %s: got %q, want no violation", ok[0], ok[1], got)
		}
	}
}
