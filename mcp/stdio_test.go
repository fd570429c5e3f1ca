package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// initLine starts a session at version; initializedLine completes it.
func initLine(version string) string {
	return `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`
}

const initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

func callLine(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
}

// newStdioServer builds the core toolset's server with policy, plus a
// tool "ask" that asks the client a question (elicitation/create) and
// reports whether it got an answer.
func newStdioServer(t *testing.T, policy ToolPolicy, extra ...func(*catalog.Catalog)) *sdk.Server {
	t.Helper()
	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"core"}}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	catalog.AddTool(cat, &sdk.Tool{Name: "ask"}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		_, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "Name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		text := "answered"
		if err != nil {
			text = "no answer"
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
	})
	for _, add := range extra {
		add(cat)
	}
	return New(cat, Options{}, Deps{Transport: Stdio, Version: "test", Policy: policy}).SDK()
}

// frame is one JSON-RPC message written to stdout.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// output is what ServeStdio wrote: one entry per line, a batch reply being
// several frames on one line.
type output [][]frame

// parseOutput parses out, failing the test on a line that is not JSON-RPC.
func parseOutput(t *testing.T, out string) output {
	t.Helper()
	var o output
	for line := range strings.Lines(out) {
		var batch []frame
		if err := json.Unmarshal([]byte(line), &batch); err == nil {
			o = append(o, batch)
			continue
		}
		var f frame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("stdout line is not JSON (%v): %q", err, line)
		}
		o = append(o, []frame{f})
	}
	return o
}

// reply returns the line number and the reply with the given raw id.
func (o output) reply(id string) (int, *frame) {
	for i, line := range o {
		for j, f := range line {
			if string(f.ID) == id && f.Method == "" {
				return i, &line[j]
			}
		}
	}
	return -1, nil
}

// replies returns every reply with the given raw id.
func (o output) replies(id string) []frame {
	var fs []frame
	for _, line := range o {
		for _, f := range line {
			if string(f.ID) == id && f.Method == "" {
				fs = append(fs, f)
			}
		}
	}
	return fs
}

// serveInput runs ServeStdio over input until it returns, as a client
// that writes everything and closes its end does, and returns its output.
func serveInput(t *testing.T, server *sdk.Server, input string, maxLine int) output {
	t.Helper()
	var out syncbuf.Buffer
	if err := serveStdio(t.Context(), server, strings.NewReader(input), &out, maxLine); err != nil {
		t.Fatalf("ServeStdio = %v, want nil at the end of input", err)
	}
	return parseOutput(t, out.String())
}

// wantError checks that o has exactly one reply with id, an error with code.
func wantError(t *testing.T, o output, id string, code int) *frame {
	t.Helper()
	fs := o.replies(id)
	if len(fs) != 1 || fs[0].Error == nil || fs[0].Error.Code != code {
		t.Fatalf("replies with id %s = %+v, want one error %d; output %+v", id, fs, code, o)
	}
	return &fs[0]
}

// wantResult checks that the reply with id is a result containing want.
func wantResult(t *testing.T, o output, id, want string) int {
	t.Helper()
	i, f := o.reply(id)
	if f == nil || f.Error != nil || !strings.Contains(string(f.Result), want) {
		t.Fatalf("reply with id %s = %+v, want a result containing %q; output %+v", id, f, want, o)
	}
	return i
}

