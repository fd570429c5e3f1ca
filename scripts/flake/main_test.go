package main

import (
	"slices"
	"strings"
	"testing"
)

// stream is go test -json's output for two rounds of package p (TestA
// passes, TestB fails once with its subtest B/x, TestC fails once on its
// own) and of package q, which panics outside any test.
const stream = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestB/x"}
{"Action":"output","Package":"p","Test":"TestB/x","Output":"    b_test.go:9: got 2, want 1\n"}
{"Action":"fail","Package":"p","Test":"TestB/x"}
{"Action":"fail","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"pass","Package":"p","Test":"TestC"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestB/x"}
{"Action":"pass","Package":"p","Test":"TestB/x"}
{"Action":"pass","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:4: timed out\n"}
{"Action":"fail","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"fail","Package":"p","Elapsed":1.5}
{"Action":"start","Package":"q"}
{"Action":"run","Package":"q","Test":"TestD"}
{"Action":"pass","Package":"q","Test":"TestD"}
{"Action":"output","Package":"q","Output":"panic: close of closed channel\n"}
{"Action":"fail","Package":"q","Elapsed":0.1}
{"ImportPath":"r [r.test]","Action":"build-output","Output":"r/x_test.go:3:1: syntax error\n"}
{"ImportPath":"r [r.test]","Action":"build-fail"}
{"Action":"start","Package":"r"}
{"Action":"output","Package":"r","Output":"FAIL\tr [build failed]\n"}
{"Action":"fail","Package":"r","Elapsed":0,"FailedBuild":"r [r.test]"}
`

func TestTally(t *testing.T) {
	tl := newTally()
	if err := tl.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	type row struct {
		pkg, test      string
		failures, runs int
		first          string // a line of the first failure's output
	}
	var got []row
	for _, f := range tl.failures() {
		got = append(got, row{f.pkg, f.test, f.failures, f.runs, f.first})
	}
	want := []row{
		{"p", "TestB/x", 1, 2, "got 2, want 1"},
		{"p", "TestC", 1, 2, "timed out"},
		{"q", "", 1, 1, "panic: close of closed channel"},
		{"r", "", 1, 1, "syntax error"},
	}
	if len(got) != len(want) {
		t.Fatalf("failures = %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.pkg != w.pkg || g.test != w.test || g.failures != w.failures || g.runs != w.runs || !strings.Contains(g.first, w.first) {
			t.Errorf("failure %d = %+v, want %+v", i, g, w)
		}
	}
	if r := tl.results[key{"p", "TestA"}]; r.runs != 2 || r.failures != 0 {
		t.Errorf("TestA: %d runs, %d failures; want 2, 0", r.runs, r.failures)
	}
	if r := tl.results[key{"p", "TestB"}]; r.runs != 2 || r.failures != 0 {
		t.Errorf("TestB, whose subtest failed: %d runs, %d failures; want 2, 0", r.runs, r.failures)
	}

	var out strings.Builder
	tl.report(&out, 2, 0)
	for _, line := range []string{"4 failed", "   1/2    p TestB/x", "   1/1    q (the package: no single test failed)"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the report lacks %q:\n%s", line, out.String())
		}
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		name, in string
		want     []int
		err      bool
	}{
		{"one", "0", []int{0}, false},
		{"range", "0-3", []int{0, 1, 2, 3}, false},
		{"mixed", "0-1,4,6-7", []int{0, 1, 4, 6, 7}, false},
		{"empty", "", nil, true},
		{"backwards", "3-1", nil, true},
		{"junk", "a", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUList(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("parseCPUList(%q) error = %v, want error %v", tt.in, err, tt.err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parseCPUList(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestTimingImportAndGoStatement(t *testing.T) {
	for _, imp := range []string{"time", "context", "sync", "sync/atomic", "net", "net/http/httptest", "os/exec", "testing/synctest"} {
		if !timingImport.MatchString(imp) {
			t.Errorf("%s is not counted as a timing import", imp)
		}
	}
	for _, imp := range []string{"strings", "testing", "network/x", "timeutil", "encoding/json"} {
		if timingImport.MatchString(imp) {
			t.Errorf("%s is counted as a timing import", imp)
		}
	}
	for _, src := range []string{"\tgo func() {", "\tgo srv.Serve(l)", "go run(ctx)"} {
		if !goStatement.MatchString(src) {
			t.Errorf("%q is not seen as a go statement", src)
		}
	}
	for _, src := range []string{"\t// go to the next", "\tgot := f()", "\tgoroutines := 3"} {
		if goStatement.MatchString(src) {
			t.Errorf("%q is seen as a go statement", src)
		}
	}
}
