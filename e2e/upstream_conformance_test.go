//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// knownLossesDoc is the page whose table lists the conformance scenarios
// that pass against an upstream directly but cannot pass through
// Portcullis, each with the runs it is lost in and why.
const knownLossesDoc = "../docs/upstreams.md"

// knownLossesHeading is the section of knownLossesDoc whose first table is
// the list of known losses.
const knownLossesHeading = "## What is lost through Portcullis"

// upstreamConformanceSummaryFile is where TestUpstreamConformanceComparison
// writes its counts, next to TestConformance's.
const upstreamConformanceSummaryFile = "../results/upstream-conformance.txt"

// comparisonRun is one run of the conformance CLI, made against the
// upstream directly and through Portcullis.
type comparisonRun struct {
	name string   // as the known-losses table names it
	args []string // the CLI's arguments besides --url and --output-dir
	// stateful: the upstream keeps sessions (the go-sdk serves 2025-11-25
	// and older on it); otherwise it is stateless (the go-sdk serves
	// 2026-07-28 only on a stateless handler, and older eras there too).
	stateful bool
}

// comparisonRuns are both revisions' requirement sets, each against the
// upstream the go-sdk's own CI runs it against, and the whole suite
// against both.
var comparisonRuns = []comparisonRun{
	{name: "2025-11-25", args: []string{"--requirements", "2025-11-25"}, stateful: true},
	{name: "2026-07-28", args: []string{"--requirements", "2026-07-28"}, stateful: false},
	{name: "all/stateful", args: []string{"--suite", "all"}, stateful: true},
	{name: "all/stateless", args: []string{"--suite", "all"}, stateful: false},
}

