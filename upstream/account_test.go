package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeAccounts are connected accounts by user: a user with no token is
// asked to connect at /connect?user=…
type fakeAccounts struct {
	mu       sync.Mutex
	tokens   map[string]string
	rejected []string
	calls    int
}

func (a *fakeAccounts) Token(_ context.Context, ti *sdkauth.TokenInfo, upstream string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if tok, ok := a.tokens[ti.UserID]; ok {
		return tok, nil
	}
	return "", &ConnectRequired{Upstream: upstream, URL: "https://portcullis.example/connect?user=" + ti.UserID, ElicitationID: "elicit-" + ti.UserID}
}

func (a *fakeAccounts) Rejected(_ context.Context, ti *sdkauth.TokenInfo, _, token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rejected = append(a.rejected, ti.UserID+":"+token)
	delete(a.tokens, ti.UserID)
}

func (a *fakeAccounts) set(user, tok string) { a.mu.Lock(); a.tokens[user] = tok; a.mu.Unlock() }

// startAccountUpstream starts an authorization_code upstream whose
// listing session sends the bot's Authorization header.
func startAccountUpstream(t *testing.T, accounts *fakeAccounts, handler http.Handler) (*Manager, *proxy) {
	t.Helper()
	upSrv := httptest.NewServer(handler)
	t.Cleanup(upSrv.Close)
	f := newFront(t)
	m, err := New([]Options{{Name: "x", Transport: TransportHTTP, URL: upSrv.URL, Required: true, MaxProcesses: 4,
		Headers: []NamedValue{{Name: "Authorization", Value: "Bearer bot-token"}},
		OAuth:   OAuthOptions{Grant: GrantAuthorizationCode, Issuer: "https://saas.example", ClientID: "portcullis"}}},
		f.cat, Deps{Backoff: fastBackoff, Accounts: accounts})
	if err != nil {
		t.Fatal(err)
	}
	u := m.ups[0]
	if u.opts.Isolation != IsolationPerPrincipal {
		t.Fatalf("isolation defaulted to %q", u.opts.Isolation)
	}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	waitFor(t, "the listing session", func() bool { return m.Ready(context.Background()) == nil })
	return m, u
}

func TestConnectedAccount(t *testing.T) {
	accounts := &fakeAccounts{tokens: map[string]string{"alice": "acct-alice"}}
	up := &authUpstream{}
	_, u := startAccountUpstream(t, accounts, up.handler())

	if got := text(callWithToken(t, u, "alice", "RAW-alice")); got != "Bearer acct-alice" {
		t.Fatalf("alice's call saw %q, want her connected account's token", got)
	}
	// A caller without a connected account, on a client without URL
	// elicitation, gets a tool error naming the page; nothing reaches the
	// upstream.
	before := len(up.requests())
	res := callWithToken(t, u, "bob", "RAW-bob")
	if !res.IsError || !strings.Contains(text(res), "https://portcullis.example/connect?user=bob") {
		t.Fatalf("bob's call: %+v", text(res))
	}
	if n := len(up.requests()) - before; n != 0 {
		t.Fatalf("%d requests reached the upstream for a caller without an account", n)
	}
	accounts.set("bob", "acct-bob")
	if got := text(callWithToken(t, u, "bob", "RAW-bob")); got != "Bearer acct-bob" {
		t.Fatalf("bob's call after connecting saw %q", got)
	}
	// The listing session sends the bot's credential; callers' sessions
	// send only their own account's, never a caller's own token.
	var bot int
	for _, a := range up.requests() {
		switch {
		case a == "Bearer bot-token":
			bot++
		case a == "Bearer acct-alice", a == "Bearer acct-bob":
		default:
			t.Errorf("the upstream received Authorization %q", a)
		}
	}
	if bot == 0 {
		t.Error("the listing session did not send the bot's credential")
	}
}

