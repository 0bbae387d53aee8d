package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestREADMEGoBlocks keeps the README's Go code and the examples' from
// drifting apart: the block after the line naming examples/quickstart/main.go
// is that file, whole; every other Go block of the README appears in one of
// the examples, line for line (indentation aside), so it compiles as
// written.
func TestREADMEGoBlocks(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]string{}
	files, _ := filepath.Glob("../*/main.go")
	more, _ := filepath.Glob("../*/cmd/*/main.go")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = dedent(strings.Split(string(b), "\n"))
	}
	blocks := goBlocks(string(readme))
	if len(blocks) < 3 {
		t.Fatalf("found %d Go blocks in README.md; want the quick start and the API examples", len(blocks))
	}
	whole := 0
	for _, b := range blocks {
		if strings.Contains(b.before, "examples/quickstart/main.go") {
			whole++
			if b.text != string(main) {
				t.Errorf("README.md:%d: the block is not examples/quickstart/main.go as it is (copy the file into the README)", b.line)
			}
			continue
		}
		lines := dedent(strings.Split(strings.TrimSuffix(b.text, "\n"), "\n"))
		found := false
		for _, src := range sources {
			for i := 0; i+len(lines) <= len(src) && !found; i++ {
				found = slices.Equal(dedent(src[i:i+len(lines)]), lines)
			}
		}
		if !found {
			t.Errorf("README.md:%d: this Go block is in no example under examples/: put it in one (so that it compiles) or copy it from there:\n%s", b.line, b.text)
		}
	}
	if whole != 1 {
		t.Errorf("%d blocks follow a line naming examples/quickstart/main.go; want 1", whole)
	}
}

type goBlock struct {
	line   int    // of the opening fence
	before string // the last non-empty line before the fence
	text   string
}

func goBlocks(md string) []goBlock {
	var out []goBlock
	var cur *goBlock
	var text strings.Builder
	before := ""
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &goBlock{line: n, before: before}
			text.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = text.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(line + "\n")
		case strings.TrimSpace(line) != "":
			before = line
		}
	}
	return out
}

// dedent removes the indentation common to the non-blank lines.
func dedent(lines []string) []string {
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t "))
		if common < 0 || n < common {
			common = n
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			l = l[common:]
		}
		out[i] = strings.TrimRight(l, " \t")
	}
	return out
}

// TestQuickstart runs the example on a small text.
func TestQuickstart(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("the weir\nThe river and the weir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run(context.Background(), in, out); err != nil {
		t.Fatal(err)
	}
	var got []string
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Fields(string(b))...)
	}
	slices.Sort(got)
	want := []string{"and,1", "river,1", "the,1", "the,2", "the,3", "weir,1", "weir,2"}
	if !slices.Equal(got, want) {
		t.Errorf("output %v, want %v", got, want)
	}
}