// TestUpstreamConformanceComparison runs the MCP conformance suite against
// the go-sdk's everything-server directly and through Portcullis (the
// server as an http upstream with an empty prefix, auth off on loopback):
// both revisions' requirement sets and the whole suite, against a
// stateful and a stateless everything-server each behind a Portcullis of
// its own. A scenario that passes directly but fails through Portcullis
// fails the test unless the table of docs/upstreams.md ("What is lost
// through Portcullis") lists it for that run with its reason; a listed loss
// that no longer happens fails it too, so the table stays true.
func TestUpstreamConformanceComparison(t *testing.T) {
	known, err := readKnownLosses(knownLossesDoc)
	if err != nil {
		t.Fatal(err)
	}
	goServer := goEverythingServer(t)
	type endpoints struct{ direct, proxied string }
	urls := map[bool]endpoints{}
	for _, stateful := range []bool{true, false} {
		addr := fmt.Sprintf("127.0.0.1:%d", upstreamPort(t))
		startUpstreamProc(t, nil, goServer, "-http", addr, "-stateless="+strconv.FormatBool(!stateful))
		cfg := writeUpstreamConfig(t, fmt.Sprintf(`
upstreams:
  - name: conformance
    prefix: ""
    transport: http
    url: http://%s/mcp
    required: true
`, addr))
		s := startServer(t, nil, "--config", cfg)
		awaitReady(t, s, 60*time.Second)
		urls[stateful] = endpoints{direct: "http://" + addr + "/mcp", proxied: s.MCPURL()}
	}

	if err := os.MkdirAll(filepath.Dir(upstreamConformanceSummaryFile), 0o755); err != nil {
		t.Fatal(err)
	}
	summary, err := os.Create(upstreamConformanceSummaryFile)
	if err != nil {
		t.Fatal(err)
	}
	defer summary.Close()

	// run returns the CLI's summary and the failed checks of its results.
	run := func(t *testing.T, url string, args []string) (conformanceReport, string) {
		t.Helper()
		out := t.TempDir()
		r := runTool(t, conformanceTimeout, out, "conformance", append([]string{"server", "--url", url, "--output-dir", out}, args...)...)
		rep := parseConformance(r.Stdout + "\n" + r.Stderr)
		if !rep.found {
			t.Fatalf("conformance %s against %s printed no summary\n%s", strings.Join(args, " "), url, rep.summary(r))
		}
		return rep, failedChecks(out)
	}
	for _, cr := range comparisonRuns {
		t.Run(cr.name, func(t *testing.T) {
			u := urls[cr.stateful]
			direct, _ := run(t, u.direct, cr.args)
			proxied, checks := run(t, u.proxied, cr.args)
			var lost []string
			for _, f := range proxied.failing {
				if !slices.Contains(direct.failing, f) {
					lost = append(lost, f)
				}
			}
			// What failed in the scenarios lost, as the suite says it.
			var why strings.Builder
			for _, l := range strings.Split(checks, "\n") {
				for _, f := range lost {
					if strings.HasPrefix(strings.TrimSpace(l), "server-"+f+"/") {
						why.WriteString(l + "\n")
					}
				}
			}
			if why.Len() > 0 {
				t.Logf("failed checks of the scenarios lost through Portcullis:\n%s", why.String())
			}
			line := fmt.Sprintf("upstream conformance %s: directly %d passed, %d failed; through Portcullis %d passed, %d failed; lost through Portcullis: %s",
				cr.name, direct.passed, direct.failed, proxied.passed, proxied.failed, strings.Join(lost, ", "))
			t.Log(line)
			fmt.Fprintln(summary, line)
			for _, f := range lost {
				if _, ok := known[f][cr.name]; !ok {
					t.Errorf("scenario %s passes directly but fails through Portcullis (%s); fix it, or list it for %s with its reason in %s (%q)",
						f, cr.name, cr.name, knownLossesDoc, knownLossesHeading)
				}
			}
			for f, runs := range known {
				if _, ok := runs[cr.name]; ok && !slices.Contains(lost, f) {
					t.Errorf("%s lists %s as lost in %s, but it is not lost there now (directly failing: %t): update the table",
						knownLossesDoc, f, cr.name, slices.Contains(direct.failing, f))
				}
			}
			if proxied.passed == 0 {
				t.Error("nothing passes through Portcullis")
			}
			if cr.name == "2025-11-25" {
				// Log messages, sampling and elicitation are forwarded to
				// a 2025-11-25 caller: the comparison checks that only if
				// they pass directly.
				for _, f := range []string{"tools-call-with-logging", "tools-call-sampling", "tools-call-elicitation",
					"elicitation-sep1034-defaults", "elicitation-sep1330-enums"} {
					if slices.Contains(direct.failing, f) {
						t.Errorf("scenario %s fails directly against the everything-server: the comparison cannot check that Portcullis forwards it", f)
					}
				}
			}
		})
	}
}

// TestUpstreamConformanceSSEPollingResumed runs the server-sse-polling
// scenario against an upstream that gives event ids, directly and through
// Portcullis. The go-sdk everything-server of the comparison keeps no event
// store, so what its test_reconnection returns after closing the call's
// stream is lost to every client (docs/upstreams.md); a Portcullis with the
// conformance toolset keeps one, and is the upstream here. Directly, the
// scenario resumes the closed stream with Last-Event-ID; through
// Portcullis, Portcullis's upstream client resumes it and the caller gets
// the tool's result, not an error, on its own stream, which Portcullis
// keeps open.
func TestUpstreamConformanceSSEPollingResumed(t *testing.T) {
	upstream := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=conformance"})
	cfg := writeUpstreamConfig(t, fmt.Sprintf(`
upstreams:
  - name: conformance
    prefix: ""
    transport: http
    url: %s
    required: true
`, upstream.MCPURL()))
	front := startServer(t, nil, "--config", cfg)
	awaitReady(t, front, 60*time.Second)

	// run returns the scenario's checks, ID and status by description.
	run := func(t *testing.T, url string) map[string]string {
		t.Helper()
		out := t.TempDir()
		r := runTool(t, conformanceTimeout, out, "conformance", "server", "--url", url, "--output-dir", out, "--scenario", "server-sse-polling")
		if f := failedChecks(out); r.ExitCode != 0 || f != "" {
			t.Fatalf("server-sse-polling against %s: exit %d, failed checks:\n%s\n%s\n%s", url, r.ExitCode, f, r.Stdout, r.Stderr)
		}
		return sseChecks(t, out)
	}
	direct := run(t, upstream.MCPURL())
	if got := direct["Server closes SSE stream mid-call and resumes after client reconnects with Last-Event-ID"]; got != "server-sse-disconnect-resume SUCCESS" {
		t.Errorf("directly, the upstream's stream was not closed and resumed (%q): the test no longer shows what it means to: %v", got, direct)
	}
	proxied := run(t, front.MCPURL())
	if got := proxied["Received tool response on POST stream"]; got != "incoming-sse-event INFO" {
		t.Errorf("through Portcullis, the tool's result did not reach the caller on its stream (%q): %v", got, proxied)
	}
	if got := proxied["Server SHOULD send priming event with id and empty data on POST SSE streams"]; got != "server-sse-priming-event SUCCESS" {
		t.Errorf("through Portcullis, the caller's stream has no priming event (%q): %v", got, proxied)
	}
}