func TestStdioInput(t *testing.T) {
	start := initLine("2025-06-18") + "\n" + initializedLine + "\n"
	tests := []struct {
		name    string
		input   string
		maxLine int
		check   func(t *testing.T, o output)
	}{
		{
			name:  "malformed line then a request",
			input: start + "{not json\n" + callLine(2, "PingME") + "\n",
			check: func(t *testing.T, o output) {
				bad, _ := o.reply("null")
				wantError(t, o, "null", -32700)
				if ok := wantResult(t, o, "2", "BISMILLAH"); bad > ok {
					t.Errorf("the parse error (line %d) comes after the reply to the request read after it (line %d)", bad, ok)
				}
			},
		},
		{
			name: "JSON that is not JSON-RPC",
			input: start +
				`{"id":7,"method":"tools/list"}` + "\n" + // no jsonrpc member: its id is answered
				`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}` + "\n" + // an id no reply can carry
				"42\n" +
				callLine(2, "PingME") + "\n",
			check: func(t *testing.T, o output) {
				wantError(t, o, "7", -32600)
				nulls := o.replies("null")
				if len(nulls) != 2 || nulls[0].Error.Code != -32600 || nulls[1].Error.Code != -32600 {
					t.Errorf("replies with a null id = %+v, want two -32600", nulls)
				}
				wantResult(t, o, "2", "BISMILLAH")
			},
		},
		{
			name:  "blank lines",
			input: "\n  \n" + start + "\r\n\t\n" + callLine(2, "PingME") + "\n\n",
			check: func(t *testing.T, o output) {
				wantResult(t, o, "2", "BISMILLAH")
				if len(o) != 2 {
					t.Errorf("%d lines on stdout, want 2 (initialize and the call): %+v", len(o), o)
				}
			},
		},
		{
			name:    "over-long line",
			maxLine: 512,
			input: start +
				`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 600) + `"}}}` + "\n" +
				callLine(2, "PingME") + "\n",
			check: func(t *testing.T, o output) {
				if f := wantError(t, o, "null", -32600); !strings.Contains(f.Error.Message, "512 bytes") {
					t.Errorf("message %q does not name the limit", f.Error.Message)
				}
				if _, f := o.reply("9"); f != nil {
					t.Errorf("the over-long request was served: %+v", f)
				}
				wantResult(t, o, "2", "BISMILLAH")
			},
		},
		{
			name:  "request then end of input",
			input: start + callLine(2, "PingME") + "\n",
			check: func(t *testing.T, o output) { wantResult(t, o, "2", "BISMILLAH") },
		},
		{
			name:  "last line without a newline",
			input: start + callLine(2, "PingME"),
			check: func(t *testing.T, o output) { wantResult(t, o, "2", "BISMILLAH") },
		},
		{
			name: "many requests then end of input",
			input: start + func() string {
				var b strings.Builder
				for id := 2; id < 102; id++ {
					b.WriteString(callLine(id, "PingME") + "\n")
				}
				return b.String()
			}(),
			check: func(t *testing.T, o output) {
				for id := 2; id < 102; id++ {
					wantResult(t, o, fmt.Sprint(id), "BISMILLAH")
				}
			},
		},
		{
			name:  "call to the client pending at end of input",
			input: start + callLine(2, "ask") + "\n",
			check: func(t *testing.T, o output) { wantResult(t, o, "2", "no answer") },
		},
		{
			name: "batch",
			input: initLine("2025-03-26") + "\n" + initializedLine + "\n" +
				`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},` + callLine(3, "PingME") + "]\n",
			check: func(t *testing.T, o output) {
				i := wantResult(t, o, "2", "{}")
				if j := wantResult(t, o, "3", "BISMILLAH"); i != j || len(o[i]) != 2 {
					t.Errorf("batch replies on lines %d and %d (%d frames), want both in one array: %+v", i, j, len(o[i]), o)
				}
			},
		},
		{
			name: "invalid batches",
			input: initLine("2025-03-26") + "\n" + initializedLine + "\n" +
				"[]\n" +
				`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"1.0","id":3,"method":"ping"}]` + "\n" +
				`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}]` + "\n" +
				callLine(5, "PingME") + "\n",
			check: func(t *testing.T, o output) {
				nulls := o.replies("null")
				if len(nulls) != 3 {
					t.Errorf("replies with a null id = %+v, want three -32600", nulls)
				}
				for _, f := range nulls {
					if f.Error == nil || f.Error.Code != -32600 {
						t.Errorf("reply %+v, want -32600", f)
					}
				}
				if fs := slices.Concat(o.replies("2"), o.replies("4")); len(fs) != 0 {
					t.Errorf("an invalid batch was served: %+v", fs)
				}
				wantResult(t, o, "5", "BISMILLAH")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, serveInput(t, newStdioServer(t, nil), tt.input, tt.maxLine))
		})
	}
}

// TestStdioSlowCallAtEOF checks that a call still running when the input
// ends is answered before ServeStdio returns, and that a request reusing
// its id meanwhile is refused rather than answered under no id.
func TestStdioSlowCallAtEOF(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		server := newStdioServer(t, nil, func(cat *catalog.Catalog) {
			catalog.AddTool(cat, &sdk.Tool{Name: "slow"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
				close(started)
				<-release
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "slow done"}}}, nil, nil
			})
		})
		input := initLine("2025-06-18") + "\n" + initializedLine + "\n" + callLine(2, "slow") + "\n" + callLine(2, "PingME") + "\n"
		var out syncbuf.Buffer
		done := make(chan error, 1)
		go func() { done <- serveStdio(t.Context(), server, strings.NewReader(input), &out, 0) }()
		<-started
		synctest.Wait() // the end of input has been read as far as it can be
		select {
		case err := <-done:
			t.Fatalf("ServeStdio returned (%v) with a call in flight", err)
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("ServeStdio = %v, want nil", err)
		}
		o := parseOutput(t, out.String())
		wantResult(t, o, "2", "slow done")
		if n := len(o.replies("2")); n != 1 {
			t.Errorf("%d replies with id 2, want 1: %+v", n, o)
		}
		if f := wantError(t, o, "null", -32600); !strings.Contains(f.Error.Message, "already in use") {
			t.Errorf("reused id refused with %q, want a message saying it is in use", f.Error.Message)
		}
	})
}

