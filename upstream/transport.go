package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// maxStderrLine bounds one logged line of a stdio server's stderr.
const maxStderrLine = 4 << 10

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

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// headerTransport adds the upstream's configured headers to every request.
type headerTransport struct {
	next    http.RoundTripper
	headers http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
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

// startedTransport closes Portcullis's copy of the stderr pipe's write end
// once the process has it, so that the reader sees EOF when the process
// (and every child it left behind) is gone.
type startedTransport struct {
	sdk.CommandTransport
	stderrW *os.File
	once    sync.Once
}

func (t *startedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.CommandTransport.Connect(ctx)
	t.closeStderr()
	return conn, err
}

func (t *startedTransport) closeStderr() { t.once.Do(func() { t.stderrW.Close() }) }

// logLines logs each line of r at Info with the upstream's name (the
// logger carries it). Lines longer than maxStderrLine are cut.
func logLines(r io.Reader, logger *slog.Logger) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 {
			logger.Info("upstream stderr", "line", string(line))
		}
		for isPrefix && err == nil { // skip the rest of a long line
			_, isPrefix, err = br.ReadLine()
		}
		if err != nil {
			return
		}
	}
}
