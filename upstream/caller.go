//lint:file-ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; callers and upstreams of every revision still use them, and this file passes on what the caller declared

package upstream

import (
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// The caller's request, not Portcullis's. On the 2026-07-28 era every
// request names its client in its _meta: the client's capabilities, its
// name and version, and the log level it wants. An upstream on that era
// decides by them what it may ask of the client (a tool that needs
// sampling refuses a client without it, -32021). A call Portcullis sends
// upstream on a caller's behalf carries the caller's, so that the upstream
// refuses what the caller cannot do exactly as it would directly; the SDK
// client fills in Portcullis's own only where a key is absent, and leaves
// the ones set here alone. Nothing else of the caller's _meta goes
// upstream, and never its token.

// callerMeta returns m, the _meta of a request sent upstream on sess for
// the caller's request req (whose own _meta is reqMeta), with the caller's
// client capabilities, client info and log level when sess speaks the
// 2026-07-28 era. An upstream of an older era reads the client's from the
// session, which is Portcullis's (see setLogLevel for the log level).
func callerMeta[P sdk.Params](m sdk.Meta, sess *sdk.ClientSession, req *sdk.ServerRequest[P], reqMeta sdk.Meta) sdk.Meta {
	if req == nil || protocolVersion(sess) < statelessEra {
		return m
	}
	if m == nil {
		m = sdk.Meta{}
	}
	m[sdk.MetaKeyClientCapabilities] = forwardedCapabilities(req.ClientCapabilities())
	if info := req.ClientInfo(); info != nil {
		m[sdk.MetaKeyClientInfo] = info
	}
	if lvl := logLevel(reqMeta, req.Session); lvl != "" {
		m[sdk.MetaKeyLogLevel] = lvl
	}
	return m
}

// forwardedCapabilities is the clientCapabilities object sent upstream for
// a caller that declared c (nil: nothing): its sampling, elicitation and
// roots as declared, whose requests Portcullis passes on to the caller
// (relay.go, mrtr.go), and the MCP Apps extension as declared, whose
// Apps Portcullis serves. Other extensions and experimental capabilities
// are left out: an extension Portcullis does not know could change what
// the upstream answers into something Portcullis cannot carry back. (The
// tasks extension is added for a call that may become a remote task, see
// tasks.go.) The object is built as a map: the SDK's
// ClientCapabilities encodes an empty "roots" even when the client has
// none.
func forwardedCapabilities(c *sdk.ClientCapabilities) map[string]any {
	caps := map[string]any{}
	if c == nil {
		return caps
	}
	if c.Sampling != nil {
		caps["sampling"] = c.Sampling
	}
	if c.Elicitation != nil {
		caps["elicitation"] = c.Elicitation
	}
	if c.RootsV2 != nil {
		caps["roots"] = c.RootsV2
	}
	if ui, ok := c.Extensions[mcpapps.ExtensionID]; ok {
		caps["extensions"] = map[string]any{mcpapps.ExtensionID: ui}
	}
	return caps
}

// logLevel is the log level a request sent to an upstream on the
// 2026-07-28 era carries in its _meta: the caller's own, when it speaks
// that era and set one in reqMeta; "debug" for a caller of an older era,
// whose session level filters the messages (see log); none otherwise.
func logLevel(reqMeta sdk.Meta, caller *sdk.ServerSession) string {
	if v, ok := reqMeta[sdk.MetaKeyLogLevel].(string); ok {
		return v
	}
	if caller != nil && callerProtocol(caller) < statelessEra {
		return "debug"
	}
	return ""
}

// passedError returns the upstream's error when the caller gets it as
// it is, data included, as it would directly, not an error result: the
// upstream refused the request because the client lacks a capability
// (-32021), or needs the user to complete URL-mode elicitations first
// (-32042).
func passedError(err error) (*jsonrpc.Error, bool) {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && (rpcErr.Code == sdk.CodeMissingRequiredClientCapabilities || rpcErr.Code == sdk.CodeURLElicitationRequired) {
		return rpcErr, true
	}
	return nil, false
}

// urlElicitations returns the elicitations of a -32042 error.
func urlElicitations(rpcErr *jsonrpc.Error) []*sdk.ElicitParams {
	var data struct {
		Elicitations []*sdk.ElicitParams `json:"elicitations"`
	}
	if rpcErr.Code != sdk.CodeURLElicitationRequired || json.Unmarshal(rpcErr.Data, &data) != nil {
		return nil
	}
	return data.Elicitations
}

// protocolVersion is the protocol version the session s negotiated.
func protocolVersion(s *sdk.ClientSession) string {
	if r := s.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// callerProtocol is the protocol version the caller's session speaks.
func callerProtocol(ss *sdk.ServerSession) string {
	if p := ss.InitializeParams(); p != nil {
		return p.ProtocolVersion
	}
	return ""
}

// statelessEra is the first protocol version in which a server cannot
// send requests to the client during a call.
const statelessEra = "2026-07-28"

// passesInput reports whether input requests go to the caller of session
// ss in the result: it speaks 2026-07-28 or later.
func passesInput(ss *sdk.ServerSession) bool {
	return ss != nil && callerProtocol(ss) >= statelessEra
}
