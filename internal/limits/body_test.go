package limits

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener is an in-memory listener whose connections are net.Pipe,
// so that an http.Server runs inside a synctest bubble on its fake clock.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// readAll is a handler that reads the body as the MCP handler does: a read
// that times out is answered 408 and closes the connection. After the
// body, it waits past the deadline before it answers, as a long tool call
// or an SSE stream does, and reports whether its request was cancelled.
func readAll(wait time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if errors.Is(err, ErrBodyReadTimeout) {
			w.Header().Set("Connection", "close")
			http.Error(w, "request timeout", http.StatusRequestTimeout)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		time.Sleep(wait)
		if r.Context().Err() != nil {
			http.Error(w, "request cancelled while answering", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "read "+strconv.Itoa(len(body))+" bytes")
	})
}

// TestBodyDeadline serves each client through BodyDeadline and the
// in-flight limiter on a fake clock: a body that trickles or never ends is
// cut off after the timeout with 408 (or, when the handler never read it,
// a closed connection), counted once, and its in-flight slot freed; a body
// that arrives in time is served, and its response may outlast the
// deadline.
func TestBodyDeadline(t *testing.T) {
	const timeout = 30 * time.Second
	tests := []struct {
		name string
		// head is the request line and headers; then the client writes
		// each chunk of body after its pause, and then nothing more.
		head   string
		pause  time.Duration
		chunks []string
		// handler reads the body unless it is unread; an unread body's
		// 401 says Connection: close when closes is set, as auth's does.
		unread     bool
		closes     bool
		wantStatus int
		wantClose  bool
		wantAfter  time.Duration
		wantEvents int
	}{
		{
			name:   "body trickles past the deadline",
			head:   "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
			pause:  time.Second,
			chunks: strings.Split(strings.Repeat("x", 60), ""),
			// 60 bytes, one a second: it would end after 100s.
			wantStatus: http.StatusRequestTimeout, wantClose: true, wantAfter: timeout, wantEvents: 1,
		},
		{
			name:       "body never ends",
			head:       "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
			chunks:     []string{`{"jsonrpc":`},
			wantStatus: http.StatusRequestTimeout, wantClose: true, wantAfter: timeout, wantEvents: 1,
		},
		{
			name:       "chunked body never ends",
			head:       "POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
			chunks:     []string{"5\r\nhello\r\n"},
			wantStatus: http.StatusRequestTimeout, wantClose: true, wantAfter: timeout, wantEvents: 1,
		},
		{
			name:       "unread body never ends",
			head:       "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
			chunks:     []string{"{"},
			unread:     true,
			wantStatus: http.StatusUnauthorized, wantClose: true, wantAfter: timeout, wantEvents: 1,
		},
		{
			// The handler drops the connection: nothing waits for the
			// body, and nothing is counted.
			name:       "unread body never ends, the answer closes the connection",
			head:       "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
			chunks:     []string{"{"},
			unread:     true,
			closes:     true,
			wantStatus: http.StatusUnauthorized, wantClose: true, wantAfter: 0,
		},
		{
			name:       "unread body never arrives, the answer closes the connection",
			head:       "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
			unread:     true,
			closes:     true,
			wantStatus: http.StatusUnauthorized, wantClose: true, wantAfter: 0,
		},
		{
			name:   "slow body finishes in time",
			head:   "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n",
			pause:  time.Second,
			chunks: strings.Split(strings.Repeat("y", 20), ""),
			// The handler answers 40s after the body ended, past the
			// deadline: it must have been cleared.
			wantStatus: http.StatusOK, wantAfter: 20*time.Second + 40*time.Second,
		},
		{
			name:       "no body",
			head:       "GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n",
			unread:     true,
			wantStatus: http.StatusUnauthorized, wantAfter: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ev := &events{}
				l := newLimiter(t, Options{}, ev, &clock{})
				var h http.Handler = readAll(40 * time.Second)
				if tc.unread {
					h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if tc.closes {
							w.Header().Set("Connection", "close")
						}
						http.Error(w, "unauthorized", http.StatusUnauthorized)
					})
				}
				ln := newPipeListener()
				srv := &http.Server{Handler: BodyDeadline(timeout, ev.hook)(l.Middleware(h))}
				go srv.Serve(ln)
				defer srv.Close()

				conn := ln.dial()
				defer conn.Close()
				start := time.Now()
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					if _, err := io.WriteString(conn, tc.head); err != nil {
						return
					}
					for _, c := range tc.chunks {
						select {
						case <-stop:
							return
						case <-time.After(tc.pause):
						}
						if _, err := io.WriteString(conn, c); err != nil {
							return // the server hung up
						}
					}
				}()
				br := bufio.NewReader(conn)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("reading the response: %v", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				if resp.StatusCode != tc.wantStatus || resp.Close != tc.wantClose {
					t.Errorf("status %d, close %v; want %d, close %v", resp.StatusCode, resp.Close, tc.wantStatus, tc.wantClose)
				}
				if took != tc.wantAfter {
					t.Errorf("answered after %v, want %v", took, tc.wantAfter)
				}
				if tc.wantClose {
					// The server hangs up: nothing more is read.
					if n, err := io.Copy(io.Discard, br); n != 0 || err != nil {
						t.Errorf("after the answer: read %d bytes, %v; want the connection closed", n, err)
					}
				}
				synctest.Wait()
				if n := l.InFlight(); n != 0 {
					t.Errorf("in flight after the answer: %d, want 0", n)
				}
				got := ev.list()
				if len(got) != tc.wantEvents {
					t.Fatalf("events %v, want %d body_read_timeout", got, tc.wantEvents)
				}
				for _, e := range got {
					if e != LimitBodyReadTimeout {
						t.Errorf("event %q, want %q", e, LimitBodyReadTimeout)
					}
				}
			})
		})
	}
}
