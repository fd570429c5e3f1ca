package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
)

// connectTimeout bounds starting a connection: the process start or HTTP
// round trip, and the initialize handshake.
const connectTimeout = 30 * time.Second

// listTimeout bounds reading the upstream's lists after a connect or a
// list_changed notification (sync.go), and setting its log level.
const listTimeout = 30 * time.Second

// connector opens the sessions of one upstream: it dials the upstream
// (starts a stdio process, or reaches the http upstream with its
// credentials), opens an SDK client session on the connection and links
// the session with its senders (links.go). The supervisor opens the
// shared session with it, the pool each caller's.
type connector struct {
	opts   Options
	deps   Deps
	logger *slog.Logger
	impl   *sdk.Implementation // the client Portcullis names itself to upstreams
	client *sdk.Client
	// relay takes what the sessions' senders receive besides answers.
	relay *relay
	// links are the open sessions, with their senders.
	links *links
	// dialFn opens a connection; dial, except in tests.
	dialFn func() (sdk.Transport, func(), error)
	// dialEnvFn opens a connection to a new stdio process with env added
	// to its environment (pass_principal: env).
	dialEnvFn func(env []string) (sdk.Transport, func(), error)
	// now is the clock of the exchanged tokens' expiry.
	now func() time.Time
	// sessionOpts are the client session's options: nil (the latest
	// protocol version), except in tests.
	sessionOpts *sdk.ClientSessionOptions
}

func newConnector(o Options, deps Deps, logger *slog.Logger, r *relay) *connector {
	c := &connector{
		opts:   o,
		deps:   deps,
		logger: logger,
		impl:   &sdk.Implementation{Name: "portcullis", Version: deps.Version},
		relay:  r,
		links:  &links{inflight: &r.inflight},
		now:    time.Now,
	}
	c.client = newClient(c.impl, logger, r, c.links, o.declaresApps())
	c.dialFn = c.dial
	c.dialEnvFn = c.dialStdioEnv
	return c
}

// open opens a session on the connection t, connected and initialized
// within connectTimeout, and links it with its senders; the caller
// unlinks it (links.remove) when the session is over, and closes kt, the
// connection kept, to end it at once. On an error the connection is
// closed.
func (c *connector) open(ctx context.Context, t sdk.Transport) (sess *sdk.ClientSession, kt *keptTransport, err error) {
	kt = newKeptTransport(t)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	sess, err = c.client.Connect(cctx, kt, c.sessionOpts)
	cancel()
	if err != nil {
		kt.close()
		return nil, nil, err
	}
	c.links.add(sess, kt.notes, newHop(c.relay, c.logger, c.impl, t, sess))
	return sess, kt, nil
}

// dial opens one connection to the upstream: for stdio, a new process.
// stop, never nil, releases what dial started once the session is over
// (for stdio: kills what is left of the process group and waits for the
// stderr reader).
func (c *connector) dial() (sdk.Transport, func(), error) {
	switch c.opts.Transport {
	case TransportHTTP:
		return c.dialHTTP(nil, nil)
	default:
		return c.dialStdio()
	}
}

// dialHTTP opens a session to the http upstream. With src, a caller's
// exchanged token from src authenticates every request; with account, the
// token of the connected account of the caller it describes; with
// neither, the client-credentials token of oauth (of the same client, for
// a token_exchange upstream), if any.
func (c *connector) dialHTTP(src *tokenexchange.Source, account *sdkauth.TokenInfo) (sdk.Transport, func(), error) {
	client := *c.deps.HTTPClient
	base := transportOf(c.deps.HTTPClient)
	if account != nil {
		// The account's token replaces any Authorization of headers
		// (the listing session's credential).
		base = &accountTransport{accounts: c.deps.Accounts, upstream: c.opts.Name, ti: account, base: base}
	}
	rt, err := credentialTransport(c.opts.Name, c.opts.Headers, c.opts.OAuth, c.deps.HTTPClient, base, src)
	if err != nil {
		return nil, func() {}, err
	}
	client.Transport = &sseCounter{next: &drainTransport{next: rt}, notes: &notes{}}
	// MaxRetries bounds, among others, the reconnects with Last-Event-ID of
	// a call's stream the upstream closed mid-call after giving event ids
	// (SEP-1699), each after the stream's retry hint: the SDK client resumes
	// it and the call goes on (TestClosedCallStreamResumed).
	return &sdk.StreamableClientTransport{Endpoint: c.opts.URL, HTTPClient: &client, MaxRetries: 2}, func() {}, nil
}

// exchangeConfig is the request (or chain of requests) that gets a token
// for one caller of an upstream whose token is got for each caller. It
// reads the client secret files, so that a rotated secret is picked up by
// the next caller's session.
func (c *connector) exchangeConfig() (*tokenexchange.Config, error) {
	return exchangeConfig(c.opts.Name, c.opts.OAuth, c.deps.HTTPClient)
}

// environ is the stdio server's environment: PATH and HOME of Portcullis,
// then the env files, then env.
func (c *connector) environ() ([]string, error) {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, f := range c.opts.EnvFiles {
		kv, err := readEnvFile(f)
		if err != nil {
			return nil, fmt.Errorf("upstream: %s: %w", c.opts.Name, err)
		}
		env = append(env, kv...)
	}
	for _, e := range c.opts.Env {
		v, err := e.value()
		if err != nil {
			return nil, fmt.Errorf("upstream: %s: env %s: %w", c.opts.Name, e.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func (c *connector) dialStdio() (sdk.Transport, func(), error) { return c.dialStdioEnv(nil) }

// dialStdioEnv starts a stdio process with extra added to its environment
// after the configured variables.
func (c *connector) dialStdioEnv(extra []string) (sdk.Transport, func(), error) {
	env, err := c.environ()
	if err != nil {
		return nil, func() {}, err
	}
	env = append(env, extra...)
	cmd := exec.Command(c.opts.Command, c.opts.Args...)
	cmd.Dir = c.opts.Dir
	cmd.Env = env
	setProcAttr(cmd)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, func() {}, fmt.Errorf("upstream: %s: %w", c.opts.Name, err)
	}
	cmd.Stderr = w
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer r.Close()
		logLines(r, c.logger)
	}()
	t := &startedTransport{CommandTransport: sdk.CommandTransport{Command: cmd, TerminateDuration: c.opts.StopGrace}, stderrW: w}
	stop := func() {
		t.closeStderr()
		killGroup(cmd)
		wg.Wait()
	}
	return t, stop, nil
}

// setLogLevel asks an upstream of an era before 2026-07-28 that logs for
// every message: each is passed only to a caller that asked for its level.
// (On 2026-07-28 each call carries the level, see logLevel.)
func (c *connector) setLogLevel(ctx context.Context, sess *sdk.ClientSession) {
	r := sess.InitializeResult()
	//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging; upstreams of earlier revisions still log
	if r == nil || r.Capabilities == nil || r.Capabilities.Logging == nil || r.ProtocolVersion >= statelessEra {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging; upstreams of earlier revisions still log
	if err := sess.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		c.logger.Debug("upstream: setting the log level failed", "error", err)
	}
}