// TestConnectedAccountRejected: a 401 from the upstream is told to the
// accounts, which refresh or drop the connection.
func TestConnectedAccountRejected(t *testing.T) {
	accounts := &fakeAccounts{tokens: map[string]string{"alice": "acct-alice"}}
	up := &authUpstream{}
	h := up.handler()
	_, u := startAccountUpstream(t, accounts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer revoked" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	if got := text(callWithToken(t, u, "alice", "")); got != "Bearer acct-alice" {
		t.Fatalf("first call saw %q", got)
	}
	accounts.set("alice", "revoked")
	if res := callWithToken(t, u, "alice", ""); !res.IsError {
		t.Fatalf("a call the upstream refused succeeded: %q", text(res))
	}
	accounts.mu.Lock()
	rejected := accounts.rejected
	accounts.mu.Unlock()
	if len(rejected) == 0 || rejected[0] != "alice:revoked" {
		t.Fatalf("rejected = %v, want alice's revoked token", rejected)
	}
	if res := callWithToken(t, u, "alice", ""); !res.IsError || !strings.Contains(text(res), "connect?user=alice") {
		t.Fatalf("the call after the rejection: %q, want to be asked to connect", text(res))
	}
}

// elicitingFront is a server whose tool "who" calls the upstream's as
// bob, and a client of it that declared URL elicitation, on protocol
// version, whose elicitation handler is elicit.
func elicitingFront(t *testing.T, u *proxy, version string, elicit func(*sdk.ElicitRequest) string, completed chan<- string) *sdk.ClientSession {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "front"}, nil)
	srv.AddTool(&sdk.Tool{Name: "who", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		req.Extra = &sdk.RequestExtra{TokenInfo: &sdkauth.TokenInfo{UserID: "bob"}}
		return u.callTool("who")(ctx, req)
	})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(callCtx(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := sdk.NewClient(&sdk.Implementation{Name: "claude"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: elicit(r)}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, r *sdk.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	})
	cs, err := client.Connect(callCtx(t), ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestConnectedAccountElicitation: a 2025-11-25 client that declared URL
// elicitation gets the URL elicitation error, then the completion notice
// when the account is connected, and its retried call goes through.
func TestConnectedAccountElicitation(t *testing.T) {
	accounts := &fakeAccounts{tokens: map[string]string{}}
	up := &authUpstream{}
	m, u := startAccountUpstream(t, accounts, up.handler())
	completed := make(chan string, 1)
	cs := elicitingFront(t, u, "2025-11-25", func(*sdk.ElicitRequest) string { return "accept" }, completed)

	_, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "who", Arguments: map[string]any{"text": ""}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != sdk.CodeURLElicitationRequired {
		t.Fatalf("the call without an account: %v, want the URL elicitation error", err)
	}
	var data struct{ Elicitations []sdk.ElicitParams }
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("error data %s: %v", rpcErr.Data, err)
	}
	if e := data.Elicitations[0]; e.Mode != "url" || e.URL != "https://portcullis.example/connect?user=bob" || e.ElicitationID != "elicit-bob" {
		t.Fatalf("elicitation %+v", e)
	}
	accounts.set("bob", "acct-bob")
	if !m.ElicitationComplete(callCtx(t), "elicit-bob") {
		t.Fatal("ElicitationComplete found no session")
	}
	select {
	case id := <-completed:
		if id != "elicit-bob" {
			t.Fatalf("completion for %q", id)
		}
	case <-callCtx(t).Done():
		t.Fatal("no completion notice")
	}
	if m.ElicitationComplete(callCtx(t), "elicit-bob") {
		t.Fatal("a completion was delivered twice")
	}
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "who", Arguments: map[string]any{"text": ""}})
	if err != nil || text(res) != "Bearer acct-bob" {
		t.Fatalf("the retried call: %v %v", res, err)
	}
}

// TestConnectedAccountInputRequired: a 2026-07-28 client gets the request
// to connect as an input-required result (a URL elicitation), and its
// call, retried once the user connected, goes through, the answer never
// sent upstream; a user who declines gets the tool error naming the page.
func TestConnectedAccountInputRequired(t *testing.T) {
	accounts := &fakeAccounts{tokens: map[string]string{}}
	up := &authUpstream{}
	_, u := startAccountUpstream(t, accounts, up.handler())
	var asked []sdk.ElicitParams
	action := "accept"
	cs := elicitingFront(t, u, "2026-07-28", func(r *sdk.ElicitRequest) string {
		asked = append(asked, *r.Params)
		if action == "accept" {
			accounts.set("bob", "acct-bob") // the user opened the page and connected
		}
		return action
	}, make(chan string, 1))

	action = "decline"
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "who", Arguments: map[string]any{"text": ""}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "connect?user=bob") {
		t.Fatalf("declined: %v %v", res, err)
	}
	action = "accept"
	res, err = cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "who", Arguments: map[string]any{"text": ""}})
	if err != nil || text(res) != "Bearer acct-bob" {
		t.Fatalf("the call once connected: %v %v", res, err)
	}
	if len(asked) != 2 || asked[0].Mode != "url" || asked[0].URL != "https://portcullis.example/connect?user=bob" || asked[0].ElicitationID != "" {
		t.Fatalf("asked %+v", asked)
	}
}

