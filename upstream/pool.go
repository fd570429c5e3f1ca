package upstream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
)

// pool runs one stdio process or HTTP session per principal for a
// per_principal upstream: started on the principal's first request,
// stopped after IdleTimeout without requests, at most MaxProcesses at once.
// The HTTP session of an upstream whose token is got for each caller owns
// the principal's token, which goes with it.
type pool struct {
	// conn opens the sessions.
	conn *connector
	ctx  context.Context // ends when the manager closes

	mu    sync.Mutex
	conns map[string]*principalConn
	wg    sync.WaitGroup
}

// principalConn is one principal's process. ready is closed once sess
// (or err) is set.
type principalConn struct {
	ready    chan struct{}
	sess     *sdk.ClientSession
	err      error
	lastUsed time.Time
	inflight int
	stopOnce sync.Once
	stop     func()
	// src gets the principal's token (token_exchange, jwt_bearer,
	// id_jag).
	src *tokenexchange.Source
	// account describes the principal whose connected account the
	// session sends (authorization_code only).
	account *sdkauth.TokenInfo
	// token is the connected account's token a stdio process was given
	// (authorization_code); tokenFile the file holding it (token_file_env).
	token, tokenFile string
	// retired: the process was given a token since refreshed, and stops
	// once its calls in flight are done; started: its stop is set.
	retired, started bool
}

// creds are what a caller's session is opened with: the subject token of
// a grant that gets a token for each caller, or the caller's connected
// account (its token, for a stdio process).
type creds struct {
	subject tokenexchange.Subject
	account *sdkauth.TokenInfo
	token   string
}

func newPool(ctx context.Context, conn *connector) *pool {
	p := &pool{conn: conn, ctx: ctx, conns: map[string]*principalConn{}}
	p.wg.Add(1)
	go p.reap()
	return p
}

