//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDrainsInFlightCalls checks the graceful drain under load:
// tool calls in flight when SIGTERM arrives still complete; readiness
// fails; new requests are refused cleanly (connection refused or 503, never
// another error or a cut-off answer) while a load generator keeps sending;
// the process exits 0 within server.shutdown_grace.
//
// The calls in flight are weather lookups whose fake upstream holds the
// geocoding request until the test lets it go, so the calls are in flight
// for exactly as long as the test needs, with no sleep.
//
// With server.drain_delay set, the listener stays open for that long after
// SIGTERM with /readyz answering 503 (so load balancers stop routing) and
// /healthz still 200; without it the listener closes at once.
func TestSIGTERMDrainsInFlightCalls(t *testing.T) {
	for _, tc := range []struct {
		name       string
		drainDelay time.Duration
	}{
		{name: "no drain delay"},
		{name: "drain delay", drainDelay: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { testSIGTERMDrain(t, tc.drainDelay) })
	}
}

func testSIGTERMDrain(t *testing.T, drainDelay time.Duration) {
	const grace = 5 * time.Second
	const held = 4 // weather calls in flight at SIGTERM

	entered := make(chan struct{}, held)
	release := make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	up := newFakeOpenMeteo(t, func(r *http.Request) {
		if r.URL.Path != "/v1/search" {
			return
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(let) // runs before the fake's Close, which waits for held requests

	srv := startServer(t, []string{
		"PORTCULLIS_TOOLS_TOOLSETS=workshop",
		"PORTCULLIS_TOOLS_WEATHER_BASE_URL=" + up.URL,
		"PORTCULLIS_TOOLS_WEATHER_GEOCODING_URL=" + up.URL,
		"PORTCULLIS_SERVER_SHUTDOWN_GRACE=" + grace.String(),
		"PORTCULLIS_SERVER_DRAIN_DELAY=" + drainDelay.String(),
	})
	client := &http.Client{}
	session := initSession(t, client, srv.MCPURL())

	type outcome struct {
		id   string
		resp *http.Response
		body []byte
		err  error
	}
	inflight := make(chan outcome, held)
	for i := range held {
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			id := fmt.Sprint(10 + i)
			resp, body, err := doPost(ctx, client, srv.MCPURL(),
				`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Paris"}}}`, session)
			inflight <- outcome{id, resp, body, err}
		}()
	}
	for i := range held {
		select {
		case <-entered:
		case o := <-inflight:
			t.Fatalf("weather call ended before reaching the upstream: %v %s", o.err, o.body)
		case <-time.After(20 * time.Second):
			t.Fatalf("weather call %d of %d did not reach the fake upstream within 20s", i+1, held)
		}
	}

	// Load: quick calls, one after another on kept-alive connections, from
	// before SIGTERM until the process is gone.
	var signalledAt atomic.Int64
	load := newDrainLoad(t, srv.MCPURL(), &signalledAt)
	time.Sleep(100 * time.Millisecond) // some load before the signal
	signalledAt.Store(time.Now().UnixNano())
	signalled := time.Now()
	srv.Signal(t, syscall.SIGTERM)

	// Fresh connections only: a probe must not ride a kept-alive one.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}

	// Readiness fails: /readyz turns 503 — or, with no drain delay, the
	// listener may already be closed.
	ready := true
	deadline := time.Now().Add(3 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ready && time.Now().Before(deadline) {
		resp, err := probe.Get(srv.BaseURL + "/readyz")
		switch {
		case err != nil && drainDelay > 0:
			t.Fatalf("/readyz during the %v drain delay: %v, want 503 from a listener still open", drainDelay, err)
		case err != nil:
			ready = false
			t.Logf("/readyz during drain: %v", err)
		case resp.StatusCode == http.StatusOK:
		case resp.StatusCode == http.StatusServiceUnavailable:
			ready = false
		default:
			ready = false
			t.Errorf("/readyz during drain: status %d, want 503", resp.StatusCode)
		}
		if resp != nil {
			resp.Body.Close()
		}
		if ready {
			<-tick.C
		}
	}
	if ready {
		t.Errorf("/readyz still 200 3s after SIGTERM")
	}
	if drainDelay > 0 {
		resp, err := probe.Get(srv.BaseURL + "/healthz")
		if err != nil {
			t.Errorf("/healthz during the drain delay: %v, want 200", err)
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz during the drain delay: status %d, want 200 (the process is alive)", resp.StatusCode)
			}
		}
	}

	// New requests are refused once the drain delay is over.
	refused := false
	deadline = time.Now().Add(drainDelay + 3*time.Second)
	for !refused && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		sent := time.Since(signalled)
		resp, body, err := doPost(ctx, probe, srv.MCPURL(), seed000ToolsList, nil)
		cancel()
		switch {
		case err != nil:
			refused = true
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Logf("new request after SIGTERM failed with %v (not connection refused)", err)
			}
		case resp.StatusCode == http.StatusServiceUnavailable:
			refused = true
		case sent < drainDelay+250*time.Millisecond:
			// Sent during the drain delay (or as the listener was closing,
			// which a loaded machine stretches): accepted and answered, fine.
		default:
			t.Errorf("new request %v after SIGTERM (drain delay %v): status %d, want connection refused or 503; body: %s",
				time.Since(signalled).Round(time.Millisecond), drainDelay, resp.StatusCode, body)
			refused = true // reported; stop probing
		}
		if !refused {
			<-tick.C
		}
	}
	if !refused {
		t.Errorf("new requests still served %v after SIGTERM (drain delay %v)", time.Since(signalled), drainDelay)
	}

	select {
	case <-srv.Done():
		t.Fatalf("portcullis exited (%v) while a call was in flight", srv.ExitErr())
	default:
	}

	// Let the calls finish: each must succeed.
	let()
	for range held {
		var o outcome
		select {
		case o = <-inflight:
		case <-time.After(grace):
			t.Fatal("in-flight weather call did not return after the upstream answered")
		}
		if o.err != nil {
			t.Fatalf("in-flight call: %v", o.err)
		}
		if o.resp.StatusCode != http.StatusOK {
			t.Fatalf("in-flight call: status %d: %s", o.resp.StatusCode, o.body)
		}
		var res toolResult
		raw := rpcResult(t, rpcMessages(t, o.resp.Header.Get("Content-Type"), o.body), o.id)
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("in-flight call result: %v: %s", err, raw)
		}
		if res.IsError || !strings.Contains(string(raw), fakeParisTemperature) {
			t.Errorf("in-flight call result = %s, want Paris's weather (%s) and no error", raw, fakeParisTemperature)
		}
	}

	// The process exits 0, within the grace period.
	select {
	case <-srv.Done():
		if err := srv.ExitErr(); err != nil {
			t.Errorf("portcullis exited with %v after SIGTERM, want 0", err)
		}
		if took := time.Since(signalled); took > drainDelay+grace {
			t.Errorf("portcullis took %v to exit after SIGTERM, more than drain delay %v + grace %v", took, drainDelay, grace)
		}
	case <-time.After(drainDelay + grace + 2*time.Second):
		t.Fatalf("portcullis still running %v after SIGTERM (drain delay %v, grace %v)", time.Since(signalled), drainDelay, grace)
	}
	load.stopAndCheck(t)
}

