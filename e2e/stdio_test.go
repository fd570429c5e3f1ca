//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// TestStdioSDKClient drives `portcullis stdio` with the official Go SDK
// client, as a desktop host would, with the weather tool pointed at a fake
// Open-Meteo.
func TestStdioSDKClient(t *testing.T) {
	up := newFakeOpenMeteo(t, nil)
	cmd := exec.Command(binary, "stdio")
	cmd.Env = serverEnv(
		"PORTCULLIS_TOOLS_TOOLSETS=core,workshop",
		"PORTCULLIS_TOOLS_WEATHER_BASE_URL="+up.URL,
		"PORTCULLIS_TOOLS_WEATHER_GEOCODING_URL="+up.URL,
	)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("portcullis stdio stderr:\n%s", stderr)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "portcullis-e2e", Version: "0.0.1"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v", err)
	}
	defer cs.Close()

	tools := map[string]*sdk.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools[tool.Name] = tool
	}
	for _, name := range []string{"PingME", "echo", "calculator", "time", "weather", "country_info"} {
		if tools[name] == nil {
			t.Errorf("tools/list has no %q; it has %v", name, keys(tools))
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	call := func(t *testing.T, name string, args map[string]any) (text string, isError bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("tools/call %s %v: %v", name, args, err)
		}
		return resultText(res), res.IsError
	}

	t.Run("calculator", func(t *testing.T) {
		tool := tools["calculator"]
		props := schemaOf(t, tool)
		switch {
		case props.has("operation", "a", "b"):
			op := props.enumPick("operation", "multiply", "mul", "times", "*")
			text, isErr := call(t, "calculator", map[string]any{"operation": op, "a": 6, "b": 7})
			if isErr || !strings.Contains(text, "42") {
				t.Errorf("calculator 6 %s 7 = %q (isError %v), want 42", op, text, isErr)
			}
			div := props.enumPick("operation", "divide", "div", "/")
			text, isErr = call(t, "calculator", map[string]any{"operation": div, "a": 1, "b": 0})
			if !isErr || text == "" {
				t.Errorf("calculator 1 %s 0 = %q (isError %v), want an error result the model can read", div, text, isErr)
			}
		case props.has("expression"):
			text, isErr := call(t, "calculator", map[string]any{"expression": "6*7"})
			if isErr || !strings.Contains(text, "42") {
				t.Errorf("calculator 6*7 = %q (isError %v), want 42", text, isErr)
			}
		default:
			t.Fatalf("calculator's input schema has neither operation/a/b nor expression: %s", props.raw)
		}
	})

	t.Run("country_info", func(t *testing.T) {
		arg := schemaOf(t, tools["country_info"]).stringArg(t, "country", "name", "query")
		text, isErr := call(t, "country_info", map[string]any{arg: "France"})
		if isErr || !strings.Contains(text, "France") || !strings.Contains(text, "Paris") {
			t.Errorf("country_info France = %q (isError %v), want France with its capital Paris", text, isErr)
		}
	})

	t.Run("weather", func(t *testing.T) {
		arg := schemaOf(t, tools["weather"]).stringArg(t, "city", "location", "name", "place")
		text, isErr := call(t, "weather", map[string]any{arg: "Paris"})
		if isErr || !strings.Contains(text, fakeParisTemperature) {
			t.Errorf("weather Paris = %q (isError %v), want the upstream's %s", text, isErr, fakeParisTemperature)
		}
		reqs := up.Requests()
		var searched, forecast bool
		for _, r := range reqs {
			searched = searched || strings.HasPrefix(r, "/v1/search?") && strings.Contains(r, "name=Paris")
			forecast = forecast || strings.HasPrefix(r, "/v1/forecast?") && strings.Contains(r, "latitude=48.85") &&
				strings.Contains(r, "longitude=2.34") && strings.Contains(r, "current=")
		}
		if !searched || !forecast {
			t.Errorf("upstream requests = %q, want a geocoding search for Paris then a forecast at its coordinates", reqs)
		}

		text, isErr = call(t, "weather", map[string]any{arg: "Nowhereville"})
		if !isErr || text == "" {
			t.Errorf("weather Nowhereville = %q (isError %v), want an error result saying the city was not found", text, isErr)
		}
	})
}

