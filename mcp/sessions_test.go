package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

func TestDrainEndsStreams(t *testing.T) {
	ts, h := newTestEndpoint(t, nil)
	init := post(t, ts.URL, legacyInit, nil)
	sid := init.header.Get("Mcp-Session-Id")
	post(t, ts.URL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid})

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream status %d", resp.StatusCode)
	}
	h.Drain()
	// The stream must end: ReadAll returns once the server closes it.
	if _, err := io.ReadAll(resp.Body); err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		t.Logf("stream ended with %v", err)
	}
	r := do(t, req.Clone(context.Background()))
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("GET while draining: status %d, want 503", r.status)
	}
}

// TestSessionCap runs on a fake clock, so that a closed session's slot is
// seen free as soon as every goroutine has settled.
func TestSessionCap(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		ev := &limitEvents{}
		h := endpoint{edit: func(o *Options) { o.MaxSessions = 2 }, deps: Deps{LimitHook: ev.hook}}.handler(t)
		post := func(_ *testing.T, _, body string, header map[string]string) response {
			return postTo(t, h, body, header)
		}
		var ids []string
		for i := range 2 {
			r := post(t, "", legacyInit, nil)
			id := r.header.Get(mcpheader.SessionID)
			if r.status != http.StatusOK || id == "" {
				t.Fatalf("initialize %d: status %d, session %q: %s", i+1, r.status, id, r.body)
			}
			ids = append(ids, id)
		}
		if n, _ := h.sessions.open(""); n != 2 {
			t.Errorf("open sessions = %d, want 2", n)
		}
		r := post(t, "", legacyInit, nil)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("third initialize: status %d, Retry-After %q, want 503 with Retry-After: %s", r.status, r.header.Get("Retry-After"), r.body)
		}
		if errorCode(r.message) != -32000 || !strings.Contains(errorMessage(r.message), "2 sessions open") {
			t.Errorf("third initialize: body %s, want a JSON-RPC error naming the limit", r.body)
		}
		// Stateless requests are not sessions: still served.
		if r := post(t, "", modernCall("echo", `{"text":"hi"}`), map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}); r.status != http.StatusOK {
			t.Errorf("stateless call at the cap: status %d: %s", r.status, r.body)
		}
		// Closing a session frees its slot.
		req := httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "/mcp", nil)
		req.Header.Set(mcpheader.SessionID, ids[0])
		req.Header.Set(mcpheader.ProtocolVersion, "2025-06-18")
		if r := serve(h, req); r.status/100 != 2 {
			t.Fatalf("DELETE session: status %d: %s", r.status, r.body)
		}
		synctest.Wait()
		if n, _ := h.sessions.open(""); n != 1 {
			t.Errorf("open sessions after DELETE = %d, want 1", n)
		}
		if r := post(t, "", legacyInit, nil); r.status != http.StatusOK {
			t.Fatalf("initialize after DELETE: status %d: %s", r.status, r.body)
		}
		if got := ev.list(); len(got) != 1 || got[0].Limit != limits.LimitSessions {
			t.Errorf("events %+v, want one sessions event", got)
		}
		// The bubble ends when every goroutine has: let the default idle
		// timeout close the sessions still open.
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
	})
}

// TestSessionIdleTimeoutFreesTheCap runs on a fake clock: the idle timeout
// passes in an instant, and the session is gone once every goroutine has
// settled.
func TestSessionIdleTimeoutFreesTheCap(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		const idle = 100 * time.Millisecond
		h := endpoint{edit: func(o *Options) {
			o.MaxSessions = 1
			o.SessionIdleTimeout = idle
		}}.handler(t)
		if r := postTo(t, h, legacyInit, nil); r.status != http.StatusOK {
			t.Fatalf("initialize: status %d: %s", r.status, r.body)
		}
		if r := postTo(t, h, legacyInit, nil); r.status != http.StatusServiceUnavailable {
			t.Fatalf("second initialize at once: status %d, want 503", r.status)
		}
		time.Sleep(idle + time.Second) // the fake clock: no real wait
		synctest.Wait()
		if n, _ := h.sessions.open(""); n != 0 {
			t.Errorf("open sessions after the idle timeout = %d, want 0", n)
		}
		if r := postTo(t, h, legacyInit, nil); r.status != http.StatusOK {
			t.Fatalf("initialize after the idle timeout: status %d: %s", r.status, r.body)
		}
		time.Sleep(idle + time.Second) // and that session's
		synctest.Wait()
	})
}

