package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// answerWait bounds how long withinCallUpstream waits for the answer to
// its request within a call before it gives up and says so.
const answerWait = 5 * time.Second

// withinParams are the params of the requests withinCallUpstream sends.
var withinParams = map[string]json.RawMessage{
	"elicitation/create":     json.RawMessage(`{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`),
	"sampling/createMessage": json.RawMessage(`{"maxTokens":5,"messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`),
	"roots/list":             json.RawMessage(`{}`),
	"ping":                   json.RawMessage(`{}`),
}

// withinCallUpstream serves a 2026-07-28 upstream over HTTP that breaks
// the rule of its era: its tools "ask" and "askbound" send, on the call's
// event stream, a request of the method their argument "method" names,
// wait for the client's answer (POSTed, as Streamable HTTP answers are),
// and return what it was: "error <code>: <message>", "result", or "no
// answer". Calls of "askbound", whose argument "region" goes into a
// header, take the SDK client; calls of "ask" the direct hop.
func withinCallUpstream(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "within"}, nil)
	method := map[string]any{"type": "string"}
	notReached := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, errors.New("the test's handler answers the call")
	}
	s.AddTool(&sdk.Tool{Name: "ask", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"method": method}}}, notReached)
	s.AddTool(&sdk.Tool{Name: "askbound", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"method": method,
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
	}}}, notReached)
	answers := make(chan *jsonrpc.Response, 1)
	srv := serveHTTP(t, s, nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			switch m, _ := jsonrpc.DecodeMessage(body); m := m.(type) {
			case *jsonrpc.Response:
				select {
				case answers <- m:
				default:
				}
				w.WriteHeader(http.StatusAccepted)
				return
			case *jsonrpc.Request:
				var p struct {
					Name      string `json:"name"`
					Arguments struct {
						Method string `json:"method"`
					} `json:"arguments"`
				}
				if m.Method == "tools/call" && json.Unmarshal(m.Params, &p) == nil && (p.Name == "ask" || p.Name == "askbound") {
					askWithin(t, w, r, m.ID, p.Arguments.Method, answers)
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		})
	})
	return srv.URL
}

// askWithin answers the tools/call id with an event stream: a request of
// method, then, once the client answered it, the call's result.
func askWithin(t *testing.T, w http.ResponseWriter, r *http.Request, id jsonrpc.ID, method string, answers <-chan *jsonrpc.Response) {
	event := func(msg jsonrpc.Message) {
		data, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Error(err)
			return
		}
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
		w.(http.Flusher).Flush()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	askID, _ := jsonrpc.MakeID("within-1")
	event(&jsonrpc.Request{ID: askID, Method: method, Params: withinParams[method]})
	timer := time.NewTimer(answerWait)
	defer timer.Stop()
	got := "no answer"
	select {
	case a := <-answers:
		var rpcErr *jsonrpc.Error
		switch {
		case a.ID != askID:
			got = fmt.Sprintf("an answer to %v", a.ID)
		case errors.As(a.Error, &rpcErr):
			got = fmt.Sprintf("error %d: %s", rpcErr.Code, rpcErr.Message)
		case a.Error != nil:
			got = "error " + a.Error.Error()
		default:
			got = "result"
		}
	case <-timer.C:
	case <-r.Context().Done():
		return
	}
	res, err := json.Marshal(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: got}}})
	if err != nil {
		t.Error(err)
		return
	}
	event(&jsonrpc.Response{ID: id, Result: res})
}

// A 2026-07-28 upstream asks for input in its result, never by a request
// within a call. One that sends a request anyway has it refused with the
// same JSON-RPC error whichever sender the call took, the direct hop or
// the SDK client, and whatever the caller could have answered: the
// request never reaches the caller, and the call goes on.
func TestRequestsWithinACallRefusedByBothSenders(t *testing.T) {
	tests := []struct {
		name      string
		tool      string // "ask" takes the hop, "askbound" the SDK client
		callerEra string
		method    string
	}{
		{name: "elicitation by the hop", tool: "ask", callerEra: "2025-11-25", method: "elicitation/create"},
		{name: "elicitation by the SDK client", tool: "askbound", callerEra: "2025-11-25", method: "elicitation/create"},
		{name: "sampling by the hop", tool: "ask", callerEra: "2025-11-25", method: "sampling/createMessage"},
		{name: "sampling by the SDK client", tool: "askbound", callerEra: "2025-11-25", method: "sampling/createMessage"},
		{name: "roots by the hop, caller on 2026-07-28", tool: "ask", callerEra: "2026-07-28", method: "roots/list"},
		{name: "roots by the SDK client, caller on 2026-07-28", tool: "askbound", callerEra: "2026-07-28", method: "roots/list"},
		{name: "ping by the hop", tool: "ask", callerEra: "2025-11-25", method: "ping"},
		{name: "ping by the SDK client", tool: "askbound", callerEra: "2025-11-25", method: "ping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFront(t)
			u := startAt(t, f, withinCallUpstream(t)).ups[0]
			if got, want := takesHop(u, tt.tool), tt.tool == "ask"; got != want {
				t.Fatalf("a call of %s takes the hop: %v, want %v", tt.tool, got, want)
			}
			// The caller would answer each of these requests: it is
			// never asked.
			var asked, elicited atomic.Int32
			cs := f.caller(t, answering(&elicited), tt.callerEra, func(next sdk.MethodHandler) sdk.MethodHandler {
				return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
					if !strings.HasPrefix(method, "notifications/") {
						asked.Add(1)
					}
					return next(ctx, method, req)
				}
			})
			sent := u.conn.links.get(u.sup.session()).hop.sent.Load()
			res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_" + tt.tool, Arguments: map[string]any{"method": tt.method}})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("error %d: portcullis: %s not passed to the client: the upstream speaks protocol 2026-07-28", jsonrpc.CodeInvalidRequest, tt.method)
			if res.IsError || !strings.HasPrefix(text(res), want) {
				t.Errorf("the upstream got %q (error result %v), want %q…", text(res), res.IsError, want)
			}
			if n := asked.Load(); n != 0 {
				t.Errorf("the caller was asked %d times, want 0", n)
			}
			if n, want := u.conn.links.get(u.sup.session()).hop.sent.Load()-sent, map[bool]int64{true: 1}[tt.tool == "ask"]; n != want {
				t.Errorf("the hop sent %d requests, want %d", n, want)
			}
		})
	}
}
