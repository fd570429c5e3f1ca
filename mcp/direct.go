package mcp

import (
	"context"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/loopback"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Direct calls. A tools/call of the 2026-07-28 era to a tool whose call is
// forwarded to another server (an upstream's, over the direct hop) is
// served here, without the SDK's Streamable HTTP handler: the SDK would
// make a session for the one request, a JSON-RPC connection and its
// goroutines, and encode again a result that is passed on as it came —
// about as much CPU as the forwarding itself. The request is decoded into
// the SDK's request type and run through the same receiving middleware as
// every other call (telemetry and the audit line, the tool gate, tasks,
// requestState sealing, the tool timeout, recovery), around the tool's
// [catalog.DirectHandler]; the response is encoded by the SDK's jsonrpc
// package and written as a plain JSON body.
//
// Only a request the SDK would serve the same way takes this path: one
// request of exactly 2026-07-28 (header and _meta agree), JSON in, both
// media types accepted, the standard headers matching the body, client
// capabilities in its _meta, no progress token or log level (so nothing
// but the response can be owed, see [onlyResponse]), a tool that is not
// run as a Portcullis task. Anything else, and any request the SDK would
// refuse, goes to the SDK as before, which answers it as ever.

// serveDirect serves the single message m of a POST of body directly,
// and reports whether it did; when it did not, nothing was written. A
// batch, even of one message, is the SDK's.
func (h *Handler) serveDirect(w http.ResponseWriter, r *http.Request, body []byte, m envelope) bool {
	if h.direct == nil || m.Method != "tools/call" || len(m.ID) == 0 || isBatch(body) {
		return false
	}
	// The tool named in the header (which must match the body's, below)
	// decides first: most calls are of other tools.
	name := r.Header.Get(mcpheader.Name)
	if name == "" {
		return false
	}
	// An App's call by its upstream's name is a call of the listed tool
	// (apps.go); the header and the body still name the same.
	listed := name
	handler := h.direct.lookup(name)
	if handler == nil {
		if l, _ := h.direct.resolve(r.Context(), sdkauth.TokenInfoFromContext(r.Context()), name); l != "" {
			listed, handler = l, h.direct.lookup(l)
		}
	}
	if handler == nil || h.direct.support(listed).Support != tasks.SupportNone || !directHeaders(r.Header) || !sdkAcceptsHost(r) {
		return false
	}
	var params sdk.CallToolParamsRaw
	if len(m.Params) == 0 || decode(m.Params, &params) != nil || params.Name != name {
		return false
	}
	if v, _ := params.Meta[sdk.MetaKeyProtocolVersion].(string); v != statelessEra {
		return false
	}
	params.Name = strings.Clone(listed) // kept by metrics; the rest points into the body
	req := &sdk.CallToolRequest{
		Params: &params,
		Extra:  &sdk.RequestExtra{TokenInfo: sdkauth.TokenInfoFromContext(r.Context()), Header: r.Header},
	}
	// What the SDK requires of a 2026-07-28 request's _meta
	// (validateRequestMeta): it refuses the request otherwise.
	if _, ok := params.Meta[sdk.MetaKeyClientInfo]; ok {
		info := req.ClientInfo()
		if info == nil {
			return false
		}
		// Decoded once: the handler reads it again (as it is sent upstream).
		params.Meta[sdk.MetaKeyClientInfo] = info
	}
	if req.ClientCapabilities() == nil {
		return false
	}
	id, err := decodeID(m.ID)
	if err != nil {
		return false
	}
	r.Header.Set(RequestIDHeader, idText(m.ID))

	ctx := context.WithValue(r.Context(), directKey{}, handler)
	if listed != name {
		ctx = withCalledAs(ctx, strings.Clone(name))
	}
	res, err := h.direct.chain(ctx, "tools/call", req)
	resp := &jsonrpc.Response{ID: id}
	status := http.StatusOK
	if err == nil {
		resp.Result, err = h.direct.encodeResult(res)
	}
	if err != nil {
		jerr := wireError(err)
		resp.Result, resp.Error = nil, jerr
		status = errorStatus(jerr)
	}
	out, err := encodeResponse(resp)
	if err != nil {
		h.logger.ErrorContext(ctx, "encoding a direct call's response", "error", err)
		out, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}})
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	_, _ = w.Write(out)
	return true
}

// errorStatus is the HTTP status of a 2026-07-28 response with the error
// jerr, as the SDK sends it (SEP-2575): 404 for an unknown method, 400 for
// invalid params, an unsupported protocol version or a missing client
// capability, 200 for any other.
func errorStatus(jerr *jsonrpc.Error) int {
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, sdk.CodeUnsupportedProtocolVersion, sdk.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// directHeaders reports whether a request's headers are what the SDK
// serves a 2026-07-28 tools/call with: exactly that revision, no session,
// JSON in, both media types accepted, the Mcp-Method header (Mcp-Name is
// checked against the body by the caller).
func directHeaders(hd http.Header) bool {
	if hd.Get(mcpheader.ProtocolVersion) != statelessEra || hd.Get(mcpheader.SessionID) != "" || hd.Get(mcpheader.Method) != "tools/call" {
		return false
	}
	if ct := hd.Get("Content-Type"); ct != "application/json" {
		// As the SDK reads it (baseMediaType); the plain value, by far
		// the most common, needs no parsing.
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return false
		}
	}
	jsonOK, streamOK := false, false
	for _, v := range hd.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// sdkAcceptsHost reports whether the SDK's DNS rebinding protection
// lets the request through: on a loopback listener, only a loopback Host
// (as the SDK spells one: lower case).
func sdkAcceptsHost(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !loopback.Host(local.String()) {
		return true
	}
	return loopback.Host(r.Host) && r.Host == strings.ToLower(r.Host)
}

// decodeID is the JSON-RPC id of a request as the jsonrpc package holds it.
// raw is valid JSON (the body was parsed): a number is read as
// encoding/json reads one into an any, a float64.
func decodeID(raw json.RawMessage) (jsonrpc.ID, error) {
	if len(raw) > 0 && (raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9') {
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return jsonrpc.ID{}, err
		}
		return jsonrpc.MakeID(f)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return jsonrpc.ID{}, err
	}
	return jsonrpc.MakeID(v)
}

// encodeResponse encodes resp as [jsonrpc.EncodeMessage] does. A result
// with an id that is a number or a plain string is written around the
// result's bytes as they are: they come from json.Marshal, already
// compact, which EncodeMessage would check and copy again.
func encodeResponse(resp *jsonrpc.Response) ([]byte, error) {
	if resp.Error != nil || resp.Result == nil {
		return jsonrpc.EncodeMessage(resp)
	}
	var out []byte
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	switch id := resp.ID.Raw().(type) {
	case int64:
		out = make([]byte, 0, len(head)+20+len(mid)+len(resp.Result)+1)
		out = strconv.AppendInt(append(out, head...), id, 10)
	case string:
		if !plainString(id) {
			return jsonrpc.EncodeMessage(resp)
		}
		out = make([]byte, 0, len(head)+len(id)+2+len(mid)+len(resp.Result)+1)
		out = append(append(append(append(out, head...), '"'), id...), '"')
	default:
		return jsonrpc.EncodeMessage(resp)
	}
	out = append(append(out, mid...), resp.Result...)
	return append(out, '}'), nil
}

// plainString reports whether s needs no escaping in JSON, by any
// encoder: letters, digits and a few punctuation marks.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