// TestSessionSharePerPrincipal runs on a fake clock: one principal that
// fills its share of sessions gets 429 while another still gets in; the
// server's cap gets 503; sessions that were never initialized count; and
// every count returns to zero when sessions are deleted or expire.
func TestSessionSharePerPrincipal(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		const idle = time.Minute
		ev := &limitEvents{}
		h := endpoint{edit: func(o *Options) {
			o.MaxSessions = 4
			o.MaxSessionsPerPrincipal = 2
			o.SessionIdleTimeout = idle
		}, deps: Deps{
			LimitHook:    ev.hook,
			PrincipalKey: func(r *http.Request) string { return r.Header.Get("X-Who") },
		}}.handler(t)
		// initialize sends a legacy initialize as who and never follows it
		// with notifications/initialized.
		initialize := func(who string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(legacyInit))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("X-Who", who)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		counts := func(who string, wantTotal, wantWho int) {
			t.Helper()
			if total, n := h.sessions.open(who); total != wantTotal || n != wantWho {
				t.Errorf("open sessions: %d in all, %d of %q; want %d and %d", total, n, who, wantTotal, wantWho)
			}
		}
		var aliceIDs []string
		for i := range 2 {
			w := initialize("alice")
			if w.Code != http.StatusOK || w.Header().Get(mcpheader.SessionID) == "" {
				t.Fatalf("alice's initialize %d: status %d: %s", i+1, w.Code, w.Body)
			}
			aliceIDs = append(aliceIDs, w.Header().Get(mcpheader.SessionID))
		}
		counts("alice", 2, 2)

		w := initialize("alice")
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Fatalf("alice's third initialize: status %d, Retry-After %q; want 429 with Retry-After: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		var m map[string]any
		if json.Unmarshal(w.Body.Bytes(), &m); errorCode(m) != -32000 || !strings.Contains(errorMessage(m), "already has 2 sessions open") {
			t.Errorf("alice's third initialize: body %s, want a JSON-RPC error naming the share", w.Body)
		}
		for i := range 2 {
			if w := initialize("bob"); w.Code != http.StatusOK {
				t.Fatalf("bob's initialize %d beside alice's full share: status %d: %s", i+1, w.Code, w.Body)
			}
		}
		counts("bob", 4, 2)
		if w := initialize("carol"); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("carol's initialize at the server's cap: status %d, want 503: %s", w.Code, w.Body)
		}

		// Deleting one of alice's sessions gives her room again.
		r := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
		r.Header.Set(mcpheader.SessionID, aliceIDs[0])
		r.Header.Set(mcpheader.ProtocolVersion, "2025-06-18")
		r.Header.Set("X-Who", "alice")
		dw := httptest.NewRecorder()
		h.ServeHTTP(dw, r)
		if dw.Code/100 != 2 {
			t.Fatalf("DELETE: status %d: %s", dw.Code, dw.Body)
		}
		synctest.Wait()
		counts("alice", 3, 1)
		if w := initialize("alice"); w.Code != http.StatusOK {
			t.Fatalf("alice's initialize after a DELETE: status %d: %s", w.Code, w.Body)
		}

		// Idle sessions expire, and with them every count.
		time.Sleep(idle + time.Second)
		synctest.Wait()
		counts("alice", 0, 0)
		counts("bob", 0, 0)
		if n := len(h.sessions.byKey); n != 0 {
			t.Errorf("principals still counted after every session expired: %d", n)
		}

		want := []limits.Limit{limits.LimitSessionsPrincipal, limits.LimitSessions}
		got := ev.list()
		if len(got) != len(want) {
			t.Fatalf("events %+v, want %v", got, want)
		}
		for i := range want {
			if got[i].Limit != want[i] {
				t.Errorf("event %d: %q, want %q", i, got[i].Limit, want[i])
			}
		}
	})
}

// TestSessionsWithoutPrincipal: with auth off there is no principal, and
// only the server's cap applies, not a share of it.
func TestSessionsWithoutPrincipal(t *testing.T) {
	_, h := newPolicyEndpoint(t, func(o *Options) {
		o.MaxSessions = 3
		o.MaxSessionsPerPrincipal = 1
	}, Deps{PrincipalKey: func(*http.Request) string { return "" }})
	for i := range 4 {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(legacyInit))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		want := http.StatusOK
		if i == 3 {
			want = http.StatusServiceUnavailable
		}
		if w.Code != want {
			t.Fatalf("initialize %d without a principal: status %d, want %d: %s", i+1, w.Code, want, w.Body)
		}
	}
}

func TestSessionShareDefaults(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		wantShare int
		wantErr   string
	}{
		{name: "a tenth of the default cap", opts: Options{}, wantShare: 1000},
		{name: "a tenth of a set cap", opts: Options{MaxSessions: 50}, wantShare: 5},
		{name: "at least one", opts: Options{MaxSessions: 5}, wantShare: 1},
		{name: "share above the cap", opts: Options{MaxSessions: 5, MaxSessionsPerPrincipal: 6},
			wantErr: "max_sessions_per_principal: 6 is more than max_sessions 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Defaults()
			err := tc.opts.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.opts.MaxSessionsPerPrincipal; got != tc.wantShare {
				t.Errorf("max_sessions_per_principal = %d, want %d", got, tc.wantShare)
			}
		})
	}
}
