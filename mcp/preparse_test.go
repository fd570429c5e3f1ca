package mcp

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTooDeep: the router refuses a body nested deeper than the SDK allows
// before decoding it, because its decoder recurses once per level: a 4 MiB
// body two million levels deep overflowed the stack and killed the
// process.
func TestTooDeep(t *testing.T) {
	deep := func(open, close string, n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + `}}`
	}
	tests := []struct {
		name string
		body string
		want bool
	}{
		{name: "flat", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{name: "at the limit", body: deep("[", "]", maxDepth-2)},
		{name: "one over", body: deep("[", "]", maxDepth-1), want: true},
		{name: "objects", body: deep(`{"a":`, "}", maxDepth), want: true},
		{name: "brackets in strings do not count", body: `{"a":"` + strings.Repeat("[", 2*maxDepth) + `"}`},
		{name: "escaped quotes do not end a string", body: `{"a":"\\\"` + strings.Repeat("{", 2*maxDepth) + `"}`},
		{name: "an escaped backslash ends before the quote", body: `{"a":"\\\\"` + strings.Repeat("[", 2*maxDepth), want: true},
		{name: "invalid JSON is still measured", body: strings.Repeat("[", maxDepth+1) + "}", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tooDeep([]byte(tt.body), maxDepth); got != tt.want {
				t.Errorf("tooDeep = %v, want %v", got, tt.want)
			}
		})
	}
	// What crashed the process: a body of the default maximum size, nested
	// as deeply as it can be.
	n := (sdk.DefaultMaxRequestBodyBytes - 100) / 2
	body := deep("[", "]", n)
	if _, perr := parseMessages([]byte(body)); perr == nil || perr.code != -32700 {
		t.Errorf("a %d-byte body %d levels deep: %+v, want -32700", len(body), n, perr)
	}
}

func TestParseMessages(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []string // the methods of the messages, "" for a response
		wantErr int64
		wantID  string
	}{
		{name: "a request", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, want: []string{"ping"}},
		{name: "a notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: []string{"notifications/initialized"}},
		{name: "a result response", body: `{"jsonrpc":"2.0","id":1,"result":{}}`, want: []string{""}},
		{name: "an error response", body: `{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m"}}`, want: []string{""}},
		{name: "a batch", body: ` [{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled"}]`, want: []string{"ping", "notifications/cancelled"}},
		{name: "not JSON", body: `{"jsonrpc":`, wantErr: -32700},
		{name: "trailing bytes", body: `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, wantErr: -32700},
		{name: "a type error before a syntax error", body: `{"jsonrpc":1,"id":1,"method":"ping"`, wantErr: -32700},
		{name: "empty body", body: ``, wantErr: -32700},
		{name: "an empty batch", body: `[]`, wantErr: -32600},
		{name: "a batch of numbers", body: `[1,2]`, wantErr: -32600},
		{name: "a string", body: `"ping"`, wantErr: -32600},
		{name: "a wrong jsonrpc version", body: `{"jsonrpc":"1.0","id":7,"method":"ping"}`, wantErr: -32600, wantID: "7"},
		{name: "no method", body: `{"jsonrpc":"2.0","id":"x"}`, wantErr: -32600, wantID: `"x"`},
		{name: "a response without an id", body: `{"jsonrpc":"2.0","result":{}}`, wantErr: -32600},
		// The SDK matches field names exactly; so does the router.
		{name: "a method in another case", body: `{"jsonrpc":"2.0","id":1,"Method":"ping"}`, wantErr: -32600, wantID: "1"},
		{name: "too deep", body: strings.Repeat("[", maxDepth+1), wantErr: -32700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, perr := parseMessages([]byte(tt.body))
			if tt.wantErr != 0 {
				if perr == nil {
					t.Fatalf("parseMessages = %+v, want error %d", msgs, tt.wantErr)
				}
				if perr.code != tt.wantErr || string(perr.id) != tt.wantID {
					t.Errorf("error code %d id %s, want %d id %s", perr.code, perr.id, tt.wantErr, tt.wantID)
				}
				return
			}
			if perr != nil {
				t.Fatalf("parseMessages: %+v", perr)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, m.Method)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("methods %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIDText(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want string
	}{
		{name: "none", id: "", want: ""},
		{name: "a number", id: `12`, want: "12"},
		{name: "a string", id: `"abc"`, want: "abc"},
		{name: "an escaped string", id: `"a\u0062c"`, want: "abc"},
		{name: "a control character stays quoted", id: `"a\nb"`, want: `"a\nb"`},
		{name: "DEL stays quoted", id: `"a\u007fb"`, want: `"a\u007fb"`},
		{name: "null", id: `null`, want: "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idText(json.RawMessage(tt.id)); got != tt.want {
				t.Errorf("idText(%s) = %q, want %q", tt.id, got, tt.want)
			}
		})
	}
}

// FuzzParseMessages checks that the pre-parser never panics and that what
// it accepts is what the router relies on: at least one message, each a
// JSON-RPC 2.0 request, notification or response; and that what it refuses
// gets a parse error or an invalid request.
func FuzzParseMessages(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","method":"n"}]`,
		`[]`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"} {}`,
		`{"jsonrpc":"2.0","id":"\"","method":"p\u0069ng"}`,
		`[[[[{"a":"]]]]"}]]]]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, perr := parseMessages(body)
		if perr != nil {
			if perr.code != -32700 && perr.code != -32600 {
				t.Fatalf("error code %d", perr.code)
			}
			if msgs != nil {
				t.Fatalf("messages %+v with an error", msgs)
			}
			return
		}
		if len(msgs) == 0 {
			t.Fatal("no messages and no error")
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		for _, m := range msgs {
			if m.JSONRPC != "2.0" || (m.Method == "" && len(m.ID) == 0) {
				t.Fatalf("accepted %+v", m)
			}
		}
	})
}