// envDial is a dialEnvFn whose every process is an in-memory server with
// a tool "who" that answers with the token its environment gives it: the
// variable's value, or with file, the contents of the file it names, read
// at each call. dials counts the processes.
func envDial(name string, file bool, dials *atomic.Int32) func(env []string) (sdk.Transport, func(), error) {
	return func(env []string) (sdk.Transport, func(), error) {
		dials.Add(1)
		var val string
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				val = v
			}
		}
		s := sdk.NewServer(&sdk.Implementation{Name: "per-user"}, nil)
		sdk.AddTool(s, &sdk.Tool{Name: "who"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
			tok := val
			if file {
				b, err := os.ReadFile(val)
				if err != nil {
					return nil, nil, err
				}
				tok = string(b)
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tok}}}, nil, nil
		})
		return pipeConnect(s, nil)
	}
}

// TestStdioConnectedAccount: a per_principal stdio server gets its user's
// connected account's token in the environment variable or file the
// configuration names; a refreshed token reaches it (a new process, or
// the file rewritten); a user without one is asked to connect.
func TestStdioConnectedAccount(t *testing.T) {
	for _, file := range []bool{false, true} {
		t.Run(map[bool]string{false: "token_env", true: "token_file_env"}[file], func(t *testing.T) {
			accounts := &fakeAccounts{tokens: map[string]string{"alice": "alice-1", "bob": "bob-1"}}
			o := OAuthOptions{Grant: GrantAuthorizationCode, Issuer: "https://github.example", ClientID: "portcullis", TokenEnv: "GITHUB_TOKEN"}
			if file {
				o.TokenEnv, o.TokenFileEnv = "", "GITHUB_TOKEN_FILE"
			}
			list := []Options{{Name: "p", Transport: TransportStdio, Command: "unused", MaxProcesses: 4, IdleTimeout: time.Hour, Required: true, OAuth: o}}
			if err := Validate(list); err != nil {
				t.Fatal(err)
			}
			f := newFront(t)
			m, err := New(list, f.cat, Deps{Backoff: fastBackoff, Accounts: accounts})
			if err != nil {
				t.Fatal(err)
			}
			u := m.ups[0]
			if u.opts.Isolation != IsolationPerPrincipal {
				t.Fatalf("isolation defaulted to %q", u.opts.Isolation)
			}
			var dials atomic.Int32
			name := map[bool]string{false: "GITHUB_TOKEN", true: "GITHUB_TOKEN_FILE"}[file]
			listing := envDial(name, file, new(atomic.Int32))
			u.conn.dialFn = func() (sdk.Transport, func(), error) { return listing(nil) } // the listing process
			u.conn.dialEnvFn = envDial(name, file, &dials)
			m.Start(context.Background())
			t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
			waitFor(t, "the listing process", func() bool { return m.Ready(context.Background()) == nil })

			for user, want := range map[string]string{"alice": "alice-1", "bob": "bob-1"} {
				if got := text(callAs(t, u, user)); got != want {
					t.Fatalf("%s's process has %q, want %q", user, got, want)
				}
			}
			accounts.set("alice", "alice-2") // refreshed
			if got := text(callAs(t, u, "alice")); got != "alice-2" {
				t.Fatalf("after the refresh alice's process has %q", got)
			}
			wantDials := map[bool]int32{false: 3, true: 2}[file] // a new process for the new token in the environment
			if n := dials.Load(); n != wantDials {
				t.Fatalf("%d processes started, want %d", n, wantDials)
			}
			if res := callAs(t, u, "carol"); !res.IsError || !strings.Contains(text(res), "connect?user=carol") {
				t.Fatalf("carol without an account: %q", text(res))
			}
			if file {
				// The token files are the processes' own.
				p := u.pool
				p.mu.Lock()
				var files []string
				for _, c := range p.conns {
					files = append(files, c.tokenFile)
				}
				p.mu.Unlock()
				for _, f := range files {
					st, err := os.Stat(f)
					if err != nil || st.Mode().Perm() != 0o600 {
						t.Fatalf("token file %s: %v %v", f, st, err)
					}
				}
			}
		})
	}
}

