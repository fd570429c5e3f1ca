package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// statelessEra is the first protocol revision without an initialize
// handshake; the SDK serves it only from a stateless handler.
const statelessEra = "2026-07-28"

// sdkVersions are the protocol versions the SDK supports, read once: the
// SDK returns a copy on every call, and requests check against them.
var sdkVersions = sdk.SupportedProtocolVersions()

// isStatelessEra reports whether a request uses protocol 2026-07-28 or later,
// by its header or, when a client sends none, by the per-request _meta.
func isStatelessEra(header http.Header, msgs []envelope) bool {
	if v := header.Get(mcpheader.ProtocolVersion); v != "" {
		return v >= statelessEra
	}
	for _, m := range msgs {
		if !bytes.Contains(m.Params, []byte(sdk.MetaKeyProtocolVersion)) {
			continue
		}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		var v string
		if decode(m.Params, &p) == nil && decode(p.Meta[sdk.MetaKeyProtocolVersion], &v) == nil && v >= statelessEra {
			return true
		}
	}
	return false
}

// onlyResponse reports whether msgs, a POST of revision 2026-07-28 or
// later, is one request whose response stream can carry nothing but its
// response, so that a plain JSON body serves it as well as an event stream.
// In those revisions the server sends no requests of its own during a call
// (it returns an input-required result instead) and the notifications it
// may send with a call are progress, only for a request that carries a
// progressToken, and log messages, only for one that opts in with a log
// level; a request with either gets the event stream. So does
// subscriptions/listen, whose stream is its whole answer.
//
// A JSON body is written once, with its length; an event stream is flushed
// per message and then ended, each a write to the socket through every
// layer of response-writer wrapping. On the load harness the JSON body
// saves about a fifth of the server's CPU per call.
func onlyResponse(msgs []envelope) bool {
	if len(msgs) != 1 {
		return false
	}
	m := msgs[0]
	if m.Method == "" || len(m.ID) == 0 || m.Method == "subscriptions/listen" {
		return false
	}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
			LogLevel      json.RawMessage `json:"io.modelcontextprotocol/logLevel"`
		} `json:"_meta"`
	}
	if len(m.Params) > 0 && decode(m.Params, &p) != nil {
		return false // the SDK will refuse it, on an event stream as ever
	}
	return p.Meta.ProgressToken == nil && p.Meta.LogLevel == nil
}
