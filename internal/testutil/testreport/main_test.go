package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:12: no chromium: install it\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:1: fine\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Output":"PASS\n"}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t0.2s\n"}`,
		`{"Action":"pass","Package":"q"}`,
	}, "\n")
	var out bytes.Buffer
	skips, failed, err := report(strings.NewReader(in), &out)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	if want := "    b_test.go:3: boom\nFAIL\tp\t0.1s\nok  \tq\t0.2s\n"; out.String() != want {
		t.Errorf("output %q\nwant   %q", out.String(), want)
	}
	if len(skips) != 1 || skips[0] != "p TestA: no chromium: install it" {
		t.Errorf("skips %q", skips)
	}
}
