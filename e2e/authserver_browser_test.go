//go:build e2e

package e2e

// The authorization server's consent page in a real browser: Debian's
// Chromium, headless, driven over the DevTools protocol (chromedp, through
// a pipe: no port). The browser does what a user's browser does: it opens
// the client's authorization URL at Portcullis, signs in at the real IdP
// (e2e/idp, its dev-interactions login and consent forms, typed and
// clicked), lands on Portcullis's consent page and clicks a button there;
// the client's redirect URI is a small server of the test that records
// what arrives. Pages of other origins (other loopback ports, and
// localhost, another site) play the attacker.

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromiumBinary is the browser the tests drive: $PORTCULLIS_CHROMIUM, or
// chromium on PATH (scripts/install-chromium.sh, part of `make tools`).
func chromiumBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PORTCULLIS_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (%v): run `make tools` (scripts/install-chromium.sh) first, or set PORTCULLIS_CHROMIUM to a Chromium binary", err)
	}
	return p
}

// startChromium starts one headless Chromium for the test and returns its
// browser context; newTab opens tabs in it. The browser is stopped on
// cleanup.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumBinary(t)),
		chromedp.Flag("headless", "new"),
		// Root has no user-namespace sandbox here.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		// No name but the loopback ones resolves: the IdP's pages import
		// a web font, whose lookup would otherwise wait for a DNS timeout
		// on a machine without a network.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	start := time.Now()
	// The first Run starts the browser.
	version, err := chromedp.Run(browserCtx, chromedp.Evaluate[string](`navigator.userAgent`))
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Logf("chromium started in %v: %s", time.Since(start).Round(time.Millisecond), version)
	return browserCtx
}

// newTab opens a tab in a browser context of its own (its own cookies, as
// a fresh browser profile) with the network and log domains on, and
// JavaScript off when noScript. It is closed on cleanup.
func newTab(t *testing.T, browser context.Context, noScript bool) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancelTimeout)
	err := chromedp.Do(ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return chromedp.Void{}, err
		}
		if _, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{}); err != nil {
			return chromedp.Void{}, err
		}
		if noScript {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return chromedp.Void{}, err
		}
		return chromedp.Void{}, nil
	})
	if err != nil {
		t.Fatalf("new tab: %v", err)
	}
	return ctx
}

// pageServer is an HTTP server on a loopback port serving the HTML pages
// the test puts there: another origin than Portcullis's (the attacker's
// site, or the client's redirect URI).
type pageServer struct {
	// Origin is http://HOST:PORT, HOST as given to startPageServer.
	Origin string

	mu    sync.Mutex
	pages map[string]string
	hits  chan *url.URL
}

// startPageServer listens on 127.0.0.1 and names itself host (127.0.0.1:
// the same site as Portcullis on another port; localhost: another site).
// Every request's URL is sent on Hits (buffered; requests beyond its room
// are dropped from it, not refused).
func startPageServer(t *testing.T, host string) *pageServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ps := &pageServer{Origin: "http://" + net.JoinHostPort(host, port), pages: map[string]string{}, hits: make(chan *url.URL, 16)}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ps.hits <- r.URL:
		default:
		}
		ps.mu.Lock()
		body, ok := ps.pages[r.URL.Path]
		ps.mu.Unlock()
		if !ok {
			body = "<!doctype html><title>page</title><p>nothing here</p>"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(w, body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ps
}

// Set serves body at path.
func (ps *pageServer) Set(path, body string) string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.pages[path] = body
	return ps.Origin + path
}

// Hits are the URLs of the requests it got.
func (ps *pageServer) Hits() <-chan *url.URL { return ps.hits }

// chromeSignIn drives the tab from the client's authorization URL through
// the IdP's forms (its login as user, then its own consent) to
// Portcullis's consent page, and returns that page's URL and response.
func chromeSignIn(t *testing.T, tab context.Context, idp *IdP, issuer, authURL, user string) (string, *network.Response) {
	t.Helper()
	resp, err := chromedp.Run(tab, chromedp.NavigateResponse(authURL))
	for step := 0; ; step++ {
		if err != nil {
			t.Fatalf("sign-in step %d: %v", step, err)
		}
		if strings.HasPrefix(resp.URL, issuer+"/oauth/consent?") {
			return resp.URL, resp
		}
		if step > 4 || !strings.HasPrefix(resp.URL, idp.Issuer()+"/") {
			t.Fatalf("sign-in step %d: at %s (status %d), want the IdP's forms, then Portcullis's consent page", step, resp.URL, resp.Status)
		}
		logins, qerr := chromedp.Run(tab, chromedp.Nodes(chromedp.CSS(`input[name="login"]`), chromedp.AtLeast(0)))
		if qerr != nil {
			t.Fatalf("sign-in step %d at %s: %v", step, resp.URL, qerr)
		}
		if len(logins) > 0 {
			// Typed, as a user does: key events, no script.
			if err := chromedp.Do(tab,
				chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), user),
				chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "any"),
			); err != nil {
				t.Fatalf("sign-in at the IdP's login form: %v", err)
			}
		}
		resp, err = chromedp.RunResponse(tab, chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	}
}

