// Command testreport reads `go test -json` on standard input and prints
// what a plain `go test` would (each package's result line, the output of
// failed tests, build errors), then records the skipped tests with their
// reasons, so that `make test` can end by listing them:
//
//	go test -json ./... | go run ./internal/testutil/testreport -skipped out/skipped.txt
//	go run ./internal/testutil/testreport -list out/skipped.txt
//
// It exits 1 when a test or a package failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	skipped := flag.String("skipped", "", "append the skipped tests to this file")
	list := flag.Bool("list", false, "print the skipped tests recorded in the files named as arguments, and exit")
	flag.Parse()
	if *list {
		os.Exit(printList(os.Stdout, flag.Args()))
	}
	skips, failed, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if *skipped != "" {
		f, err := os.OpenFile(*skipped, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		for _, s := range skips {
			fmt.Fprintln(f, s)
		}
		f.Close()
	}
	if failed {
		os.Exit(1)
	}
}

// report copies the plain output of the events of r to w and returns the
// skipped tests ("package Test: reason") and whether anything failed.
func report(r io.Reader, w io.Writer) (skips []string, failed bool, err error) {
	type key struct{ pkg, test string }
	out := map[key][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not JSON: pass it on
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" {
				if t := strings.TrimSpace(e.Output); t != "PASS" && t != "FAIL" && !strings.HasPrefix(t, "=== ") {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			out[k] = append(out[k], e.Output)
		case "fail", "build-fail":
			failed = true
			if e.Test != "" {
				fmt.Fprint(w, strings.Join(out[k], ""))
			}
			delete(out, k)
		case "skip":
			if e.Test != "" {
				skips = append(skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(out[k])))
			}
			delete(out, k)
		case "pass":
			delete(out, k)
		}
	}
	return skips, failed, sc.Err()
}

// skipReason is the message a test logged before skipping: its log lines
// without the file:line prefix.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		if i := strings.Index(t, ".go:"); i >= 0 {
			if j := strings.Index(t[i:], ": "); j >= 0 {
				t = t[i+j+2:]
			}
		}
		msg = append(msg, t)
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " ")
}

func printList(w io.Writer, files []string) int {
	seen := map[string]bool{}
	var all []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			return 2
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" && !seen[l] {
				seen[l] = true
				all = append(all, l)
			}
		}
	}
	sort.Strings(all)
	if len(all) == 0 {
		fmt.Fprintln(w, "No test was skipped.")
		return 0
	}
	fmt.Fprintf(w, "\n%d tests were skipped:\n", len(all))
	for _, l := range all {
		fmt.Fprintln(w, "  "+l)
	}
	return 0
}
