package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// fuzzHandler builds /mcp as newPolicyEndpoint does (core toolset and a
// forwarded tool fwd served directly, see direct_test.go, sealed
// request state, a per-tool policy that denies echo, an Origin allow-list,
// a small body limit), served in-process.
func fuzzHandler(f *testing.F) *Handler {
	f.Helper()
	// A forwarded tool, whose 2026-07-28 calls are served directly.
	cat := forwardedCatalog(f, &forwarded{})
	sealer, err := NewSealer([][]byte{fixedKey(7)}, time.Minute, nil)
	if err != nil {
		f.Fatal(err)
	}
	policy := func(_ *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
		return tool != "echo", []string{"echo:use"}, true
	}
	opts := Options{
		MaxBodyBytes:   64 << 10,
		AllowedOrigins: []string{"https://app.example.com"},
		// Fuzzed initializes open sessions; let them go quickly.
		SessionIdleTimeout: 200 * time.Millisecond,
	}
	return New(cat, opts, Deps{Version: "fuzz", Sealer: sealer, Policy: policy}).Handler()
}

// FuzzHandler sends arbitrary bodies and MCP headers to /mcp in both
// protocol eras. Invariants: no panic, no hang, no 5xx, JSON responses are
// valid JSON, and every JSON-RPC error is well formed. (The handler's one
// 5xx, 503 for a GET stream while draining, is not reachable by a POST.)
func FuzzHandler(f *testing.F) {
	h := fuzzHandler(f)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"f","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	seeds := []struct {
		body                           string
		version, method, name, session string
		origin                         string
	}{
		{body: legacyInit},
		{body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, version: "2025-06-18"},
		{body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`, version: "2025-11-25"},
		{body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`},
		{body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calculator","arguments":{"operation":"div","a":1,"b":0}}}`},
		{body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`},
		{body: `{"jsonrpc":"2.0","id":1,"result":{}}`, session: "nope"},
		{body: `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`, version: "2026-07-28", method: "server/discover"},
		{body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"PingME","arguments":{},` + meta + `}}`, version: "2026-07-28", method: "tools/call", name: "PingME"},
		{body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"time","arguments":{},"requestState":"v1.AAAAAAAA",` + meta + `}}`, version: "2026-07-28", method: "tools/call", name: "time"},
		{body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fwd","arguments":{},` + meta + `}}`, version: "2026-07-28", method: "tools/call", name: "fwd"},
		{body: `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"fwd","arguments":{"ask":true},"requestState":"v1.AAAA","inputResponses":{"q":{"action":"accept"}},` + meta + `}}`, version: "2026-07-28", method: "tools/call", name: "fwd"},
		{body: `[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fwd","arguments":{"panic":true},` + meta + `}}]`, version: "2026-07-28", method: "tools/call", name: "fwd"},
		{body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, version: "2026-07-28", method: "ping"},
		{body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`},
		{body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, origin: "https://evil.example"},
		{body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, origin: "http://localhost:6274"},
		{body: `{"jsonrpc":"2.0","id":{"a":1},"method":"nope"}`},
		{body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`},
		{body: `[]`}, {body: `"x"`}, {body: `{`}, {body: ``},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.version, s.method, s.name, s.session, s.origin)
	}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	f.Fuzz(func(t *testing.T, body []byte, version, method, name, session, origin string) {
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), http.LocalAddrContextKey, loopback), 10*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:8080/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range map[string]string{
			"Mcp-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name,
			"Mcp-Session-Id": session, "Origin": origin,
		} {
			// Values a client could not send would make NewRequest fail
			// on a real connection; the handler never sees them.
			if v != "" && validHeaderValue(v) {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("the request hung for 10s")
		}
		checkResponse(t, w)
	})
}

// checkResponse asserts the invariants of any /mcp response.
func checkResponse(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("status %d:\n%s", w.Code, w.Body)
	}
	mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
	switch mt {
	case "application/json":
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("status %d: Content-Type JSON but the body is not JSON:\n%q", w.Code, w.Body)
		}
		checkMessages(t, w.Body.Bytes())
	case "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(w.Body.Bytes()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(data) != "" {
				if !json.Valid([]byte(data)) {
					t.Fatalf("SSE data is not JSON: %q", data)
				}
				checkMessages(t, []byte(data))
			}
		}
	}
}

