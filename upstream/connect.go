package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
)

// dial opens one connection to the upstream: for stdio, a new process.
// stop, never nil, releases what dial started once the session is over
// (for stdio: kills what is left of the process group and waits for the
// stderr reader).
func (u *upstream) dial() (sdk.Transport, func(), error) {
	switch u.opts.Transport {
	case TransportHTTP:
		return u.dialHTTP(nil)
	default:
		return u.dialStdio()
	}
}

// dialHTTP opens a session to the http upstream. With src, a caller's
// exchanged token from src authenticates every request; without, the
// client-credentials token of oauth (of the same client, for a
// token_exchange upstream), if any.
func (u *upstream) dialHTTP(src *tokenexchange.Source) (sdk.Transport, func(), error) {
	headers := make(http.Header)
	for _, h := range u.opts.Headers {
		v, err := h.value()
		if err != nil {
			return nil, func() {}, fmt.Errorf("upstream: %s: header %s: %w", u.opts.Name, h.Name, err)
		}
		headers.Set(h.Name, v)
	}
	client := *u.deps.HTTPClient
	var rt http.RoundTripper = &headerTransport{next: transportOf(u.deps.HTTPClient), headers: headers}
	if src != nil {
		rt = &tokenexchange.Transport{Source: src, Base: rt}
	} else if o := u.opts.OAuth; o.enabled() {
		secret, err := readValueFile(o.ClientSecretFile)
		if err != nil {
			return nil, func() {}, fmt.Errorf("upstream: %s: oauth.client_secret_file: %w", u.opts.Name, err)
		}
		cc := &clientcredentials.Config{ClientID: o.ClientID, ClientSecret: secret, TokenURL: o.TokenURL, Scopes: o.Scopes}
		if o.Resource != "" {
			cc.EndpointParams = url.Values{"resource": {o.Resource}}
		}
		if o.Audience != "" {
			if cc.EndpointParams == nil {
				cc.EndpointParams = url.Values{}
			}
			cc.EndpointParams.Set("audience", o.Audience)
		}
		// The token source caches the token and renews it when it
		// expires, for this connection; a reconnect reads the secret
		// file again, so a rotated secret is picked up.
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, u.deps.HTTPClient)
		rt = &oauth2.Transport{Source: cc.TokenSource(ctx), Base: rt}
	}
	client.Transport = &sseCounter{next: &drainTransport{next: rt}, notes: &notes{}}
	// MaxRetries bounds, among others, the reconnects with Last-Event-ID of
	// a call's stream the upstream closed mid-call after giving event ids
	// (SEP-1699), each after the stream's retry hint: the SDK client resumes
	// it and the call goes on (TestClosedCallStreamResumed).
	return &sdk.StreamableClientTransport{Endpoint: u.opts.URL, HTTPClient: &client, MaxRetries: 2}, func() {}, nil
}

// exchangeConfig is the token exchange of a token_exchange upstream. It
// reads the client secret file, so that a rotated secret is picked up by
// the next caller's session.
func (u *upstream) exchangeConfig() (*tokenexchange.Config, error) {
	o := u.opts.OAuth
	secret, err := readValueFile(o.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: oauth.client_secret_file: %w", u.opts.Name, err)
	}
	return &tokenexchange.Config{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: secret,
		Audience: o.Audience, Resource: o.Resource, Scopes: o.Scopes, RequestedTokenType: o.RequestedTokenType,
		HTTPClient: u.deps.HTTPClient}, nil
}

// environ is the stdio server's environment: PATH and HOME of Portcullis,
// then the env files, then env.
func (u *upstream) environ() ([]string, error) {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, f := range u.opts.EnvFiles {
		kv, err := readEnvFile(f)
		if err != nil {
			return nil, fmt.Errorf("upstream: %s: %w", u.opts.Name, err)
		}
		env = append(env, kv...)
	}
	for _, e := range u.opts.Env {
		v, err := e.value()
		if err != nil {
			return nil, fmt.Errorf("upstream: %s: env %s: %w", u.opts.Name, e.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func (u *upstream) dialStdio() (sdk.Transport, func(), error) { return u.dialStdioEnv(nil) }

// dialStdioEnv starts a stdio process with extra added to its environment
// after the configured variables.
func (u *upstream) dialStdioEnv(extra []string) (sdk.Transport, func(), error) {
	env, err := u.environ()
	if err != nil {
		return nil, func() {}, err
	}
	env = append(env, extra...)
	cmd := exec.Command(u.opts.Command, u.opts.Args...)
	cmd.Dir = u.opts.Dir
	cmd.Env = env
	setProcAttr(cmd)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, func() {}, fmt.Errorf("upstream: %s: %w", u.opts.Name, err)
	}
	cmd.Stderr = w
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer r.Close()
		logLines(r, u.logger)
	}()
	t := &startedTransport{CommandTransport: sdk.CommandTransport{Command: cmd, TerminateDuration: u.opts.StopGrace}, stderrW: w}
	stop := func() {
		t.closeStderr()
		killGroup(cmd)
		wg.Wait()
	}
	return t, stop, nil
}

// connectTimeout bounds starting a connection: the process start or HTTP
// round trip, and the initialize handshake.
const connectTimeout = 30 * time.Second

// listTimeout bounds reading the upstream's lists after a connect or a
// list_changed notification.
const listTimeout = 30 * time.Second

// setLogLevel asks an upstream of an era before 2026-07-28 that logs for
// every message: each is passed only to a caller that asked for its level.
// (On 2026-07-28 each call carries the level, see logLevel.)
func (u *upstream) setLogLevel(ctx context.Context, sess *sdk.ClientSession) {
	r := sess.InitializeResult()
	//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging; upstreams of earlier revisions still log
	if r == nil || r.Capabilities == nil || r.Capabilities.Logging == nil || r.ProtocolVersion >= statelessEra {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging; upstreams of earlier revisions still log
	if err := sess.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		u.logger.Debug("upstream: setting the log level failed", "error", err)
	}
}
