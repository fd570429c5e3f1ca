package observability

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWatchConns drives a real server's connection limits the way clients
// hit them, and checks that each is counted once, under its own name, and
// that what is not a limit (a probe, a bad request, a handler's own 431,
// a client hanging up) is not.
func TestWatchConns(t *testing.T) {
	const timeout = 200 * time.Millisecond
	get := "GET / HTTP/1.1\r\nHost: portcullis\r\n\r\n"
	roundTrip := func(t *testing.T, conn net.Conn, br *bufio.Reader, req string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// waitClosed reads until the server hangs up.
	waitClosed := func(t *testing.T, conn net.Conn) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the server did not close the connection")
			}
		}
	}
	tests := []struct {
		name string
		// client talks to the server on conn; the connection is closed
		// when it returns.
		client                             func(t *testing.T, conn net.Conn, br *bufio.Reader)
		headerSize, headerTimeout, idleGot float64
	}{{
		name:   "a TCP probe connects and leaves",
		client: func(*testing.T, net.Conn, *bufio.Reader) {},
	}, {
		name: "a client connects and says nothing",
		client: func(t *testing.T, conn net.Conn, _ *bufio.Reader) {
			waitClosed(t, conn)
		},
		headerTimeout: 1,
	}, {
		name: "a slowloris client trickles its header",
		client: func(t *testing.T, conn net.Conn, _ *bufio.Reader) {
			io.WriteString(conn, "GET / HTTP/1.1\r\nHost: portcullis\r\n")
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					time.Sleep(timeout / 4)
					if _, err := io.WriteString(conn, "X-Slow: a\r\n"); err != nil {
						return
					}
				}
			}()
			waitClosed(t, conn)
			conn.Close()
			<-done
		},
		headerTimeout: 1,
	}, {
		name: "a header over MaxHeaderBytes gets 431",
		client: func(t *testing.T, conn net.Conn, br *bufio.Reader) {
			req := "GET / HTTP/1.1\r\nHost: portcullis\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n"
			if resp := roundTrip(t, conn, br, req); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("status %d, want 431", resp.StatusCode)
			}
		},
		headerSize: 1,
	}, {
		name: "a kept-alive connection idles out",
		client: func(t *testing.T, conn net.Conn, br *bufio.Reader) {
			roundTrip(t, conn, br, get)
			roundTrip(t, conn, br, get)
			waitClosed(t, conn)
		},
		idleGot: 1,
	}, {
		name: "a second request's header stalls",
		client: func(t *testing.T, conn net.Conn, br *bufio.Reader) {
			roundTrip(t, conn, br, get)
			io.WriteString(conn, "GET / HT")
			waitClosed(t, conn)
		},
		headerTimeout: 1,
	}, {
		name: "a handler answers 431 itself",
		client: func(t *testing.T, conn net.Conn, br *bufio.Reader) {
			resp := roundTrip(t, conn, br, "GET /own-431 HTTP/1.1\r\nHost: portcullis\r\n\r\n")
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("status %d, want the handler's 431", resp.StatusCode)
			}
		},
	}, {
		name: "a malformed request gets net/http's 400",
		client: func(t *testing.T, conn net.Conn, br *bufio.Reader) {
			if resp := roundTrip(t, conn, br, "NOT HTTP\r\n\r\n"); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.StatusCode)
			}
		},
	}, {
		name: "a client makes requests and hangs up",
		client: func(t *testing.T, conn net.Conn, br *bufio.Reader) {
			for range 3 {
				roundTrip(t, conn, br, get)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
			closed := make(chan struct{}, 1)
			srv := &http.Server{
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/own-431" {
						w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
						return
					}
					io.WriteString(w, "ok")
				}),
				ReadHeaderTimeout: timeout,
				IdleTimeout:       timeout,
				MaxHeaderBytes:    1024,
				ErrorLog:          nil,
				// WatchConns keeps a hook that was already set.
				ConnState: func(_ net.Conn, s http.ConnState) {
					if s == http.StateClosed {
						closed <- struct{}{}
					}
				},
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(m.WatchConns(srv, ln))
			t.Cleanup(func() { srv.Close() })

			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			tt.client(t, conn, bufio.NewReader(conn))
			conn.Close()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server never closed its side")
			}
			got := map[string]float64{
				"header_size":         testutil.ToFloat64(m.limitRejections.WithLabelValues(LimitHeaderSize)),
				"read_header_timeout": testutil.ToFloat64(m.limitRejections.WithLabelValues(LimitReadHeaderTimeout)),
				"idle":                testutil.ToFloat64(m.idleClosed),
			}
			want := map[string]float64{"header_size": tt.headerSize, "read_header_timeout": tt.headerTimeout, "idle": tt.idleGot}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s = %v, want %v", k, got[k], w)
				}
			}
		})
	}
}

// TestRequestContextDoesNotKeepConn checks that a request context that
// outlives its connection (the SDK keeps a legacy session's initialize
// context for the session's life) does not keep the connection's objects
// alive.
func TestRequestContextDoesNotKeepConn(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
	var (
		mu   sync.Mutex
		kept context.Context
		wc   weak.Pointer[watchedConn]
	)
	closed := make(chan struct{}, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			kept = r.Context()
			mu.Unlock()
			io.WriteString(w, "ok")
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				if c, ok := c.(*watchedConn); ok {
					mu.Lock()
					wc = weak.Make(c)
					mu.Unlock()
				}
			case http.StateClosed:
				closed <- struct{}{}
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(m.WatchConns(srv, ln))
	t.Cleanup(func() { srv.Close() })

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never closed the connection")
	}
	mu.Lock()
	defer mu.Unlock()
	if kept == nil || wc == (weak.Pointer[watchedConn]{}) {
		t.Fatal("the handler or the connection hook did not run on a watched connection")
	}
	for range 5 {
		runtime.GC()
		if wc.Value() == nil {
			break
		}
	}
	if wc.Value() != nil {
		t.Error("a request context kept alive keeps its closed connection alive")
	}
	runtime.KeepAlive(kept)
}