// consentFields reads the hidden fields of the consent page in the tab.
func consentFields(t *testing.T, tab context.Context) (login, csrf string) {
	t.Helper()
	var err error
	if login, err = chromedp.Run(tab, chromedp.Value(chromedp.CSS(`input[name="login"]`))); err != nil {
		t.Fatal(err)
	}
	if csrf, err = chromedp.Run(tab, chromedp.Value(chromedp.CSS(`input[name="csrf"]`))); err != nil {
		t.Fatal(err)
	}
	if login == "" || csrf == "" {
		t.Fatalf("consent page: hidden fields login %q, csrf %q; want both", login, csrf)
	}
	return login, csrf
}

// answerConsent clicks the consent page's button (approve or deny) and
// returns the response of the page the browser lands on.
func answerConsent(t *testing.T, tab context.Context, action string) *network.Response {
	t.Helper()
	resp, err := chromedp.RunResponse(tab, chromedp.Click(chromedp.CSS(`button[name="action"][value="`+action+`"]`)))
	if err != nil {
		t.Fatalf("click %s: %v", action, err)
	}
	return resp
}

// redirectOf waits for the browser's request at the client's redirect
// URI (the catcher) and returns it as the full URL.
func redirectOf(t *testing.T, catcher *pageServer) *url.URL {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case u := <-catcher.Hits():
			if !strings.HasPrefix(u.Path, "/callback") {
				continue // the favicon, a probe page
			}
			full, err := url.Parse(catcher.Origin + u.String())
			if err != nil {
				t.Fatal(err)
			}
			return full
		case <-timeout:
			t.Fatal("nothing arrived at the client's redirect URI within 30s")
			return nil
		}
	}
}

// noHit fails if the client's redirect URI got a request.
func noHit(t *testing.T, catcher *pageServer, what string) {
	t.Helper()
	for {
		select {
		case u := <-catcher.Hits():
			if strings.HasPrefix(u.Path, "/callback") {
				t.Errorf("%s: the client's redirect URI got %s", what, u)
			}
		default:
			return
		}
	}
}

// startNavigation starts loading u in the tab and returns at once: the
// attacker's page navigates away by itself while it loads, so waiting for
// its load event would race with that.
func startNavigation(u string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		res, err := cdp.Call(ctx, tg, page.Navigate, page.NavigateParams{URL: u})
		if err == nil && res.ErrorText != "" {
			err = fmt.Errorf("navigate to %s: %s", u, res.ErrorText)
		}
		return chromedp.Void{}, err
	}
}

// axNode is a node of the page's accessibility tree, as a screen reader
// gets it.
type axNode struct{ Role, Name string }

// axTree returns the accessibility tree of the tab's page, ignored nodes
// left out.
func axTree(t *testing.T, tab context.Context) []axNode {
	t.Helper()
	res, err := chromedp.Call(tab, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		t.Fatalf("accessibility tree: %v", err)
	}
	str := func(v *accessibility.Value) string {
		var s string
		if v != nil {
			_ = json.Unmarshal(v.Value, &s)
		}
		return s
	}
	var nodes []axNode
	for _, n := range res.Nodes {
		if !n.Ignored {
			nodes = append(nodes, axNode{Role: str(n.Role), Name: str(n.Name)})
		}
	}
	return nodes
}

// headerOf is the value of the header name in h (any case), or "".
func headerOf(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}

