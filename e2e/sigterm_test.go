package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDrainsInFlightCalls checks the graceful drain: a tool call in
// flight when SIGTERM arrives still completes; readiness fails; new
// requests are refused; the process exits 0 within server.shutdown_grace.
//
// The call in flight is a weather lookup whose fake upstream holds the
// geocoding request until the test lets it go, so the call is in flight
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

	entered := make(chan struct{}, 1)
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
		resp *http.Response
		body []byte
		err  error
	}
	inflight := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		resp, body, err := doPost(ctx, client, srv.MCPURL(),
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Paris"}}}`, session)
		inflight <- outcome{resp, body, err}
	}()
	select {
	case <-entered:
	case o := <-inflight:
		t.Fatalf("weather call ended before reaching the upstream: %v %s", o.err, o.body)
	case <-time.After(20 * time.Second):
		t.Fatal("weather call did not reach the fake upstream within 20s")
	}

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
		case time.Since(signalled) < drainDelay:
			// Still routed to during the drain delay: fine.
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

	// Let the call finish: it must succeed.
	let()
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
	raw := rpcResult(t, rpcMessages(t, o.resp.Header.Get("Content-Type"), o.body), "7")
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("in-flight call result: %v: %s", err, raw)
	}
	if res.IsError || !strings.Contains(string(raw), fakeParisTemperature) {
		t.Errorf("in-flight call result = %s, want Paris's weather (%s) and no error", raw, fakeParisTemperature)
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
}
