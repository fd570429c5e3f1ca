package upstream

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// countingDial returns a dialFn whose every connection is to a new server
// with a tool "who" that answers with the number of its dial, so a test
// tells the processes apart.
func countingDial(dials *atomic.Int32) func() (sdk.Transport, func(), error) {
	return func() (sdk.Transport, func(), error) {
		n := dials.Add(1)
		s := sdk.NewServer(&sdk.Implementation{Name: "counted"}, nil)
		sdk.AddTool(s, &sdk.Tool{Name: "who"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(rune('0' + n))}}}, nil, nil
		})
		return pipeConnect(s, nil)
	}
}

func callAs(t *testing.T, u *proxy, user string) *sdk.CallToolResult {
	t.Helper()
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "p_who", Arguments: []byte(`{"text":""}`)}}
	if user != "" {
		req.Extra = &sdk.RequestExtra{TokenInfo: &sdkauth.TokenInfo{UserID: user}}
	}
	res, err := u.callTool("who")(callCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPerPrincipal(t *testing.T) {
	f := newFront(t)
	var dials atomic.Int32
	m, err := New([]Options{{Name: "p", Transport: TransportStdio, Command: "unused", Isolation: IsolationPerPrincipal, MaxProcesses: 2, IdleTimeout: time.Hour, Required: true}},
		f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	u := m.ups[0]
	u.conn.dialFn = countingDial(&dials)
	m.Start(context.Background())
	waitFor(t, "the listing process", func() bool { return m.Ready(context.Background()) == nil })
	if !f.cat.HasTool("p_who") {
		t.Fatal("p_who is not in the catalog")
	}

	alice := text(callAs(t, u, "alice"))
	bob := text(callAs(t, u, "bob"))
	if alice == bob || alice == "1" || bob == "1" {
		t.Errorf("alice ran in process %s, bob in %s; want two processes of their own, not the listing one (1)", alice, bob)
	}
	if again := text(callAs(t, u, "alice")); again != alice {
		t.Errorf("alice's second call ran in process %s, want her own %s", again, alice)
	}
	if res := callAs(t, u, ""); !res.IsError || !strings.Contains(text(res), "serves only callers with a token") {
		t.Errorf("a call without a token = %q, want the per-caller refusal", text(res))
	}
	// A third caller replaces the longest idle process (alice's was used
	// last, so bob's goes).
	carol := text(callAs(t, u, "carol"))
	if carol == alice || carol == bob {
		t.Errorf("carol ran in process %s, want a new one", carol)
	}
	if u.pool.size() != 2 {
		t.Errorf("pool holds %d processes, want at most 2", u.pool.size())
	}
	within(t, "Manager.Close", func() { m.Close() })
	if u.pool.size() != 0 {
		t.Errorf("after Close the pool holds %d processes", u.pool.size())
	}
}

func TestPerPrincipalIdleAndBusy(t *testing.T) {
	f := newFront(t)
	var dials atomic.Int32
	m, err := New([]Options{{Name: "p", Transport: TransportStdio, Command: "unused", Isolation: IsolationPerPrincipal, MaxProcesses: 1, IdleTimeout: 20 * time.Millisecond}},
		f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	u := m.ups[0]
	u.conn.dialFn = countingDial(&dials)
	m.Start(context.Background())
	defer within(t, "Manager.Close", func() { m.Close() })
	callAs(t, u, "alice")
	waitFor(t, "the idle process to stop", func() bool { return u.pool.size() == 0 })

	// While alice's request holds the only process, bob is told to retry.
	_, release, err := u.pool.acquire(callCtx(t), "alice", nil, creds{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if res := callAs(t, u, "bob"); !res.IsError || !strings.Contains(text(res), "as many as allowed are busy") {
			t.Errorf("bob's call = %q, want the busy refusal", text(res))
		}
	}()
	wg.Wait()
	release()
}

func TestPassPrincipal(t *testing.T) {
	ti := &sdkauth.TokenInfo{UserID: "alice", Scopes: []string{"read", "write"}, Extra: map[string]any{"token": "raw-secret"}}
	principal := func(ti *sdkauth.TokenInfo) (Principal, bool) {
		return Principal{Issuer: "https://idp", Subject: ti.UserID, ClientID: "cli", Scopes: ti.Scopes}, true
	}
	tests := []struct {
		pass, isolation, want string
	}{
		{PassPrincipalNone, IsolationShared, `[] null`},
		{PassPrincipalMeta, IsolationShared, `[] {"client_id":"cli","issuer":"https://idp","scopes":["read","write"],"subject":"alice"}`},
		{PassPrincipalEnv, IsolationPerPrincipal, `[MCP_PRINCIPAL_CLIENT_ID=cli MCP_PRINCIPAL_ISSUER=https://idp MCP_PRINCIPAL_SCOPES=read write MCP_PRINCIPAL_SUBJECT=alice] null`},
	}
	for _, tt := range tests {
		t.Run(tt.pass, func(t *testing.T) {
			f := newFront(t)
			o := stdioOptions(t, "serve")
			o.PassPrincipal, o.Isolation = tt.pass, tt.isolation
			m, err := New([]Options{o}, f.cat, Deps{Backoff: fastBackoff, Principal: principal})
			if err != nil {
				t.Fatal(err)
			}
			m.Start(context.Background())
			t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
			waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
			req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "helper_whoami", Arguments: []byte(`{"text":""}`)}, Extra: &sdk.RequestExtra{TokenInfo: ti}}
			res, err := m.ups[0].callTool("whoami")(callCtx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(res); res.IsError || got != tt.want {
				t.Errorf("the server saw %q (error %v), want %q", got, res.IsError, tt.want)
			}
		})
	}
}

func TestPassPrincipalValidation(t *testing.T) {
	err := Validate([]Options{
		{Name: "a", Transport: TransportStdio, Command: "x", PassPrincipal: PassPrincipalEnv},
		{Name: "b", Transport: TransportStdio, Command: "x", PassPrincipal: "token"},
		{Name: "c", Transport: TransportHTTP, URL: "http://h/mcp", PassPrincipal: PassPrincipalMeta},
	})
	for _, want := range []string{
		"[0].pass_principal: env needs isolation per_principal",
		`[1].pass_principal: "token" is not one of none, env, meta`,
		"[2].transport: http takes no",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want an error containing %q", err, want)
		}
	}
}