// TestAuthServerBrowser drives the consent page with headless Chromium:
//   - approve: the page's accessibility tree has its title, a heading
//     naming the client and the buttons Allow and Deny; the browser lands
//     on the client's redirect URI with a code, state and iss, and the
//     code exchanges for a token that works on /mcp;
//   - deny: the redirect carries error=access_denied and no code;
//   - a cross-site POST: a page of another origin (the same site on
//     another loopback port, where the SameSite=Lax binding cookie goes
//     along, and localhost, another site) auto-submits a form with the
//     page's stolen hidden fields to /oauth/consent: 403, no code; the
//     page's link opened in another browser is refused (400, no form);
//     and the real user can still answer afterwards;
//   - framing: a page of another origin that iframes the live consent page
//     gets an error page in the frame (X-Frame-Options DENY and CSP
//     frame-ancestors 'none'), while the same page frames a harmless page
//     of a third origin;
//   - without JavaScript (script execution disabled in the tab) the whole
//     sign-in, IdP forms included, works, and the approval, given with the
//     keyboard (Tab reaches Allow first, Enter), gives a code.
func TestAuthServerBrowser(t *testing.T) {
	start := time.Now()
	browser := startChromium(t)
	srv, idp := startASServer(t, "", nil)
	issuer, resource := srv.BaseURL, srv.MCPURL()
	client := startPageServer(t, "127.0.0.1")

	// signIn starts a sign-in of a new app (its redirect URI the
	// catcher) in a fresh tab and returns both at the consent page.
	signIn := func(t *testing.T, user string, noScript bool) (*asApp, context.Context, string) {
		t.Helper()
		app := newASApp(t, issuer, resource, "mcp:tools")
		app.redirect = client.Set("/callback", "<!doctype html><title>app</title><p>back at the app</p>")
		tab := newTab(t, browser, noScript)
		consentURL, resp := chromeSignIn(t, tab, idp, issuer, app.AuthURL(issuer), user)
		if resp.Status != http.StatusOK {
			t.Fatalf("consent page: status %d", resp.Status)
		}
		text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{asAppName, resource, "mcp:tools", user, client.Origin[len("http://"):]} {
			if !strings.Contains(text, want) {
				t.Errorf("consent page text lacks %q:\n%s", want, text)
			}
		}
		return app, tab, consentURL
	}

	t.Run("approve", func(t *testing.T) {
		app, tab, _ := signIn(t, "alice", false)
		// What a screen reader gets: the page's title, a heading naming
		// the client, and two buttons named by their text.
		tree := axTree(t, tab)
		for _, want := range []struct {
			role string
			name func(string) bool
		}{
			{"RootWebArea", func(n string) bool { return n == "Allow access?" }},
			{"heading", func(n string) bool { return strings.Contains(n, asAppName) }},
			{"button", func(n string) bool { return n == "Allow" }},
			{"button", func(n string) bool { return n == "Deny" }},
		} {
			if !slices.ContainsFunc(tree, func(n axNode) bool { return n.Role == want.role && want.name(n.Name) }) {
				t.Errorf("accessibility tree: no %s with the right name: %+v", want.role, tree)
			}
		}
		resp := answerConsent(t, tab, "approve")
		cb := redirectOf(t, client)
		if !strings.HasPrefix(resp.URL, app.redirect+"?") || resp.Status != http.StatusOK {
			t.Errorf("after Allow the browser is at %s (status %d), want %s", resp.URL, resp.Status, app.redirect)
		}
		tr := mustToken(t, "code exchange")(app.Exchange(t, issuer, app.Code(t, cb)))
		checkASToken(t, tr.AccessToken, issuer, resource, "alice")
		if st := pingWith(t, resource, tr.AccessToken); st != http.StatusOK {
			t.Errorf("the token on /mcp: status %d, want 200", st)
		}
	})

	t.Run("deny", func(t *testing.T) {
		app, tab, _ := signIn(t, "dan", false)
		answerConsent(t, tab, "deny")
		cb := redirectOf(t, client)
		q := cb.Query()
		if !strings.HasPrefix(cb.String(), app.redirect+"?") || q.Get("error") != "access_denied" || q.Get("code") != "" || q.Get("state") != app.state || q.Get("iss") != issuer {
			t.Errorf("after Deny: redirect %s; want %s with error access_denied, the state, iss and no code", cb, app.redirect)
		}
	})

	t.Run("cross-site POST refused", func(t *testing.T) {
		app, tab, consentURL := signIn(t, "carl", false)
		login, csrf := consentFields(t, tab)
		// The attacker's page: a form with the stolen fields, posted by
		// script as soon as it loads, from the same site on another port
		// and from another site.
		attack := fmt.Sprintf(`<!doctype html><title>win a prize</title>
<form method="post" action="%s">
<input type="hidden" name="login" value="%s">
<input type="hidden" name="csrf" value="%s">
<input type="hidden" name="action" value="approve">
</form>
<script>document.forms[0].submit()</script>`, html.EscapeString(issuer+"/oauth/consent"), html.EscapeString(login), html.EscapeString(csrf))
		for _, host := range []string{"127.0.0.1", "localhost"} {
			evil := startPageServer(t, host)
			evilURL := evil.Set("/prize", attack)
			sent := chromedp.Events(tab, network.RequestWillBeSentExtraInfo)
			resp, err := chromedp.Run(tab, chromedp.WaitEvent(network.ResponseReceived, func(ev network.EventResponseReceived) bool {
				return ev.Type == network.ResourceTypeDocument && ev.Response.URL == issuer+"/oauth/consent"
			}, startNavigation(evilURL)))
			if err != nil {
				t.Fatalf("the attack page at %s: %v", evilURL, err)
			}
			if resp.Response.Status != http.StatusForbidden {
				t.Errorf("consent POST from %s: status %d, want 403", evil.Origin, resp.Response.Status)
			}
			// What the browser sent: the attacker's Origin.
			for ev, err := range sent {
				if err != nil {
					t.Fatal(err)
				}
				if ev.RequestID == resp.RequestID {
					if o := headerOf(ev.Headers, "Origin"); o != evil.Origin {
						t.Errorf("the browser sent Origin %q, want %s", o, evil.Origin)
					}
					t.Logf("from %s the browser sent Origin %q, Sec-Fetch-Site %q, a cookie %v; Portcullis answered %d", evil.Origin, headerOf(ev.Headers, "Origin"), headerOf(ev.Headers, "Sec-Fetch-Site"), headerOf(ev.Headers, "Cookie") != "", resp.Response.Status)
					break
				}
			}
			if err := chromedp.Do(tab, chromedp.WaitReady(chromedp.CSS("h1"))); err != nil {
				t.Fatal(err)
			}
			if text, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(text, "Request refused") {
				t.Errorf("the page after the attack from %s: %q, want Request refused", evil.Origin, text)
			}
			noHit(t, client, "the attack from "+evil.Origin)
		}
		// The consent page's link, opened in another browser (no binding
		// cookie): refused, no form.
		other := newTab(t, browser, false)
		resp, err := chromedp.Run(other, chromedp.NavigateResponse(consentURL))
		if err != nil {
			t.Fatal(err)
		}
		if forms, _ := chromedp.Run(other, chromedp.Nodes(chromedp.CSS("form"), chromedp.AtLeast(0))); resp.Status != http.StatusBadRequest || len(forms) != 0 {
			t.Errorf("the consent link in another browser: status %d, %d form(s); want 400 and no form", resp.Status, len(forms))
		}
		// The sign-in is still open: the user's own answer works.
		if err := chromedp.Do(tab, chromedp.Navigate(consentURL)); err != nil {
			t.Fatal(err)
		}
		answerConsent(t, tab, "approve")
		mustToken(t, "the user's own approval after the attacks")(app.Exchange(t, issuer, app.Code(t, redirectOf(t, client))))
	})

	t.Run("framing refused", func(t *testing.T) {
		_, tab, consentURL := signIn(t, "fay", false)
		// A harmless page of a third origin, which may be framed: the
		// control, showing that a frame the browser renders looks
		// different.
		other := startPageServer(t, "127.0.0.1")
		framable := other.Set("/framable", "<!doctype html><title>framable</title><p>framable</p>")
		evil := startPageServer(t, "127.0.0.1")
		evilURL := evil.Set("/frame", fmt.Sprintf(`<!doctype html><title>click here</title>
<iframe name="consent" src="%s" width="600" height="400"></iframe>
<iframe name="control" src="%s"></iframe>`, html.EscapeString(consentURL), html.EscapeString(framable)))
		logs := chromedp.Events(tab, cdplog.EntryAdded)
		responses := chromedp.Events(tab, network.ResponseReceived)
		if err := chromedp.Do(tab, chromedp.Navigate(evilURL)); err != nil {
			t.Fatal(err)
		}
		tree, err := chromedp.Call(tab, page.GetFrameTree, cdp.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		frames := map[string]*cdp.Frame{}
		for _, child := range tree.FrameTree.ChildFrames {
			frames[child.Frame.Name] = child.Frame
			t.Logf("frame %q: url %s, unreachable %q", child.Frame.Name, child.Frame.URL, child.Frame.UnreachableURL)
		}
		if c := frames["control"]; c == nil || c.URL != framable || c.UnreachableURL != "" {
			t.Fatalf("the control frame: %+v, want %s rendered", c, framable)
		}
		if c := frames["consent"]; c == nil || c.URL == consentURL && c.UnreachableURL == "" {
			t.Errorf("the consent frame: %+v; want it blocked (an error page), not the consent page", c)
		}
		// The server did answer the frame's request (200, with the
		// browser-binding cookie, same site): the browser refused to
		// render it, for the headers' sake.
		for ev, err := range responses {
			if err != nil {
				t.Fatalf("no response for the framed consent page: %v", err)
			}
			if ev.Response.URL == consentURL {
				if xfo := headerOf(ev.Response.Headers, "X-Frame-Options"); ev.Response.Status != http.StatusOK || xfo != "DENY" {
					t.Errorf("the framed consent page: status %d, X-Frame-Options %v; want 200 and DENY", ev.Response.Status, xfo)
				}
				break
			}
		}
		// And says so on the console.
		for ev, err := range logs {
			if err != nil {
				t.Fatalf("no console message about the refused frame: %v", err)
			}
			if strings.Contains(ev.Entry.Text, "frame-ancestors") || strings.Contains(ev.Entry.Text, "X-Frame-Options") {
				t.Logf("console (%s): %s", ev.Entry.Source, ev.Entry.Text)
				break
			}
		}
	})

	t.Run("without JavaScript", func(t *testing.T) {
		// The tab runs no script: a page that sets its title by script
		// keeps its own.
		probe := client.Set("/probe", `<!doctype html><title>no script</title><script>document.title = "script ran"</script>`)
		tab := newTab(t, browser, true)
		if err := chromedp.Do(tab, chromedp.Navigate(probe)); err != nil {
			t.Fatal(err)
		}
		if title, err := chromedp.Run(tab, chromedp.Title()); err != nil || title != "no script" {
			t.Fatalf("probe title %q, %v: JavaScript is not off", title, err)
		}
		app := newASApp(t, issuer, resource, "mcp:tools")
		app.redirect = client.Set("/callback", "<!doctype html><title>app</title><p>back at the app</p>")
		chromeSignIn(t, tab, idp, issuer, app.AuthURL(issuer), "nora")
		// With the keyboard: Tab reaches Allow first, Enter presses it.
		if _, err := chromedp.RunResponse(tab, chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter)); err != nil {
			t.Fatal(err)
		}
		mustToken(t, "code exchange")(app.Exchange(t, issuer, app.Code(t, redirectOf(t, client))))
	})
	t.Logf("TestAuthServerBrowser took %v", time.Since(start).Round(time.Millisecond))
}

