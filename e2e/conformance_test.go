//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// conformanceTimeout bounds one run of the conformance CLI; a run takes
// seconds, and each scenario has its own 30s timeout inside it.
const conformanceTimeout = 5 * time.Minute

// conformanceSummaryFile is where TestConformance writes its counts.
const conformanceSummaryFile = "../results/conformance.txt"

// TestConformance runs the official MCP conformance suite against one
// `portcullis serve` with the conformance toolset: both revisions'
// requirement sets and the whole suite must pass with no failure at all,
// the tasks extension's scenarios (not scored) included.
func TestConformance(t *testing.T) {
	srv := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=conformance"})
	// The counts also go to results/conformance.txt, which `make test`
	// prints, since go test shows a passing test's log only with -v.
	if err := os.MkdirAll(filepath.Dir(conformanceSummaryFile), 0o755); err != nil {
		t.Fatal(err)
	}
	summary, err := os.Create(conformanceSummaryFile)
	if err != nil {
		t.Fatal(err)
	}
	defer summary.Close()
	report := func(format string, args ...any) {
		t.Helper()
		t.Logf(format, args...)
		fmt.Fprintf(summary, format+"\n", args...)
	}

	conformanceRequirements(t, srv.MCPURL(), report)

	t.Run("suite all", func(t *testing.T) {
		out := t.TempDir()
		run := runTool(t, conformanceTimeout, out, "conformance",
			"server", "--url", srv.MCPURL(), "--suite", "all", "--output-dir", out)
		rep := parseConformance(run.Stdout + "\n" + run.Stderr)
		if !rep.found {
			t.Fatalf("conformance --suite all (exit %d) printed no \"Total:\" line\n%s", run.ExitCode, rep.summary(run))
		}
		report("conformance --suite all: %d passed, %d failed (exit %d); failing scenarios: %s",
			rep.passed, rep.failed, run.ExitCode, strings.Join(rep.failing, ", "))
		if run.ExitCode != 0 || rep.failed > 0 {
			t.Errorf("conformance --suite all: exit %d, %d failed checks\nfailed checks:\n%s", run.ExitCode, rep.failed, failedChecks(out))
		}
	})
}

// conformanceRequirements runs the requirement sets of both revisions
// against the MCP endpoint url, one subtest each, and fails a subtest on a
// scored failure. report receives each set's counts.
func conformanceRequirements(t *testing.T, url string, report func(format string, args ...any)) {
	t.Helper()
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("requirements "+rev, func(t *testing.T) {
			out := t.TempDir()
			run := runTool(t, conformanceTimeout, out, "conformance",
				"server", "--url", url, "--requirements", rev, "--output-dir", out)
			rep := parseConformance(run.Stdout + "\n" + run.Stderr)
			report("conformance --requirements %s: %d passed, %d failed (%d failing scenario(s) not scored: %s)",
				rev, rep.passed, rep.failed, len(rep.unscoredFailing()), strings.Join(rep.unscoredFailing(), ", "))
			// Every scenario passes, the tasks extension's (not scored) too.
			if run.ExitCode != 0 || rep.failed > 0 || len(rep.failing) > 0 || !rep.found {
				t.Errorf("conformance --requirements %s: exit %d, %d failed checks, failing scenarios %v (scored: %v)\n%s\nfailed checks:\n%s",
					rev, run.ExitCode, rep.failed, rep.failing, rep.scoredFailing(), rep.summary(run), failedChecks(out))
			}
		})
	}
}

// conformanceReport is what the conformance CLI's summary says.
type conformanceReport struct {
	found          bool     // a "Total:" line was printed
	passed, failed int      // checks, from the "Total:" line
	failing        []string // scenarios marked ✗ in the summary
	unscored       []string // scenarios listed as not scored
	text           string   // from "=== SUMMARY ===" on
}

var (
	totalLine    = regexp.MustCompile(`(?m)^Total: (\d+) passed, (\d+) failed`)
	failingLine  = regexp.MustCompile(`(?m)^✗ (\S+): \d+ passed, \d+ failed`)
	unscoredLine = regexp.MustCompile(`(?m)^\s+[✓✗] (\S+) \(`)
)

// parseConformance reads the summary the CLI prints at the end of a run:
//
//	=== SUMMARY ===
//	✓ server-initialize: 3 passed, 0 failed
//	✗ tasks-lifecycle: 1 passed, 8 failed
//	Total: 165 passed, 30 failed
//
//	Not scored for 2026-07-28: 13 scenario(s) run, 9 failing. These do not affect conformance.
//	  ✗ tasks-lifecycle (extension)
func parseConformance(out string) conformanceReport {
	var r conformanceReport
	if i := strings.LastIndex(out, "=== SUMMARY ==="); i >= 0 {
		out = out[i:]
		r.text = out
	}
	if m := totalLine.FindStringSubmatch(out); m != nil {
		r.found = true
		r.passed, _ = strconv.Atoi(m[1])
		r.failed, _ = strconv.Atoi(m[2])
	}
	for _, m := range failingLine.FindAllStringSubmatch(out, -1) {
		r.failing = append(r.failing, m[1])
	}
	if i := strings.Index(out, "Not scored"); i >= 0 {
		for _, m := range unscoredLine.FindAllStringSubmatch(out[i:], -1) {
			r.unscored = append(r.unscored, m[1])
		}
	}
	return r
}

// scoredFailing lists the failing scenarios that count for conformance.
func (r conformanceReport) scoredFailing() []string {
	var s []string
	for _, f := range r.failing {
		if !slices.Contains(r.unscored, f) {
			s = append(s, f)
		}
	}
	return s
}

// unscoredFailing lists the failing scenarios that do not count.
func (r conformanceReport) unscoredFailing() []string {
	var s []string
	for _, f := range r.failing {
		if slices.Contains(r.unscored, f) {
			s = append(s, f)
		}
	}
	return s
}

// summary is the CLI's summary, or the tail of its output if it printed none.
func (r conformanceReport) summary(run toolRun) string {
	if r.text != "" {
		return r.text
	}
	out := run.Stdout + "\n" + run.Stderr
	if len(out) > 4000 {
		out = "…" + out[len(out)-4000:]
	}
	return out
}

// TestConformanceOnVirtualServers runs both requirement sets against the
// root server (/mcp) and two virtual servers of the same process, each
// virtual server exposing the conformance toolset whole under its own
// path: a server with a view passes what /mcp passes, and /mcp still
// passes next to them.
func TestConformanceOnVirtualServers(t *testing.T) {
	all := map[string]any{"source": "conformance"}
	server := func(name string) map[string]any {
		return map[string]any{
			"name": name, "path": "/mcp/" + name, "title": "Conformance " + name,
			"tools": []any{all}, "resources": []any{all}, "prompts": []any{all},
		}
	}
	cfg := writeConfigFile(t, map[string]any{
		"tools":   map[string]any{"toolsets": []string{"conformance"}},
		"servers": []any{server("conf-a"), server("conf-b")},
	})
	srv := startServer(t, nil, "--config", cfg)
	for _, s := range []struct{ name, path string }{
		{"root", "/mcp"},
		{"conf-a", "/mcp/conf-a"},
		{"conf-b", "/mcp/conf-b"},
	} {
		t.Run(s.name, func(t *testing.T) {
			conformanceRequirements(t, srv.BaseURL+s.path, func(format string, args ...any) {
				t.Helper()
				t.Logf(s.path+": "+format, args...)
			})
		})
	}
}