// checkMessages asserts that a JSON-RPC response (or batch of them) is well
// formed: jsonrpc "2.0", an id member, and an error with an integer code and
// a message, or a result.
func checkMessages(t *testing.T, raw []byte) {
	t.Helper()
	var batch []json.RawMessage
	if json.Unmarshal(raw, &batch) != nil {
		batch = []json.RawMessage{raw}
	}
	for _, m := range batch {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Result  json.RawMessage `json:"result"`
			Error   *struct {
				Code    *json.Number `json:"code"`
				Message *string      `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m, &msg); err != nil {
			t.Fatalf("not a JSON-RPC message: %v\n%s", err, m)
		}
		if msg.JSONRPC != "2.0" {
			t.Fatalf(`jsonrpc is %q, want "2.0":\n%s`, msg.JSONRPC, m)
		}
		if msg.Method != "" {
			continue // a server→client request or notification
		}
		var members map[string]json.RawMessage
		json.Unmarshal(m, &members)
		if _, ok := members["id"]; !ok {
			t.Fatalf("a response without an id member:\n%s", m)
		}
		switch {
		case msg.Error != nil:
			if msg.Error.Code == nil || msg.Error.Message == nil {
				t.Fatalf("an error without code or message:\n%s", m)
			}
			if _, err := msg.Error.Code.Int64(); err != nil {
				t.Fatalf("error code is not an integer:\n%s", m)
			}
		case msg.Result == nil:
			t.Fatalf("a response with neither result nor error:\n%s", m)
		}
	}
}

// validHeaderValue reports whether v can be sent as an HTTP header value
// (what net/http's client and server accept).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}

// FuzzOpen opens arbitrary bytes. Invariants: no panic, and nothing opens
// but what this Sealer sealed, for the digest and subject it was sealed for.
func FuzzOpen(f *testing.F) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s, err := NewSealer([][]byte{fixedKey(1), fixedKey(2)}, time.Minute, func() time.Time { return now })
	if err != nil {
		f.Fatal(err)
	}
	other, _ := NewSealer([][]byte{fixedKey(3)}, time.Minute, func() time.Time { return now })
	digest := requestDigest("tools/call", "t", []byte(`{"a":1}`))
	// The fuzzing workers run this setup again: the genuine state must be
	// the same in each, so it is sealed with a fixed nonce.
	genuine := sealFixed(f, s, "round=1", digest, "alice", now.Add(time.Minute).Unix())
	if got, err := s.Open(genuine, digest, "alice"); err != nil || got != "round=1" {
		f.Fatalf("sealFixed does not match Seal's format: %q, %v", got, err)
	}
	foreign := sealFixed(f, other, "round=1", digest, "alice", now.Add(time.Minute).Unix())
	for _, seed := range []string{genuine, genuine[:len(genuine)-1], genuine + "A", foreign, "v1.", "v1.AAAA", "v2." + genuine[3:], "", "round=1"} {
		f.Add(seed, digest, "alice")
	}
	f.Add(genuine, digest[:31], "alice")
	f.Add(genuine, digest, "mallory")
	f.Fuzz(func(t *testing.T, sealed string, d []byte, subject string) {
		got, err := s.Open(sealed, d, subject)
		if sealed == genuine && bytes.Equal(d, digest) && subject == "alice" {
			if err != nil || got != "round=1" {
				t.Fatalf("the genuine state does not open: %q, %v", got, err)
			}
			return
		}
		if err == nil {
			t.Fatalf("Open(%q, %x, %q) = %q: a state this Sealer did not seal for this request opened", sealed, d, subject, got)
		}
		if !errors.Is(err, ErrInvalidState) || err != ErrInvalidState {
			t.Fatalf("Open returned %v, want exactly ErrInvalidState (callers must not tell failures apart)", err)
		}
	})
}

// sealFixed seals as Sealer.Seal does, with an all-zero nonce, so the
// result is the same in every process. Tests only: a fixed nonce with a
// real key would break GCM.
func sealFixed(tb testing.TB, s *Sealer, state string, digest []byte, subject string, expires int64) string {
	tb.Helper()
	pt, err := json.Marshal(sealedState{Expires: expires, Digest: digest, Subject: []byte(subject), State: []byte(state)})
	if err != nil {
		tb.Fatal(err)
	}
	k := s.aeads[0]
	nonce := make([]byte, k.aead.NonceSize())
	buf := append(append([]byte{}, k.id[:]...), nonce...)
	return sealVersion + base64.RawURLEncoding.EncodeToString(k.aead.Seal(buf, nonce, pt, k.id[:]))
}

// FuzzSealRoundTrip seals arbitrary state. Invariants: it opens for the
// same digest and subject, and not for another subject, another digest,
// after expiry, or with one byte changed.
func FuzzSealRoundTrip(f *testing.F) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := NewSealer([][]byte{fixedKey(1)}, time.Minute, clock)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("round=1", []byte("digest"), "alice", uint16(0))
	f.Add("", []byte{}, "", uint16(5))
	f.Add("\x00\xff\"\\ünïcode", []byte{0, 1, 2}, "issuer|subject", uint16(400))
	f.Fuzz(func(t *testing.T, state string, digest []byte, subject string, flip uint16) {
		now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		sealed, err := s.Seal(state, digest, subject)
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		got, err := s.Open(sealed, digest, subject)
		if err != nil {
			t.Fatalf("Open of a fresh seal: %v", err)
		}
		if got != state {
			t.Fatalf("round trip: got %q, want %q", got, state)
		}
		if _, err := s.Open(sealed, digest, subject+"x"); err == nil {
			t.Fatal("opened for another subject")
		}
		if _, err := s.Open(sealed, append(bytes.Clone(digest), 0), subject); err == nil {
			t.Fatal("opened for another digest")
		}
		b := []byte(sealed)
		i := len(sealVersion) + int(flip)%(len(b)-len(sealVersion))
		b[i] ^= 0x01
		if _, err := s.Open(string(b), digest, subject); err == nil {
			t.Fatalf("opened with byte %d changed", i)
		}
		now = now.Add(time.Minute + time.Second)
		if _, err := s.Open(sealed, digest, subject); err == nil {
			t.Fatal("opened after expiry")
		}
	})
}