// drainLoad sends quick tool calls in a loop and classifies each answer.
type drainLoad struct {
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	before   int      // answered 200 before SIGTERM
	after    int      // answered 200 after SIGTERM (accepted, completed)
	refused  int      // refused after SIGTERM: connection error or 503
	problems []string // anything else
}

func newDrainLoad(t *testing.T, endpoint string, signalledAt *atomic.Int64) *drainLoad {
	l := &drainLoad{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	h := http.Header{}
	h.Set("MCP-Protocol-Version", "2025-11-25")
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			sentAt := time.Now().UnixNano()
			resp, body, err := doPost(t.Context(), client, endpoint, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calculator","arguments":{"operation":"add","a":1,"b":2}}}`, h)
			sig := signalledAt.Load()
			l.mu.Lock()
			switch {
			case err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"result":3`) && !strings.Contains(string(body), `"isError":true`):
				if sig == 0 || sentAt < sig {
					l.before++
				} else {
					l.after++
				}
			case sig == 0:
				l.problems = append(l.problems, fmt.Sprintf("before SIGTERM: %v %v %.600s", err, statusOf(resp), body))
			case err != nil:
				// Refused: the listener is closed, or an idle connection was
				// closed before the request was read. Nothing half-done.
				l.refused++
			case resp.StatusCode == http.StatusServiceUnavailable:
				l.refused++
			default:
				l.problems = append(l.problems, fmt.Sprintf("after SIGTERM: status %d: %.200s", resp.StatusCode, body))
			}
			l.mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond) // the listener is gone; do not spin
			}
		}
	}()
	return l
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

func (l *drainLoad) stopAndCheck(t *testing.T) {
	t.Helper()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("load during the drain: %d answered before SIGTERM, %d accepted and answered after, %d refused", l.before, l.after, l.refused)
	for _, p := range l.problems {
		t.Errorf("load: %s", p)
	}
	if l.before == 0 || l.refused == 0 {
		t.Errorf("load: %d calls answered before SIGTERM and %d refused after; want some of each", l.before, l.refused)
	}
}
