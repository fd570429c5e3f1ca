package portcullis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// startServe runs serve with args on a free loopback port and returns the
// base URL and what it printed on stdout.
func startServe(t *testing.T, args ...string) (base string, stdout *syncbuf.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stdout = &syncbuf.Buffer{}
	var stderr syncbuf.Buffer
	exited := make(chan int, 1)
	done := make(chan struct{}) // closed on return, even when listenAddr took the code
	go func() {
		defer close(done)
		exited <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, args...), noDrainDelay, strings.NewReader(""), stdout, &stderr)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + listenAddr(t, &stderr, exited), stdout
}

func TestDoctor(t *testing.T) {
	dev, banner := startServe(t, "--dev")
	// startServe waited for the "listening" log line, which follows the banner.
	_, rest, _ := strings.Cut(banner.String(), "MCP_TOKEN=")
	token, _, _ := strings.Cut(rest, "\n")
	if token == "" {
		t.Fatalf("no token in the dev banner:\n%s", banner.String())
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open, _ := startServe(t) // auth off, loopback
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>hello</html>"))
	}))
	t.Cleanup(web.Close)

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // each must appear in the output
	}{
		{
			name: "dev server with its token", args: []string{dev + "/mcp", "--token", token},
			want: []string{"PASS  initialize", "PASS  tools/list                5 tools", "PASS  Mcp-Method checked", "PASS  origin refused", "0 failed"},
		},
		{
			name: "flags before the URL, token from a file", args: []string{"--token-file", tokenFile, "--timeout", "5s", dev + "/mcp"},
			want: []string{"PASS  tools/list", "0 failed"},
		},
		{
			name: "dev server without a token", args: []string{dev + "/mcp"},
			want: []string{"PASS  challenge", "PASS  origin refused", "SKIP  initialize", "needs --token", "0 failed"},
		},
		{
			name: "resource is not the URL", args: []string{strings.Replace(dev, "127.0.0.1", "localhost", 1) + "/mcp", "--token", token},
			wantCode: 1, want: []string{"FAIL  resource metadata", `resource is "` + dev + `/mcp"`, "checks failed"},
		},
		{
			name: "server down", args: []string{down.URL + "/mcp"},
			wantCode: 1, want: []string{"FAIL  reachable", "connection refused", "SKIP  initialize", "server unreachable"},
		},
		{
			name: "not MCP", args: []string{web.URL + "/mcp"},
			wantCode: 1, want: []string{"FAIL  reachable", "not an MCP endpoint", "text/html"},
		},
		{
			name: "auth off", args: []string{open + "/mcp"},
			wantCode: 1, want: []string{"FAIL  auth", "auth is OFF", "PASS  tools/list"},
		},
		{
			name: "auth off, allowed", args: []string{open + "/mcp", "--allow-unauthenticated"},
			want: []string{"WARN  auth", "PASS  origin refused", "0 failed"},
		},
		{name: "no URL", args: nil, wantCode: 2, want: []string{"missing the MCP URL"}},
		{name: "two URLs", args: []string{dev + "/mcp", dev + "/mcp"}, wantCode: 2, want: []string{"unexpected arguments"}},
		{name: "both token flags", args: []string{dev + "/mcp", "--token", "x", "--token-file", tokenFile}, wantCode: 2, want: []string{"exclusive"}},
		{name: "endless token file", args: []string{dev + "/mcp", "--token-file", "/dev/zero"}, wantCode: 1, want: []string{"not a token"}},
		{name: "missing token file", args: []string{dev + "/mcp", "--token-file", "/nonexistent/token"}, wantCode: 1, want: []string{"--token-file", "/nonexistent/token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out syncbuf.Buffer
			code := run(t.Context(), append([]string{"doctor"}, tt.args...), nil, strings.NewReader(""), &out, &out)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if strings.Contains(out.String(), token) {
				t.Error("the output contains the token")
			}
			if t.Failed() {
				t.Logf("output:\n%s", out.String())
			}
		})
	}
}
