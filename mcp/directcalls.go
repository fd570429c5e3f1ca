package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// What a direct call runs (see direct.go for which requests take that
// path): the tool's direct handler inside the server's receiving
// middleware, and the encoding of its result.

// directCalls serves direct calls: the catalog's direct handlers, run
// through the server's receiving middleware.
type directCalls struct {
	lookup  func(name string) catalog.DirectHandler
	support func(name string) tasks.ToolTasks
	// resolve finds the tool an App's call names by its upstream's name
	// (see [toolGate.resolve]).
	resolve func(ctx context.Context, info *sdkauth.TokenInfo, name string) (listed string, ambiguous []string)
	chain   sdk.MethodHandler
	impl    *sdk.Implementation // the server's, named in each result
}

// newDirectCalls returns the direct calls of the tools lookup finds (by
// the name callers call them, as support answers for them, or by a name
// gate resolves to one), run through mws (outermost first, as the SDK
// server applies them), by the server impl.
func newDirectCalls(lookup func(name string) catalog.DirectHandler, support func(name string) tasks.ToolTasks, gate *toolGate, mws []sdk.Middleware, impl *sdk.Implementation) *directCalls {
	var h sdk.MethodHandler = callDirect
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return &directCalls{lookup: lookup, support: support, resolve: gate.resolve, chain: h, impl: impl}
}

type directKey struct{}

// callDirect is the method handler at the end of the chain: the tool's
// direct handler, and what the SDK server does with a tool's result
// (callTool, handleMultiRoundTripResult) before it is sent.
func callDirect(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
	handler, _ := ctx.Value(directKey{}).(catalog.DirectHandler)
	r, ok := req.(*sdk.CallToolRequest)
	if handler == nil || !ok || method != "tools/call" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	res, err := handler(ctx, r)
	if err != nil || res == nil {
		return res, err
	}
	if c, ok := res.(*sdk.CallToolResult); ok {
		asks := c.InputRequests != nil
		if asks && (len(c.Content) > 0 || c.StructuredContent != nil) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
		}
		if c.Content == nil && !asks && !c.NeedsInput() {
			cc := *c
			cc.Content = []sdk.Content{}
			res = &cc
		}
	}
	return res, nil
}

// encodeResult encodes the result of a direct call as the SDK server
// sends one to a 2026-07-28 client: its _meta naming the server that made
// it (SEP-2575: the result's own name, else this server's), with a
// resultType. A tool's result asks for input exactly when it has input
// requests (handleMultiRoundTripResult), whatever resultType it was
// decoded with; any other result keeps its own, "complete" if none. A
// result passed on as it came that names its server and has a resultType
// — the upstream's usual answer — is sent as it is.
func (d *directCalls) encodeResult(res sdk.Result) (json.RawMessage, error) {
	raw, passed := res.(*catalog.RawToolResult)
	if passed && raw.NamesServer && raw.HasResultType {
		return raw.JSON, nil
	}
	var b json.RawMessage
	switch c, ok := res.(*sdk.CallToolResult); {
	case passed:
		b = raw.JSON
	case ok:
		// The result as the SDK server sends it (annotateServerInfo):
		// _meta names this server unless it names one. A result of the
		// SDK server's tool handling already says whether it is complete
		// (resultType, last in its encoding); any other is completed
		// below.
		cc := *c
		if _, named := c.Meta[sdk.MetaKeyServerInfo]; !named {
			cc.Meta = make(sdk.Meta, len(c.Meta)+1)
			maps.Copy(cc.Meta, c.Meta)
			cc.Meta[sdk.MetaKeyServerInfo] = d.impl
		}
		var err error
		if b, err = json.Marshal(&cc); err != nil {
			return nil, err
		}
		want := `"resultType":"complete"}`
		if c.InputRequests != nil {
			want = `"resultType":"input_required"}`
		}
		if bytes.HasSuffix(b, []byte(want)) {
			return b, nil
		}
	default:
		var err error
		if b, err = json.Marshal(res); err != nil {
			return nil, err
		}
	}
	var fields, meta map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	if m := fields["_meta"]; m != nil {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, err
		}
	}
	if _, ok := meta[sdk.MetaKeyServerInfo]; !ok {
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		var err error
		if meta[sdk.MetaKeyServerInfo], err = json.Marshal(d.impl); err != nil {
			return nil, err
		}
		if fields["_meta"], err = json.Marshal(meta); err != nil {
			return nil, err
		}
	}
	if c, ok := res.(*sdk.CallToolResult); ok {
		fields["resultType"] = json.RawMessage(`"complete"`)
		if c.InputRequests != nil {
			fields["resultType"] = json.RawMessage(`"input_required"`)
		}
	} else if _, ok := fields["resultType"]; !ok {
		fields["resultType"] = json.RawMessage(`"complete"`)
	}
	return json.Marshal(fields)
}

// wireError is the JSON-RPC error a handler's error is sent as, as the
// SDK's connection sends it: a JSON-RPC error as it is, any other error's
// text with the code of a JSON-RPC error it wraps.
func wireError(err error) *jsonrpc.Error {
	var jerr *jsonrpc.Error
	if errors.As(err, &jerr) {
		if jerr == err {
			return jerr
		}
		return &jsonrpc.Error{Code: jerr.Code, Message: err.Error()}
	}
	return &jsonrpc.Error{Message: err.Error()}
}
