package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// connectTimeout bounds starting a connection: the process start or HTTP
// round trip, and the initialize handshake.
const connectTimeout = 30 * time.Second

// run keeps the upstream connected until ctx is done, reconnecting with
// backoff after each failure.
func (u *upstream) run(ctx context.Context) {
	if u.deps.Hooks.Up != nil {
		u.deps.Hooks.Up(u.opts.Name, false)
	}
	attempt := 0
	for {
		start := time.Now()
		err := u.connectAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= healthyRun {
			attempt = 0
		}
		d := u.deps.Backoff(attempt)
		attempt++
		u.logger.Warn("upstream: disconnected; reconnecting", "error", err, "retry_in", d.String(), "attempt", attempt)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if u.deps.Hooks.Restarted != nil {
			u.deps.Hooks.Restarted(u.opts.Name)
		}
	}
}

// connectAndServe connects, puts the upstream's lists in the catalog and
// serves until the session ends or ctx is done.
func (u *upstream) connectAndServe(ctx context.Context) error {
	t, stop, err := u.dialFn()
	defer stop()
	if err != nil {
		return err
	}
	kt := newKeptTransport(t)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	sess, err := u.client.Connect(cctx, kt, u.sessionOpts)
	cancel()
	if err != nil {
		kt.close()
		return fmt.Errorf("upstream: %s: connecting: %w", u.opts.Name, err)
	}
	u.notes.Store(sess, kt.notes)
	defer u.notes.Delete(sess)
	if h := newHop(u, t, sess); h != nil {
		u.hops.Store(sess, h)
		defer u.hops.Delete(sess)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	defer func() {
		u.setSession(nil, false)
		// The session's Close waits for the calls in flight, which an
		// upstream that stopped answering never ends: the connection is
		// closed first, so that they end now with a transport error.
		kt.close()
		_ = sess.Close()
		<-done
	}()
	// Drop a list_changed signal from the previous session: the lists are
	// read now anyway.
	select {
	case <-u.changes:
	default:
	}
	select {
	case <-u.broken:
	default:
	}
	u.setSession(sess, false)
	u.logger.Info("upstream: connected", "protocol_version", protocolVersion(sess))
	// The log level is set before the tools are in the catalog: a call
	// that arrives as soon as they are would otherwise run on a session
	// whose server drops its log messages.
	u.setLogLevel(ctx, sess)
	// A clash keeps the session, not ready, until a list_changed fixes it:
	// reconnecting would not change the names.
	if err := u.sync(ctx, sess); err == nil {
		u.setSession(sess, true)
	} else if !errors.Is(err, catalog.ErrClash) {
		return err
	}
	u.resubscribe(ctx, sess)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			done <- err // for the deferred wait
			if err == nil {
				err = errors.New("connection closed")
			}
			return fmt.Errorf("upstream: %s: session ended: %w", u.opts.Name, err)
		case <-u.broken:
			return fmt.Errorf("upstream: %s: the connection broke during a call", u.opts.Name)
		case <-u.changes:
			if err := u.sync(ctx, sess); err != nil {
				if errors.Is(err, catalog.ErrClash) {
					u.setSession(sess, false)
					continue
				}
				return err
			}
			u.setSession(sess, true)
		}
	}
}

// keptTransport keeps the connection its Transport opened, so that a
// session can be ended without waiting for its calls in flight.
// It also holds the count of notifications read from the connection, for
// notes.
type keptTransport struct {
	sdk.Transport
	mu    sync.Mutex
	conn  sdk.Connection
	notes *notes
}

func newKeptTransport(t sdk.Transport) *keptTransport {
	kt := &keptTransport{Transport: t, notes: &notes{}}
	if st, ok := t.(*sdk.StreamableClientTransport); ok && st.HTTPClient != nil {
		if c, ok := st.HTTPClient.Transport.(*sseCounter); ok {
			kt.notes = c.notes
		}
	}
	return kt
}

func (t *keptTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.conn = conn
	t.mu.Unlock()
	// The SDK's Streamable HTTP connection has unexported methods that a
	// wrapper would hide (the negotiated protocol version reaches its
	// headers through one): its notifications are counted as its HTTP
	// responses are read (sseCounter).
	if _, ok := t.Transport.(*sdk.StreamableClientTransport); ok {
		return conn, nil
	}
	return &countingConn{Connection: conn, notes: t.notes}, nil
}

// close closes the connection, if one was opened. Every call waiting on it
// is answered with the connection's error.
func (t *keptTransport) close() {
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// protocolVersion is the protocol version the session s negotiated.
func protocolVersion(s *sdk.ClientSession) string {
	if r := s.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}
