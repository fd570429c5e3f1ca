package docscheck

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// patches/skipped-tests.txt names the upstream tests that make
// sdk-patch-test skips on the patched SDK and fosite, each with its
// reason. A skip hides a suite's test from every run, so the list is kept
// short and every entry says why; scripts/sdk-patch-test.sh fails when a
// listed test no longer exists.

const skippedTestsPath = root + "/patches/skipped-tests.txt"

// maxSkippedTests is how long the list may grow. A timing-dependent
// upstream test gets a test patch in patches/ first; a skip is for the
// few that cannot have one.
const maxSkippedTests = 3

// minReasonWords is the shortest reason that can say what the test
// measures and why it cannot pass on a loaded machine.
const minReasonWords = 12

var testName = regexp.MustCompile(`^Test[A-Za-z0-9_]*$`)

// skippedTestProblems returns what is wrong with the list src: malformed
// lines, unknown modules, names that are not a top-level test, duplicates,
// short reasons, and more entries than maxSkippedTests.
func skippedTestProblems(src string) []string {
	var problems []string
	seen := map[string]bool{}
	n := 0
	for i, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		where := fmt.Sprintf("line %d", i+1)
		fields := strings.Fields(line)
		if len(fields) < 3 {
			problems = append(problems, where+": want MODULE TEST REASON")
			continue
		}
		module, test, reason := fields[0], fields[1], fields[2:]
		if module != "go-sdk" && module != "fosite" {
			problems = append(problems, fmt.Sprintf("%s: module %q is not a folder of patches/ (go-sdk, fosite)", where, module))
		}
		if !testName.MatchString(test) {
			problems = append(problems, fmt.Sprintf("%s: %q is not a top-level test's name", where, test))
		}
		if seen[module+" "+test] {
			problems = append(problems, fmt.Sprintf("%s: %s %s is listed twice", where, module, test))
		}
		seen[module+" "+test] = true
		if len(reason) < minReasonWords {
			problems = append(problems, fmt.Sprintf("%s: the reason for skipping %s has %d words; say what it measures and why it cannot pass under load (at least %d)", where, test, len(reason), minReasonWords))
		}
	}
	if n > maxSkippedTests {
		problems = append(problems, fmt.Sprintf("%d upstream tests are skipped, more than %d: fix the test in a patch instead (patches/README.md)", n, maxSkippedTests))
	}
	return problems
}

// TestSkippedUpstreamTests checks patches/skipped-tests.txt.
func TestSkippedUpstreamTests(t *testing.T) {
	src, err := os.ReadFile(skippedTestsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range skippedTestProblems(string(src)) {
		t.Errorf("%s: %s", skippedTestsPath, p)
	}
}

func TestSkippedTestProblems(t *testing.T) {
	reason := "measures the wall time of a child process's exit, which a loaded machine stretches past its bound"
	tests := []struct {
		name string
		src  string
		want []string // a part of each problem, in order
	}{
		{"empty", "# nothing\n\n", nil},
		{"good", "go-sdk TestA " + reason + "\nfosite TestB " + reason + "\n", nil},
		{"no reason", "go-sdk TestA\n", []string{"want MODULE TEST REASON"}},
		{"short reason", "go-sdk TestA it is flaky\n", []string{"has 3 words"}},
		{"unknown module", "mcp-go TestA " + reason + "\n", []string{`module "mcp-go"`}},
		{"subtest", "go-sdk TestA/sub " + reason + "\n", []string{"not a top-level test"}},
		{"twice", "go-sdk TestA " + reason + "\ngo-sdk TestA " + reason + "\n", []string{"listed twice"}},
		{"too many",
			"go-sdk TestA " + reason + "\ngo-sdk TestB " + reason + "\ngo-sdk TestC " + reason + "\ngo-sdk TestD " + reason + "\n",
			[]string{"4 upstream tests are skipped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := skippedTestProblems(tt.src)
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
