//go:build e2e

package e2e

// The official MCP conformance suite's authorization-server scenarios
// (`conformance authorization`) against Portcullis's issuer URL, with the
// test as the user's browser for the one scenario that needs a sign-in.

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// asConformanceClient is the public client pre-registered for the suite,
// with the suite's callback server as its exact redirect URI.
const asConformanceClient = "mcp-conformance"

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Status       string          `json:"status"`
	Description  string          `json:"description"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// readConformanceChecks reads every checks.json the suite wrote under dir,
// by scenario (the name of the folder holding it, without the timestamp
// the suite appends).
func readConformanceChecks(t *testing.T, dir string) map[string][]conformanceCheck {
	t.Helper()
	out := map[string][]conformanceCheck{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("%s: %v\n%s", path, err, b)
			return nil
		}
		scenario, _ := filepath.Rel(dir, filepath.Dir(path))
		out[scenario] = append(out[scenario], checks...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAuthServerConformance runs `conformance authorization` (the suite's
// authorization-server scenarios: authorization-server-metadata-endpoint,
// with its Client ID Metadata Document check, and authorization-code-grant)
// against the issuer of Portcullis in authorization-server mode in front
// of the real IdP. The code-grant scenario prints an authorization URL and
// waits for a browser to bring the redirect to its callback server; the
// test reads the URL off the suite's stdout, signs in as a user (the IdP's
// login and Portcullis's consent page), and delivers the redirect. It
// fails on any check that is not SUCCESS (a WARNING included).
func TestAuthServerConformance(t *testing.T) {
	start := time.Now()
	callbackAddr := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(callbackAddr)
	srv, idp := startASServer(t, "", map[string]any{
		"clients": []map[string]any{
			{"client_id": asAppClient, "name": asAppName, "redirect_uris": []string{asAppRedirect}},
			{"client_id": asConformanceClient, "name": "MCP conformance suite", "redirect_uris": []string{"http://" + callbackAddr + "/callback"}},
		},
	})
	issuer, resource := srv.BaseURL, srv.MCPURL()

	path, env := nodeTool(t, "conformance")
	results := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "authorization", "--url", issuer, "--client-id", asConformanceClient, "--resource", resource, "--port", port, "-o", results)
	cmd.Dir = t.TempDir()
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	authorized := false
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if authorized || !strings.HasPrefix(line, issuer+"/oauth/authorize?") {
			continue
		}
		authorized = true
		// The browser: sign in, consent, and follow the last redirect to
		// the suite's callback server.
		b := newSignInBrowser(idp, "conny")
		b.App = "MCP conformance suite"
		cb, err := b.Run(ctx, line)
		if err != nil {
			t.Errorf("sign-in for the suite: %v", err)
			continue
		}
		if !strings.HasPrefix(cb.String(), "http://"+callbackAddr+"/callback?") {
			t.Errorf("the sign-in ended at %s, want the suite's callback", cb)
			continue
		}
		if p, err := b.do(ctx, http.MethodGet, cb.String(), nil); err != nil || p.Status != http.StatusOK {
			t.Errorf("the suite's callback: %v, %+v", err, p)
		}
	}
	err = cmd.Wait()
	t.Logf("conformance authorization (exit %v):\n%s", err, out.String())
	if ctx.Err() != nil {
		t.Fatalf("conformance authorization did not finish in time\nstderr:\n%s", stderr.String())
	}
	if !authorized {
		t.Errorf("the suite printed no authorization URL of %s", issuer)
	}

	checks := readConformanceChecks(t, results)
	seen := map[string]bool{}
	for scenario, cs := range checks {
		for _, c := range cs {
			seen[c.ID] = true
			if c.Status != "SUCCESS" {
				t.Errorf("%s: check %s (%s): %s %s\n%s", scenario, c.ID, c.Name, c.Status, c.ErrorMessage, c.Details)
			}
		}
	}
	// The metadata scenario's checks (the second is the Client ID
	// Metadata Document one: a WARNING unless
	// client_id_metadata_document_supported is true) and the code grant's.
	for _, id := range []string{"authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant"} {
		if !seen[id] {
			t.Errorf("no result for the check %s; checks seen: %v\nstderr:\n%s", id, seen, stderr.String())
		}
	}
	if err != nil && !t.Failed() {
		t.Errorf("conformance authorization: %v, though every check passed\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("TestAuthServerConformance took %v", time.Since(start).Round(time.Millisecond))
}