// acquire returns the session of the principal's process, starting it if
// needed; release must be called when the request is done. For a
// upstream whose token is got for each caller (token_exchange, jwt_bearer,
// id_jag), subject is the caller's token: the session's token is made sure
// of before acquire returns, so that a failed exchange sends the upstream
// nothing.
func (p *pool) acquire(ctx context.Context, key string, env []string, cr creds) (sess *sdk.ClientSession, release func(), err error) {
	if key == "" {
		return nil, nil, errNoPrincipal
	}
	subject := cr.subject
	exchange := p.conn.opts.OAuth.exchange()
	if exchange && subject.Token == "" {
		return nil, nil, errNoToken
	}
	stdioAccount := p.conn.opts.Transport == TransportStdio && p.conn.opts.OAuth.account()
	p.mu.Lock()
	c, ok := p.conns[key]
	if ok && stdioAccount && c.token != cr.token {
		if err := p.renewToken(key, c, cr.token); err != nil {
			p.mu.Unlock()
			return nil, nil, err
		}
		c, ok = p.conns[key]
	}
	if !ok {
		if len(p.conns) >= p.conn.opts.MaxProcesses && !p.evictIdleLocked() {
			p.mu.Unlock()
			return nil, nil, errPoolFull
		}
		c = &principalConn{ready: make(chan struct{}), stop: func() {}}
		if exchange {
			cfg, err := p.conn.exchangeConfig()
			if err != nil {
				p.mu.Unlock()
				return nil, nil, err
			}
			c.src = tokenexchange.NewSource(cfg, p.conn.now)
			c.src.SetSubject(subject)
		}
		if p.conn.opts.OAuth.account() {
			c.account = cr.account
		}
		if stdioAccount {
			tenv, err := c.giveToken(p.conn.opts.OAuth, cr.token)
			if err != nil {
				p.mu.Unlock()
				return nil, nil, err
			}
			env = append(env, tenv)
		}
		p.conns[key] = c
		p.wg.Add(1)
		go p.start(key, c, env)
	}
	c.inflight++
	c.lastUsed = time.Now()
	p.mu.Unlock()
	if c.src != nil {
		// The principal's latest token is exchanged next.
		c.src.SetSubject(subject)
	}
	release = func() {
		p.mu.Lock()
		c.inflight--
		c.lastUsed = time.Now()
		done := c.retired && c.started && c.inflight == 0
		p.mu.Unlock()
		if done {
			go c.stopOnce.Do(c.stop)
		}
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if c.err != nil {
		release()
		return nil, nil, c.err
	}
	if c.src != nil {
		if _, err := c.src.Token(ctx); err != nil {
			release()
			return nil, nil, &exchangeError{err}
		}
	}
	return c.sess, release, nil
}

// start starts the principal's process and watches it: when it exits, it
// leaves the pool, and the principal's next request starts a new one.
func (p *pool) start(key string, c *principalConn, env []string) {
	defer p.wg.Done()
	if c.tokenFile != "" {
		defer os.RemoveAll(filepath.Dir(c.tokenFile))
	}
	dial := p.conn.dialFn
	if len(env) > 0 {
		dial = func() (sdk.Transport, func(), error) { return p.conn.dialEnvFn(env) }
	}
	var xerr error
	if c.account != nil && p.conn.opts.Transport == TransportHTTP {
		dial = func() (sdk.Transport, func(), error) { return p.conn.dialHTTP(nil, c.account) }
	}
	if c.src != nil {
		dial = func() (sdk.Transport, func(), error) { return p.conn.dialHTTP(c.src, nil) }
		// The session starts with an exchanged token, or not at all.
		xctx, cancel := context.WithTimeout(p.ctx, connectTimeout)
		if _, err := c.src.Token(xctx); err != nil {
			xerr = &exchangeError{err}
			dial = func() (sdk.Transport, func(), error) { return nil, func() {}, xerr }
		}
		cancel()
	}
	t, stop, err := dial()
	var sess *sdk.ClientSession
	var kt *keptTransport
	if err == nil {
		sess, kt, err = p.conn.open(p.ctx, t)
	}
	p.mu.Lock()
	c.sess = sess
	p.mu.Unlock()
	if err != nil {
		stop()
		c.err = fmt.Errorf("upstream: %s: starting the caller's process: %w", p.conn.opts.Name, err)
		if xerr != nil {
			c.err = xerr
		}
		p.remove(key, c)
		close(c.ready)
		return
	}
	defer p.conn.links.remove(sess)
	p.mu.Lock()
	c.stop = func() {
		// Calls still in flight end with a transport error rather than
		// hold the process (see connectAndServe).
		kt.close()
		_ = sess.Close()
		stop()
	}
	c.started = true
	if c.retired && c.inflight == 0 {
		go c.stopOnce.Do(c.stop)
	}
	p.mu.Unlock()
	p.conn.setLogLevel(p.ctx, sess)
	close(c.ready)
	p.conn.logger.Info("upstream: started a process for a caller", "processes", p.size())
	done := make(chan struct{})
	go func() { _ = sess.Wait(); close(done) }()
	select {
	case <-done:
	case <-p.ctx.Done():
	}
	p.remove(key, c)
	c.stopOnce.Do(c.stop)
	<-done
}

// renewToken gives the stdio process of key, which was given another
// token, tok: rewritten in its file (token_file_env), or, for a token in
// its environment, the process is retired (it stops once its calls in
// flight are done) and the caller's next one starts with tok. p.mu is
// held.
func (p *pool) renewToken(key string, c *principalConn, tok string) error {
	if c.tokenFile != "" {
		if err := os.WriteFile(c.tokenFile, []byte(tok), 0o600); err != nil {
			return fmt.Errorf("upstream: %s: writing the caller's token file: %w", p.conn.opts.Name, err)
		}
		c.token = tok
		return nil
	}
	delete(p.conns, key)
	c.retired = true
	if c.started && c.inflight == 0 {
		go c.stopOnce.Do(c.stop)
	}
	return nil
}

// giveToken is the environment variable that gives a stdio process tok,
// as o says: the token itself (token_env), or the path of a file of the
// process's own holding it (token_file_env), which is removed when the
// process stops.
func (c *principalConn) giveToken(o OAuthOptions, tok string) (string, error) {
	c.token = tok
	if o.TokenEnv != "" {
		return o.TokenEnv + "=" + tok, nil
	}
	dir, err := os.MkdirTemp("", "portcullis-token-")
	if err != nil {
		return "", fmt.Errorf("upstream: a directory for the caller's token: %w", err)
	}
	c.tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(c.tokenFile, []byte(tok), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("upstream: the caller's token file: %w", err)
	}
	return o.TokenFileEnv + "=" + c.tokenFile, nil
}

func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *pool) remove(key string, c *principalConn) {
	p.mu.Lock()
	if p.conns[key] == c {
		delete(p.conns, key)
	}
	p.mu.Unlock()
}

// evictIdleLocked stops the least recently used idle process, if any.
// p.mu is held.
func (p *pool) evictIdleLocked() bool {
	var oldestKey string
	var oldest *principalConn
	for k, c := range p.conns {
		if c.inflight == 0 && c.sess != nil && (oldest == nil || c.lastUsed.Before(oldest.lastUsed)) {
			oldestKey, oldest = k, c
		}
	}
	if oldest == nil {
		return false
	}
	delete(p.conns, oldestKey)
	go oldest.stopOnce.Do(oldest.stop)
	return true
}

// reap stops processes idle for IdleTimeout, until the manager closes.
func (p *pool) reap() {
	defer p.wg.Done()
	tick := time.NewTicker(max(p.conn.opts.IdleTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		for k, c := range p.conns {
			if c.inflight == 0 && c.sess != nil && time.Since(c.lastUsed) >= p.conn.opts.IdleTimeout {
				delete(p.conns, k)
				go c.stopOnce.Do(c.stop)
			}
		}
		p.mu.Unlock()
	}
}

// wait returns when every process of the pool has stopped; the manager's
// context must be done.
func (p *pool) wait() { p.wg.Wait() }
