package upstream

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/connect"
	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// serviceAccounts are the Accounts of a connections service, as the root
// package wires them: the caller's subject under one issuer.
type serviceAccounts struct{ svc *connect.Service }

const benchIssuer = "https://portcullis.example"

func (a serviceAccounts) Token(ctx context.Context, ti *sdkauth.TokenInfo, name string) (string, error) {
	return a.svc.Token(ctx, name, vault.Owner{Issuer: benchIssuer, Subject: ti.UserID})
}

func (a serviceAccounts) Rejected(ctx context.Context, ti *sdkauth.TokenInfo, name, token string) {
	a.svc.Rejected(ctx, name, vault.Owner{Issuer: benchIssuer, Subject: ti.UserID}, token)
}

type noSignIn struct{}

func (noSignIn) BrowserUser(*http.Request) (string, bool)                 { return "", false }
func (noSignIn) SignInBrowser(http.ResponseWriter, *http.Request, string) {}

// readCountingKV counts the vault's reads.
type readCountingKV struct {
	kv.KV
	reads atomic.Int64
}

func (k *readCountingKV) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "vault:") {
		k.reads.Add(1)
	}
	return k.KV.Get(ctx, key)
}

// processCPU is the CPU time the process has used, in ns (user and
// system, every thread): what a call costs whatever else the machine
// runs, which wall time per call is not.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkConnectedAccountCall measures a tools/call through the
// upstream code to a go-sdk server over loopback HTTP (in process), as
// one caller: "static-credential" to an upstream whose shared session
// sends a configured Authorization header, "connected-account" to one
// (oauth.grant authorization_code) that sends the caller's own connected
// account's token on the caller's own session, from a connections service
// over a vault in memory. The difference is what a connected account
// costs a call; vault-reads/op shows the vault is read once per token
// lifetime, not per call; cpu-ns/op is the process's CPU per call (both
// ends of the call, and the HTTP in between), which the goal compares.
func BenchmarkConnectedAccountCall(b *testing.B) {
	s := sdk.NewServer(&sdk.Implementation{Name: "bench"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	})
	srv := serveHTTP(b, s, nil, nil)

	store := &readCountingKV{KV: kv.NewMemory(nil)}
	ring, err := keyring.New([][]byte{bytes.Repeat([]byte{1}, keyring.KeySize)}, vault.Purpose)
	if err != nil {
		b.Fatal(err)
	}
	v, err := vault.New(store, ring, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	owner := vault.Owner{Issuer: benchIssuer, Subject: "alice"}
	if err := v.Put(context.Background(), "acct", owner, &vault.Entry{AccessToken: "alice-token", Expiry: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	svc, err := connect.New(connect.Options{BaseURL: "https://portcullis.example", Vault: v, KV: store, SignIn: noSignIn{}, OwnerIssuer: benchIssuer,
		Connections: []connect.Connection{{Name: "acct", Issuer: "https://saas.example", ClientID: "portcullis"}}})
	if err != nil {
		b.Fatal(err)
	}

	f := newFront(b)
	m, err := New([]Options{
		{Name: "static", Transport: TransportHTTP, URL: srv.URL, Required: true, Headers: []NamedValue{{Name: "Authorization", Value: "Bearer static"}}},
		{Name: "acct", Transport: TransportHTTP, URL: srv.URL, Required: true, Headers: []NamedValue{{Name: "Authorization", Value: "Bearer lister"}},
			OAuth: OAuthOptions{Grant: GrantAuthorizationCode, Issuer: "https://saas.example", ClientID: "portcullis"}},
	}, f.cat, Deps{Backoff: fastBackoff, Accounts: serviceAccounts{svc}})
	if err != nil {
		b.Fatal(err)
	}
	m.Start(context.Background())
	defer m.Close()
	waitFor(b, "ready", func() bool { return m.Ready(context.Background()) == nil })
	for _, u := range m.ups {
		b.Run(map[string]string{"static": "static-credential", "acct": "connected-account"}[u.opts.Name], func(b *testing.B) {
			call := u.callTool("echo")
			req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: u.opts.Name + "_echo", Arguments: []byte(`{}`)},
				Extra: &sdk.RequestExtra{TokenInfo: &sdkauth.TokenInfo{UserID: "alice"}}}
			before, cpu := store.reads.Load(), processCPU()
			b.ReportAllocs()
			for b.Loop() {
				res, err := call(context.Background(), req)
				if err != nil || res.IsError {
					b.Fatalf("%v %v", err, res)
				}
			}
			b.ReportMetric(float64(store.reads.Load()-before)/float64(b.N), "vault-reads/op")
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// nopTransport answers every request at once.
type nopTransport struct{}

func (nopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

// BenchmarkAccountTransport isolates what a connected account adds to
// each request to the upstream, which BenchmarkConnectedAccountCall's
// whole calls (about 1 ms of CPU each, most of it the two SDKs' own
// work) cannot resolve: the caller's token from the connections
// service's memory and the request cloned to carry it, against the
// configured headers alone.
func BenchmarkAccountTransport(b *testing.B) {
	store := kv.NewMemory(nil)
	ring, err := keyring.New([][]byte{bytes.Repeat([]byte{1}, keyring.KeySize)}, vault.Purpose)
	if err != nil {
		b.Fatal(err)
	}
	v, _ := vault.New(store, ring, time.Hour)
	if err := v.Put(context.Background(), "acct", vault.Owner{Issuer: benchIssuer, Subject: "alice"}, &vault.Entry{AccessToken: "alice-token", Expiry: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	svc, err := connect.New(connect.Options{BaseURL: "https://portcullis.example", Vault: v, KV: store, SignIn: noSignIn{}, OwnerIssuer: benchIssuer,
		Connections: []connect.Connection{{Name: "acct", Issuer: "https://saas.example", ClientID: "portcullis"}}})
	if err != nil {
		b.Fatal(err)
	}
	headers := http.Header{"X-Team": {"platform"}}
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"static-credential", &headerTransport{next: nopTransport{}, headers: http.Header{"Authorization": {"Bearer static"}, "X-Team": {"platform"}}}},
		{"connected-account", &headerTransport{next: &accountTransport{accounts: serviceAccounts{svc}, upstream: "acct",
			ti: &sdkauth.TokenInfo{UserID: "alice"}, base: nopTransport{}}, headers: headers}},
	} {
		b.Run(c.name, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodPost, "http://upstream.example/mcp", nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
