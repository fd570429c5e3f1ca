package upstream

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStderrLine bounds one logged line of a stdio server's stderr.
const maxStderrLine = 4 << 10

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