func TestStdioConnectedAccountOptions(t *testing.T) {
	base := func(edit func(*Options)) []Options {
		o := Options{Name: "p", Transport: TransportStdio, Command: "x",
			OAuth: OAuthOptions{Grant: GrantAuthorizationCode, Issuer: "https://github.example", ClientID: "portcullis", TokenEnv: "GITHUB_TOKEN"}}
		edit(&o)
		o.Defaults()
		return []Options{o}
	}
	for _, c := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no token variable", func(o *Options) { o.OAuth.TokenEnv = "" }, "oauth.token_env: required on a stdio upstream"},
		{"both", func(o *Options) { o.OAuth.TokenFileEnv = "F" }, "set token_env or token_file_env, not both"},
		{"bad name", func(o *Options) { o.OAuth.TokenEnv = "1BAD=" }, `"1BAD=" is not a valid environment variable name`},
		{"shared", func(o *Options) { o.Isolation = IsolationShared }, "needs per_principal"},
		{"no issuer", func(o *Options) { o.OAuth.Issuer = "" }, "oauth.issuer: required on a stdio upstream"},
		{"another grant", func(o *Options) { o.OAuth.Grant = GrantTokenExchange; o.OAuth.TokenURL = "https://as.example/token" }, "a stdio upstream takes only authorization_code"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(base(c.edit))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want %q", err, c.want)
			}
		})
	}
	http := []Options{{Name: "h", Transport: TransportHTTP, URL: "https://h.example/mcp",
		OAuth: OAuthOptions{Grant: GrantAuthorizationCode, Issuer: "https://as.example", ClientID: "c", TokenEnv: "T"}}}
	http[0].Defaults()
	if err := Validate(http); err == nil || !strings.Contains(err.Error(), "apply only to stdio upstreams") {
		t.Fatalf("token_env on http: %v", err)
	}
}

// TestConnectedAccountRevoked: a call the upstream refuses (HTTP 401)
// because the account was revoked at the upstream's authorization server
// (Accounts then has no token for the caller) answers with the connect
// page itself, not as a broken connection.
func TestConnectedAccountRevoked(t *testing.T) {
	accounts := &fakeAccounts{tokens: map[string]string{"alice": "acct-alice"}}
	up := &authUpstream{}
	h := up.handler()
	_, u := startAccountUpstream(t, accounts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer revoked" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	if got := text(callWithToken(t, u, "alice", "")); got != "Bearer acct-alice" {
		t.Fatalf("first call saw %q", got)
	}
	accounts.set("alice", "revoked")
	if res := callWithToken(t, u, "alice", ""); !res.IsError || !strings.Contains(text(res), "connect?user=alice") {
		t.Fatalf("the call the upstream refused: %q, want to be asked to connect", text(res))
	}
	// Connected again, alice is not asked to connect: a call on the
	// session the 401 broke (until the pool drops it) reports it as it
	// is, and the next session answers.
	accounts.set("alice", "acct-alice")
	waitFor(t, "a call on a new session", func() bool {
		res := callWithToken(t, u, "alice", "")
		if strings.Contains(text(res), "connect?user=alice") {
			t.Fatalf("a connected caller was asked to connect: %q", text(res))
		}
		return text(res) == "Bearer acct-alice"
	})
}

// TestConnectedAccountForward: a caller's resources/read or prompts/get
// of an upstream it has no account at is answered with the page to
// connect one, and nothing is sent.
func TestConnectedAccountForward(t *testing.T) {
	accounts := &fakeAccounts{tokens: map[string]string{}}
	_, u := startAccountUpstream(t, accounts, (&authUpstream{}).handler())
	extra := &sdk.RequestExtra{TokenInfo: &sdkauth.TokenInfo{UserID: "dora"}}
	_, err := u.forward(callCtx(t), "resources/read", "ui://x", extra, nil, "", nil,
		func(context.Context, *sdk.ClientSession, sender, *callTarget, sdk.InputResponseMap, string) (sdk.Result, error) {
			t.Fatal("a request was sent for a caller without an account")
			return nil, nil
		})
	if err == nil || !strings.Contains(err.Error(), "connect?user=dora") {
		t.Fatalf("forward: %v, want the page to connect", err)
	}
}
