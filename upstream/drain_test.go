package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
	"time"
)

// sseResult answers like a stateless server: the call's result as one
// event, then, tail later, the end of the stream.
func sseResult(tail time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(tail) // the server's own pace, not a wait for a condition
	}
}

// callOnce sends a request whose context ends as soon as the event is read,
// as an SDK call's does when it returns with its result, then reads the
// body to its end and closes it, as the SDK's stream reader does. It
// reports whether the request went out on a reused connection.
func callOnce(t *testing.T, client *http.Client, url string) (reused bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the event: %v", err)
		}
		if line == "\n" {
			break
		}
	}
	cancel() // the call has its result and returns
	io.Copy(io.Discard, br)
	resp.Body.Close()
	return reused
}

func TestDrainTransportKeepsConnections(t *testing.T) {
	srv := httptest.NewServer(sseResult(20 * time.Millisecond))
	defer srv.Close()
	for _, tt := range []struct {
		name  string
		drain bool
	}{
		{"without drainTransport the ended call closes the connection", false},
		{"with drainTransport the connection is reused", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: base}
			if tt.drain {
				client.Transport = &drainTransport{next: base, grace: 10 * time.Second}
			}
			callOnce(t, client, srv.URL)
			for i := range 3 {
				if got := callOnce(t, client, srv.URL); got != tt.drain {
					t.Fatalf("call %d: connection reused %v, want %v", i+2, got, tt.drain)
				}
			}
		})
	}
}

// A call cancelled before the response headers arrive ends its request at
// once, not after the grace.
func TestDrainTransportCancelBeforeHeaders(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(ended)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &drainTransport{next: &http.Transport{}, grace: time.Hour}}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call cancelled before its response headers did not end its request")
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the request end")
	}
}

// A stream that goes on after the call ended is cut off after the grace.
func TestDrainTransportCutsOffEndlessStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": open\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	client := &http.Client{Transport: &drainTransport{next: &http.Transport{}, grace: 50 * time.Millisecond}}
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("reading the endless stream ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream was not cut off after the grace")
	}
}