// sseChecks reads the checks.json files under dir: each check's ID and
// status, keyed by its description.
func sseChecks(t *testing.T, dir string) map[string]string {
	t.Helper()
	checks := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var list []struct{ ID, Status, Description string }
		if err := json.Unmarshal(data, &list); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, c := range list {
			checks[c.Description] = c.ID + " " + c.Status
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) == 0 {
		t.Fatalf("no checks.json under %s", dir)
	}
	return checks
}

// knownLossRow is a row of the known-losses table: | `scenario` | runs | why |.
var knownLossRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|([^|]*)\\|(.*)\\|\\s*$")

// readKnownLosses reads the known-losses table of the doc at path: for each
// scenario, the runs (comparisonRuns' names) it is lost in, each with the
// reason. A row without a reason or naming no known run is an error.
func readKnownLosses(path string) (map[string]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	for _, r := range comparisonRuns {
		names = append(names, r.name)
	}
	known := map[string]map[string]string{}
	in, table := false, false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == knownLossesHeading:
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "#"):
			in = false
			continue
		case strings.HasPrefix(line, "|"):
			table = true
		case table:
			in = false // the first table ended
			continue
		default:
			continue
		}
		m := knownLossRow.FindStringSubmatch(line)
		if m == nil {
			continue // the header and its separator
		}
		scenario, why := m[1], strings.TrimSpace(m[3])
		if why == "" {
			return nil, fmt.Errorf("%s:%d: %s is listed without a reason", path, n, scenario)
		}
		if known[scenario] == nil {
			known[scenario] = map[string]string{}
		}
		for _, r := range strings.Split(m[2], ",") {
			r = strings.Trim(strings.TrimSpace(r), "`")
			if !slices.Contains(names, r) {
				return nil, fmt.Errorf("%s:%d: %s is listed for run %q; the runs are %s", path, n, scenario, r, strings.Join(names, ", "))
			}
			known[scenario][r] = why
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !table {
		return nil, fmt.Errorf("%s: no table under %q", path, knownLossesHeading)
	}
	return known, nil
}

// TestKnownLossesTable checks that the known-losses table reads: every row
// names runs of the comparison and gives a reason, and a row that does not
// is an error.
func TestKnownLossesTable(t *testing.T) {
	known, err := readKnownLosses(knownLossesDoc)
	if err != nil {
		t.Fatal(err)
	}
	if len(known) == 0 {
		t.Fatalf("%s lists no known loss under %q", knownLossesDoc, knownLossesHeading)
	}
	for _, tt := range []struct {
		name, row string
	}{
		{name: "an unknown run", row: "| `x` | `2099-01-01` | a reason |"},
		{name: "no reason", row: "| `x` | `2025-11-25` |  |"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "doc.md")
			doc := knownLossesHeading + "\n\n| Scenario | Lost in | Why |\n|---|---|---|\n" + tt.row + "\n"
			if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := readKnownLosses(p); err == nil {
				t.Errorf("readKnownLosses accepted the row %q", tt.row)
			}
		})
	}
}