// TestStdioBatchAfter20250618 checks that a batch sent after initialize
// negotiated a version without batches is refused and serving goes on.
func TestStdioBatchAfter20250618(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveStdio(t.Context(), newStdioServer(t, nil), inR, outW, 0)
		outW.Close()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		var buf []byte
		for {
			b := make([]byte, 64<<10)
			n, err := outR.Read(b)
			buf = append(buf, b[:n]...)
			for {
				i := strings.IndexByte(string(buf), '\n')
				if i < 0 {
					break
				}
				lines <- string(buf[:i])
				buf = buf[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() output {
		t.Helper()
		line, ok := <-lines
		if !ok {
			t.Fatal("stdout ended: the server stopped")
		}
		return parseOutput(t, line+"\n")
	}
	send(initLine("2025-06-18"))
	wantResult(t, next(), `"init"`, "2025-06-18")
	send(initializedLine)
	send(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	wantError(t, next(), "null", -32600)
	send(callLine(3, "PingME"))
	wantResult(t, next(), "3", "BISMILLAH")
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio = %v, want nil", err)
	}
}

// TestStdioPolicy checks that a tool the policy hides from callers without
// a token is neither listed nor callable on stdio, nor named in hints.
func TestStdioPolicy(t *testing.T) {
	hideEcho := func(info *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
		if tool == "echo" && info == nil {
			return false, []string{"echo:use"}, true
		}
		return true, nil, false
	}
	input := initLine("2025-06-18") + "\n" + initializedLine + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ech","arguments":{"text":"hi"}}}` + "\n"
	tests := []struct {
		name     string
		policy   ToolPolicy
		wantEcho bool
	}{
		{name: "hidden", policy: hideEcho},
		{name: "no policy", policy: nil, wantEcho: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := serveInput(t, newStdioServer(t, tt.policy), input, 0)
			_, list := o.reply("2")
			if list == nil {
				t.Fatalf("no tools/list reply: %+v", o)
			}
			var res sdk.ListToolsResult
			if err := json.Unmarshal(list.Result, &res); err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(res.Tools, func(tool *sdk.Tool) bool { return tool.Name == "echo" })
			if listed != tt.wantEcho || !slices.ContainsFunc(res.Tools, func(tool *sdk.Tool) bool { return tool.Name == "PingME" }) {
				t.Errorf("tools/list lists echo: %v, want %v (and PingME always): %s", listed, tt.wantEcho, list.Result)
			}
			if tt.wantEcho {
				wantResult(t, o, "3", "hi")
				return
			}
			called := wantError(t, o, "3", -32602)
			typo := wantError(t, o, "4", -32602)
			if !strings.HasPrefix(called.Error.Message, `Unknown tool: "echo".`) || strings.Count(called.Error.Message, "echo") != 1 {
				t.Errorf("hidden tool's error = %q, want the unknown-tool error that names no hidden tool", called.Error.Message)
			}
			if !strings.HasPrefix(typo.Error.Message, `Unknown tool: "ech".`) || strings.Contains(typo.Error.Message, "echo") {
				t.Errorf("typo's error = %q, want the unknown-tool error that names no hidden tool", typo.Error.Message)
			}
		})
	}
}

// FuzzLineReader checks the stdio line framer against bytes.Split: the
// same lines in the same order, each over-long line reported in its place
// as errLineTooLong, and never a line over the limit.
func FuzzLineReader(f *testing.F) {
	for _, s := range []string{
		"", "\n", "\n\n\n", "a", "a\nb", "a\n\nb\n", "a\r\nb\r\n",
		strings.Repeat("x", 40) + "\nshort\n" + strings.Repeat("y", 40),
		"exactly8\nnine1234\n",
	} {
		f.Add([]byte(s), uint8(8))
		f.Add([]byte(s), uint8(8|0x80)) // one byte per Read
	}
	const tooLong = "\x00too long"
	f.Fuzz(func(t *testing.T, input []byte, arg uint8) {
		limit := int(arg&0x3f) + 1
		var want []string
		parts := bytes.Split(input, []byte("\n"))
		if len(parts[len(parts)-1]) == 0 {
			parts = parts[:len(parts)-1] // input empty or ending with a newline
		}
		for _, p := range parts {
			if len(p) > limit {
				want = append(want, tooLong)
			} else {
				want = append(want, string(p))
			}
		}
		var r io.Reader = bytes.NewReader(input)
		if arg&0x80 != 0 {
			r = iotest.OneByteReader(r)
		}
		l := newLineReader(r, limit)
		var got []string
		for range len(input) + 2 {
			line, err := l.next()
			if errors.Is(err, io.EOF) {
				break
			}
			switch {
			case errors.Is(err, errLineTooLong):
				got = append(got, tooLong)
			case err != nil:
				t.Fatalf("next: %v", err)
			case len(line) > limit:
				t.Fatalf("line of %d bytes over the limit of %d", len(line), limit)
			default:
				got = append(got, string(line))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d, input %q:\ngot  %q\nwant %q", limit, input, got, want)
		}
	})
}
