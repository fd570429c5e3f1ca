package toolsets

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestPingME(t *testing.T) {
	cs, _ := connect(t, newCatalog(t, Options{}, Deps{}), nil)

	ping := listedTool(t, cs, "PingME")
	schema, _ := json.Marshal(ping.InputSchema)
	var s struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil || s.Type != "object" || len(s.Properties) != 0 || len(s.Required) != 0 {
		t.Errorf("PingME input schema = %s, want an empty object schema", schema)
	}

	for _, args := range []any{nil, map[string]any{}} {
		got := call(t, cs, "PingME", args)
		if got.IsError || len(got.Content) != 1 || resultText(got) != "BISMILLAH" {
			t.Errorf("PingME(%v) = isError %v, content %v; want one text block BISMILLAH", args, got.IsError, resultText(got))
		}
	}
}

func TestEcho(t *testing.T) {
	cs, _ := connect(t, newCatalog(t, Options{}, Deps{}), nil)
	tests := []struct {
		name    string
		text    string
		want    string
		wantErr bool
	}{
		{name: "plain", text: "hello, world", want: "hello, world"},
		{name: "empty", text: "", want: ""},
		{name: "at the limit", text: strings.Repeat("é", maxEchoLen), want: strings.Repeat("é", maxEchoLen)},
		{name: "too long", text: strings.Repeat("a", maxEchoLen+1), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, cs, "echo", map[string]any{"text": tt.text})
			if res.IsError != tt.wantErr {
				t.Fatalf("isError = %v, want %v (%s)", res.IsError, tt.wantErr, resultText(res))
			}
			if !tt.wantErr && resultText(res) != tt.want {
				t.Errorf("echo = %q, want %q", resultText(res), tt.want)
			}
		})
	}
}

func TestCalculator(t *testing.T) {
	cs, _ := connect(t, newCatalog(t, Options{}, Deps{}), nil)
	tests := []struct {
		name    string
		args    map[string]any
		want    float64
		wantErr string // substring of the tool error; empty for success
	}{
		{name: "add", args: map[string]any{"operation": "add", "a": 2, "b": 3.5}, want: 5.5},
		{name: "subtract", args: map[string]any{"operation": "subtract", "a": 2, "b": 5}, want: -3},
		{name: "multiply", args: map[string]any{"operation": "multiply", "a": -4, "b": 2.5}, want: -10},
		{name: "divide", args: map[string]any{"operation": "divide", "a": 1, "b": 4}, want: 0.25},
		{name: "divide by zero", args: map[string]any{"operation": "divide", "a": 1, "b": 0}, wantErr: "cannot divide by zero"},
		{name: "overflow", args: map[string]any{"operation": "multiply", "a": 1e308, "b": 1e308}, wantErr: "too large"},
		{name: "unknown operation", args: map[string]any{"operation": "modulo", "a": 1, "b": 2}, wantErr: "operation"},
		{name: "missing operand", args: map[string]any{"operation": "add", "a": 1}, wantErr: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, cs, "calculator", tt.args)
			if tt.wantErr != "" {
				if !res.IsError || !strings.Contains(resultText(res), tt.wantErr) {
					t.Fatalf("got isError %v %q, want a tool error containing %q", res.IsError, resultText(res), tt.wantErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error: %s", resultText(res))
			}
			if got := structured(t, res)["result"]; got != tt.want {
				t.Errorf("result = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTime(t *testing.T) {
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	cs, _ := connect(t, newCatalog(t, Options{}, Deps{Now: func() time.Time { return now }}), nil)
	tests := []struct {
		name     string
		timezone string
		want     map[string]any
		wantErr  string
	}{
		{name: "default is UTC", want: map[string]any{"time": "2026-03-14T15:09:26Z", "timezone": "UTC", "utc_offset": "+00:00", "weekday": "Saturday"}},
		{name: "paris", timezone: "Europe/Paris", want: map[string]any{"time": "2026-03-14T16:09:26+01:00", "timezone": "Europe/Paris", "utc_offset": "+01:00"}},
		{name: "new york in DST", timezone: "America/New_York", want: map[string]any{"time": "2026-03-14T11:09:26-04:00"}},
		{name: "unknown zone", timezone: "Mars/Olympus_Mons", wantErr: `unknown time zone "Mars/Olympus_Mons"`},
		{name: "server local zone refused", timezone: "Local", wantErr: "unknown time zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{}
			if tt.timezone != "" {
				args["timezone"] = tt.timezone
			}
			res := call(t, cs, "time", args)
			if tt.wantErr != "" {
				if !res.IsError || !strings.Contains(resultText(res), tt.wantErr) {
					t.Fatalf("got isError %v %q, want a tool error containing %q", res.IsError, resultText(res), tt.wantErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error: %s", resultText(res))
			}
			got := structured(t, res)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
			if got["unix"] != float64(now.Unix()) {
				t.Errorf("unix = %v, want %d", got["unix"], now.Unix())
			}
		})
	}
}

func TestWhoamiWithoutIdentity(t *testing.T) {
	cs, _ := connect(t, newCatalog(t, Options{}, Deps{}), nil)
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "no verified identity") {
		t.Fatalf("whoami without auth = %+v; want a readable tool error", res)
	}
}

func TestWhoamiReportsTheCaller(t *testing.T) {
	expiry := time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)
	who := Caller{Subject: "alice", Issuer: "https://idp.example", ClientID: "claude", Scopes: []string{"mcp"}, Expiry: expiry}
	deps := Deps{Caller: func(*sdk.CallToolRequest) (Caller, bool) { return who, true }}
	cs, _ := connect(t, newCatalog(t, Options{}, deps), nil)
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"client_id":"claude","expires_at":"2026-11-25T18:00:00Z","issuer":"https://idp.example","roles":[],"scopes":["mcp"],"subject":"alice"}`
	if got := res.Content[0].(*sdk.TextContent).Text; res.IsError || got != want {
		t.Errorf("whoami = %s (IsError %v), want %s", got, res.IsError, want)
	}
}
