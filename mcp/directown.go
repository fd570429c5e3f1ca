package mcp

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Direct calls of the server's own tools. A 2026-07-28 tools/call of a
// catalog tool that uses nothing of its session (catalog.Tool.NoSession:
// the built-in toolsets) is a direct call too (direct.go): the SDK's
// stateless handler would make a session for the one request, with a
// JSON-RPC connection, a goroutine for its reader and one for the call
// (whose stack grows to the call's depth every time), and pass the
// request and the response between them over channels. That is most of
// what a call of such a tool costs besides auth and telemetry.
//
// The tool is run by the SDK server itself, as on every other path: the
// SDK's handling of a tools/call below the receiving middleware (the tool
// looked up by name, its arguments validated against its input schema,
// defaults applied, the typed handler called, its output validated and
// put in the result), captured when the server is built (ownTools.capture).
// What that handling asks of a session is its negotiated protocol version
// (a 2026-07-28 result carries its resultType); the requests get one
// session of the server's own, made once, on a transport that carries
// nothing and ends at once: no goroutine waits on it. A tool that logs,
// reports progress or asks the client anything through its session would
// find no client there (its writes fail): such a tool is never NoSession,
// and its calls go to the SDK's handler as before.

// ownTools runs the server's own tools for direct calls.
type ownTools struct {
	server *sdk.Server
	// inner is the SDK server's method handler below the receiving
	// middleware of the program (set by capture, before that is added).
	inner sdk.MethodHandler

	once    sync.Once
	session *sdk.ServerSession
	err     error
}

// capture is a receiving middleware that only records the handler it
// wraps. Added to a new server before any other, it records the SDK's own
// method handling; it adds nothing to a request's path.
func (o *ownTools) capture(next sdk.MethodHandler) sdk.MethodHandler {
	o.inner = next
	return next
}

// call is the direct handler of every own tool: the SDK server's handling
// of a tools/call, on the server's session for direct calls.
func (o *ownTools) call(ctx context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
	o.once.Do(o.connect)
	if o.err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	r := *req
	r.Session = o.session
	return o.inner(ctx, "tools/call", &r)
}

// connect makes the server's session for direct calls: initialized, of
// protocol 2026-07-28, on a transport that carries nothing.
func (o *ownTools) connect() {
	o.session, o.err = o.server.Connect(context.Background(), endedTransport{}, &sdk.ServerSessionOptions{State: &sdk.ServerSessionState{
		InitializeParams:          &sdk.InitializeParams{ProtocolVersion: statelessEra, Capabilities: &sdk.ClientCapabilities{}},
		InitializedParams:         &sdk.InitializedParams{},
		NegotiatedProtocolVersion: statelessEra,
	}})
}

// endedTransport is the transport of the direct calls' session: it has
// ended before anything arrives, and nothing can be written to it. The
// session keeps what it was made with, which is all a tools/call of a
// NoSession tool asks of it.
type endedTransport struct{}

func (endedTransport) Connect(context.Context) (sdk.Connection, error) { return endedConn{}, nil }

type endedConn struct{}

var errNoClient = errors.New("mcp: a direct call's session has no client to send to")

func (endedConn) Read(context.Context) (jsonrpc.Message, error) { return nil, io.EOF }
func (endedConn) Write(context.Context, jsonrpc.Message) error  { return errNoClient }
func (endedConn) Close() error                                  { return nil }
func (endedConn) SessionID() string                             { return "" }