// TestAuthServerBrowserClient: a real client and a real browser together.
// The TypeScript SDK v2, on 2026-07-28, with a Client ID Metadata Document
// naming a redirect URI the test serves, asks for an authorization;
// Chromium opens its URL, signs in at the IdP, and clicks Allow on
// Portcullis's consent page; the browser lands on the client's redirect
// URI, whose code, state and iss go back to the client, which then
// calls a tool.
func TestAuthServerBrowserClient(t *testing.T) {
	start := time.Now()
	browser := startChromium(t)
	docs := startCIMDHost(t)
	srv, idp := startASServerWithCIMD(t, "", docs, nil)
	catcher := startPageServer(t, "127.0.0.1")
	redirect := catcher.Set("/callback", "<!doctype html><title>app</title><p>back at the app</p>")
	const name = "E2E browser client"
	docURL := docs.Publish(t, "/clients/browser/client.json", name, redirect)
	tab := newTab(t, browser, false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pages := 0
	authorize := func(_ context.Context, authURL string) (*url.URL, error) {
		chromeSignIn(t, tab, idp, srv.BaseURL, authURL, "bea")
		if text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("main"))); err != nil || !strings.Contains(text, name) {
			t.Errorf("consent page %q, %v; want it to name %q", text, err, name)
		}
		pages++
		answerConsent(t, tab, "approve")
		return redirectOf(t, catcher), nil
	}
	run := runTSClients(t, ctx, authorize, "v2", srv.MCPURL(), redirect,
		[]string{"MCP_CLIENT_METADATA_URL=" + docURL, "MCP_PROTOCOL=" + modernProtocol},
		[]map[string]any{{"name": "PingME", "arguments": map[string]any{}}})
	t.Logf("%s: client_id %q, protocol %s, %d authorization(s)", run.SDK, run.ClientID, run.Protocol, run.Authorizations)
	if run.Authorizations != 1 || pages != 1 || run.ClientID != docURL || run.Protocol != modernProtocol {
		t.Errorf("%d authorization(s), %d consent page(s), client_id %q, protocol %q; want 1, 1, %s, %s", run.Authorizations, pages, run.ClientID, run.Protocol, docURL, modernProtocol)
	}
	if ev := run.Results["PingME"]; ev.Event != "result" || ev.IsError || !strings.Contains(ev.Text, "BISMILLAH") {
		t.Errorf("PingME: %+v", ev)
	}
	t.Logf("TestAuthServerBrowserClient took %v", time.Since(start).Round(time.Millisecond))
}
