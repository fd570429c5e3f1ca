package observability

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/prometheus/client_golang/prometheus"
)

// Connection-level limits that net/http enforces itself, before any handler
// runs: the values of the limit label of portcullis_limit_rejections_total
// that [Metrics.WatchConns] counts.
const (
	// LimitHeaderSize counts requests refused with 431 because their
	// header exceeded http.Server.MaxHeaderBytes.
	LimitHeaderSize = string(limits.LimitHeaderSize)
	// LimitReadHeaderTimeout counts connections closed because a
	// request's header was not complete within
	// http.Server.ReadHeaderTimeout (a slowloris client, or one that
	// connects and says nothing).
	LimitReadHeaderTimeout = string(limits.LimitReadHeaderTimeout)
)

// connWatch is the part of [Metrics] that watches the MCP listener's
// connections (WatchConns).
type connWatch struct {
	conns connCounters
}

// connCounters count what net/http's connection limits close.
type connCounters struct {
	headerSize        prometheus.Counter
	readHeaderTimeout prometheus.Counter
	idleClosed        prometheus.Counter
}

// WatchConns counts what srv's connection limits refuse on ln, which
// net/http handles before any handler could see it: a request header over
// MaxHeaderBytes (431, limit="header_size"), a header not complete within
// ReadHeaderTimeout (limit="read_header_timeout"), and a kept-alive
// connection closed after IdleTimeout without a new request
// (portcullis_http_idle_connections_closed_total). A connection that opens
// and closes without a byte, like a TCP liveness probe, is not counted.
//
// It wraps srv's Handler, ConnState and ConnContext, keeping what they
// did, so it must be called before srv serves, and srv must serve the
// returned listener. It applies to plain HTTP/1.1, which is what the MCP
// listener speaks; TLS terminates in front of it.
func (m *connWatch) WatchConns(srv *http.Server, ln net.Listener) net.Listener {
	c := m.conns
	next := srv.Handler
	if next == nil {
		next = http.DefaultServeMux
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if handled, ok := r.Context().Value(handledKey{}).(*atomic.Bool); ok {
			handled.Store(true)
		}
		next.ServeHTTP(w, r)
	})
	connContext := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, conn net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, conn)
		}
		if wc, ok := conn.(*watchedConn); ok {
			// Only the flag: a context can outlive its connection (the SDK
			// keeps a legacy session's initialize context), and should not
			// keep the connection's objects alive with it.
			ctx = context.WithValue(ctx, handledKey{}, wc.handled)
		}
		return ctx
	}
	connState := srv.ConnState
	srv.ConnState = func(conn net.Conn, state http.ConnState) {
		if wc, ok := conn.(*watchedConn); ok {
			wc.setState(state)
		}
		if connState != nil {
			connState(conn, state)
		}
	}
	return &watchedListener{Listener: ln, counters: c}
}

type handledKey struct{}

// watchedListener hands out watchedConns.
type watchedListener struct {
	net.Listener
	counters connCounters
}

func (l *watchedListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: conn, counters: l.counters, handled: new(atomic.Bool)}, nil
}

// watchedConn follows one connection through net/http's states to tell
// why net/http gave up on it. Its fields are atomic: net/http reads the
// connection from a background goroutine while a handler runs.
type watchedConn struct {
	net.Conn
	counters connCounters

	// state is the last http.ConnState net/http reported.
	state atomic.Int32
	// read counts the bytes read since the connection was accepted or
	// last became idle: none means no new request had started.
	read atomic.Int64
	// handled is set once a handler runs for the request being read or
	// answered; until then a response on the connection is net/http's own.
	handled *atomic.Bool
	// counted is set once the connection was counted: it ends there.
	counted atomic.Bool
}

func (c *watchedConn) setState(s http.ConnState) {
	switch s {
	case http.StateActive:
		c.handled.Store(false)
	case http.StateIdle:
		c.read.Store(0)
	}
	c.state.Store(int32(s))
}

// Read notes a read deadline that expired while net/http waited for a
// request. While a request is active, an expired deadline is net/http
// ending its own background read, not a limit.
func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	read := c.read.Add(int64(n))
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, err
	}
	switch http.ConnState(c.state.Load()) {
	case http.StateNew:
		c.count(c.counters.readHeaderTimeout)
	case http.StateIdle:
		if read == 0 {
			c.count(c.counters.idleClosed)
		} else {
			c.count(c.counters.readHeaderTimeout)
		}
	}
	return n, err
}

// status431 starts the reply net/http writes itself for a header over
// MaxHeaderBytes.
var status431 = []byte("HTTP/1.1 431 ")

// Write notes the 431 that net/http writes straight to the connection,
// before any handler ran, when a request's header is too large.
func (c *watchedConn) Write(p []byte) (int, error) {
	if !c.handled.Load() && http.ConnState(c.state.Load()) == http.StateActive && bytes.HasPrefix(p, status431) {
		c.count(c.counters.headerSize)
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes a TCP connection, as net/http does after a 431 or
// an unread body, so that the client reads the answer before the reset.
func (c *watchedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func (c *watchedConn) count(counter prometheus.Counter) {
	if c.counted.CompareAndSwap(false, true) {
		counter.Inc()
	}
}