// TestStdioRawNDJSON writes newline-delimited JSON-RPC to `portcullis
// stdio` by hand and checks that stdout carries nothing but JSON-RPC 2.0
// frames, one a line, while the logs go to stderr.
func TestStdioRawNDJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "stdio")
	cmd.Env = serverEnv("PORTCULLIS_TOOLS_TOOLSETS=core")
	cmd.WaitDelay = 5 * time.Second
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("portcullis stdio stderr:\n%s", stderr)
		}
	})

	var (
		mu    sync.Mutex
		lines []string
	)
	frames := make(chan rpcMessage, 1024) // never full: the server sends a handful
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			var m rpcMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				frames <- m
			}
		}
	}()

	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write %s: %v", line, err)
		}
	}
	// await returns the response with the given raw id, skipping other
	// frames (notifications such as logs or list_changed).
	await := func(id string) rpcMessage {
		t.Helper()
		for {
			select {
			case m := <-frames:
				if string(m.ID) == id && m.Method == "" {
					return m
				}
			case <-readDone:
				// Frames read before stdout closed are still in the channel.
				for {
					select {
					case m := <-frames:
						if string(m.ID) == id && m.Method == "" {
							return m
						}
					default:
						t.Fatalf("no response with id %s: stdout closed (the server exited)", id)
					}
				}
			case <-ctx.Done():
				t.Fatalf("no response with id %s: %v", id, ctx.Err())
			}
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-ndjson","version":"1.0"}}}`)
	if m := await("1"); m.Error != nil || !bytes.Contains(m.Result, []byte(`"tools"`)) {
		t.Errorf("initialize: result %s, error %+v; want capabilities.tools", m.Result, m.Error)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := await("2"); m.Error != nil || !bytes.Contains(m.Result, []byte(`"PingME"`)) {
		t.Errorf("tools/list: result %s, error %+v; want PingME", m.Result, m.Error)
	}
	// A line that is not JSON is answered with a parse error under a null
	// id, and the server keeps serving.
	send(`this is not json {`)
	if m := await("null"); m.Error == nil || m.Error.Code != -32700 {
		t.Errorf("garbage line: result %s, error %+v; want error -32700 (parse error)", m.Result, m.Error)
	}
	// A string id, as some clients send, must come back as the same string.
	send(`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"PingME","arguments":{}}}`)
	if m := await(`"three"`); m.Error != nil || !bytes.Contains(m.Result, []byte(`BISMILLAH`)) {
		t.Errorf("tools/call PingME: result %s, error %+v; want BISMILLAH", m.Result, m.Error)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"no/such/method"}`)
	if m := await("4"); m.Error == nil || m.Error.Code != -32601 {
		t.Errorf("no/such/method: result %s, error %+v; want error -32601 (method not found)", m.Result, m.Error)
	}

	// End of input ends the server, cleanly.
	stdin.Close()
	select {
	case <-readDone:
	case <-ctx.Done():
		t.Fatal("stdout not closed after stdin was")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("portcullis stdio exited with %v after stdin closed, want 0", err)
	}

	mu.Lock()
	defer mu.Unlock()
	for i, line := range lines {
		if err := checkFrame(line); err != nil {
			t.Errorf("stdout line %d is not a JSON-RPC 2.0 frame (%v): %s", i+1, err, line)
		}
	}
	var logLines int
	for line := range strings.Lines(stderr.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] != nil {
			logLines++
		}
	}
	if logLines == 0 {
		t.Errorf("no JSON log line on stderr; stderr:\n%s", stderr)
	}
}

// TestStdioEOFAfterRequests pipes requests into `portcullis stdio` and
// closes its stdin right after, as `printf '…\n' | portcullis stdio` does:
// every request read is answered before the process exits 0, and bad lines
// among them are answered too.
func TestStdioEOFAfterRequests(t *testing.T) {
	const (
		initialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"printf","version":"1.0"}}}`
		initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	)
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`, id)
	}
	tests := []struct {
		name      string
		lines     []string
		wantCalls []int
		wantParse bool
	}{
		{name: "one request", lines: []string{initialize, initialized, call(2)}, wantCalls: []int{2}},
		{name: "garbage among requests", lines: []string{"garbage", initialize, initialized, "{]", call(2), call(3)}, wantCalls: []int{2, 3}, wantParse: true},
		{name: "many requests", lines: append([]string{initialize, initialized}, func() []string {
			var ls []string
			for id := 2; id < 52; id++ {
				ls = append(ls, call(id))
			}
			return ls
		}()...), wantCalls: func() []int {
			var ids []int
			for id := 2; id < 52; id++ {
				ids = append(ids, id)
			}
			return ids
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "stdio")
			cmd.Env = serverEnv("PORTCULLIS_TOOLS_TOOLSETS=core")
			cmd.Stdin = strings.NewReader(strings.Join(tt.lines, "\n") + "\n")
			stderr := &syncbuf.Buffer{}
			cmd.Stderr = stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("portcullis stdio exited with %v, want 0\nstderr:\n%s", err, stderr)
			}
			replies := map[string]rpcMessage{}
			parseErrors := 0
			for line := range strings.Lines(string(out)) {
				if err := checkFrame(line); err != nil {
					t.Errorf("stdout line is not a JSON-RPC 2.0 frame (%v): %s", err, line)
					continue
				}
				var m rpcMessage
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatal(err)
				}
				if string(m.ID) == "null" && m.Error != nil && m.Error.Code == -32700 {
					parseErrors++
				}
				replies[string(m.ID)] = m
			}
			if m, ok := replies["1"]; !ok || m.Error != nil {
				t.Errorf("initialize reply %+v (present: %v), want a result", m, ok)
			}
			for _, id := range tt.wantCalls {
				if m := replies[fmt.Sprint(id)]; m.Error != nil || !bytes.Contains(m.Result, []byte("BISMILLAH")) {
					t.Errorf("reply to call %d: result %s, error %+v; want BISMILLAH", id, m.Result, m.Error)
				}
			}
			if tt.wantParse && parseErrors != 2 {
				t.Errorf("%d parse-error replies, want 2 (one per garbage line)", parseErrors)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr)
			}
		})
	}
}

// checkFrame reports why line is not one JSON-RPC 2.0 request,
// notification or response.
func checkFrame(line string) error {
	var f map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &f); err != nil {
		return err
	}
	if string(f["jsonrpc"]) != `"2.0"` {
		return fmt.Errorf("jsonrpc is %s", f["jsonrpc"])
	}
	_, hasID := f["id"]
	_, hasMethod := f["method"]
	_, hasResult := f["result"]
	_, hasError := f["error"]
	switch {
	case hasMethod && !hasResult && !hasError:
		return nil // request or notification
	case hasID && hasResult != hasError && !hasMethod:
		return nil // response
	}
	return fmt.Errorf("neither a request, a notification nor a response")
}

// resultText is the text of a tool result as a model would read it: its
// text blocks and its structured content.
func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteString("\n")
		}
	}
	if res.StructuredContent != nil {
		sc, _ := json.Marshal(res.StructuredContent)
		b.Write(sc)
	}
	return b.String()
}

// inputSchema is the part of a tool's input schema the tests look at.
type inputSchema struct {
	Properties map[string]struct {
		Type any   `json:"type"`
		Enum []any `json:"enum"`
	} `json:"properties"`
	Required []string `json:"required"`
	raw      []byte
}

func schemaOf(t *testing.T, tool *sdk.Tool) inputSchema {
	t.Helper()
	raw, err := json.Marshal(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	s := inputSchema{raw: raw}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s input schema: %v: %s", tool.Name, err, raw)
	}
	return s
}

func (s inputSchema) has(names ...string) bool {
	for _, n := range names {
		if _, ok := s.Properties[n]; !ok {
			return false
		}
	}
	return true
}

// enumPick returns the first of choices that prop's enum allows, or
// choices[0] when prop has no enum.
func (s inputSchema) enumPick(prop string, choices ...string) string {
	enum := s.Properties[prop].Enum
	if len(enum) == 0 {
		return choices[0]
	}
	for _, c := range choices {
		if slices.Contains(enum, any(c)) {
			return c
		}
	}
	return choices[0]
}

// stringArg returns the name of the property to pass a string in: the
// first of preferred the schema has, else its only required property.
func (s inputSchema) stringArg(t *testing.T, preferred ...string) string {
	t.Helper()
	for _, p := range preferred {
		if s.has(p) {
			return p
		}
	}
	if len(s.Required) == 1 {
		return s.Required[0]
	}
	t.Fatalf("input schema has none of %v and not exactly one required property: %s", preferred, s.raw)
	return ""
}

func keys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
