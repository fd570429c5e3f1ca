package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
)

// maxErrorMessage bounds an upstream's error message passed to the caller.
const maxErrorMessage = 512

// kindOf names the kind of a request's failure err ("" for none), its
// context ctx.
func kindOf(ctx context.Context, err error) string {
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &rpcErr):
		return KindProtocol
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return KindTimeout
	case ctx.Err() != nil:
		return KindCanceled
	}
	return KindTransport
}

// streamEnded reports whether err is the SDK client's answer to a call
// whose response stream an HTTP upstream closed without a response and
// without an event id to resume from: that call is lost, but the session
// and the other calls in flight on it are fine, and reconnecting would
// end those too. (The SDK has no sentinel error for it.)
func streamEnded(err error) bool {
	return strings.Contains(err.Error(), "request terminated without response")
}

// failures word the failed requests to one upstream, named name, for
// their callers, and log those that the caller is not told all about.
type failures struct {
	name   string
	logger *slog.Logger
}

// errorResult is what the caller reads when a call did not reach the
// upstream's tool or did not come back. It names the upstream, never its
// address or internals; the upstream's own JSON-RPC error message is
// passed on, as the upstream meant the caller to read it.
func (f failures) errorResult(kind string, err error) *sdk.CallToolResult {
	var msg string
	switch kind {
	case KindUnavailable:
		switch {
		case errors.Is(err, errNoPrincipal):
			msg = fmt.Sprintf("upstream: the MCP server %q runs one process per caller and serves only callers with a token.", f.name)
		case errors.Is(err, errNoToken):
			msg = fmt.Sprintf("upstream: the MCP server %q is called with a token exchanged for the caller's, and this call came without a token.", f.name)
		case errors.As(err, new(*exchangeError)):
			f.logger.Warn("upstream: token exchange failed", "error", err)
			server, code := exchangeFailure(err)
			msg = fmt.Sprintf("upstream: %s did not issue a token for the MCP server %q to this caller%s, so the call was not sent.", server, f.name, code)
		case errors.Is(err, errNoAccount):
			msg = fmt.Sprintf("upstream: the MCP server %q is called as each caller's own connected account, and this call came without a signed-in caller.", f.name)
		case errors.As(err, new(*accountError)):
			f.logger.Warn("upstream: a connected account could not be used", "error", err)
			msg = fmt.Sprintf("upstream: your connected account at the MCP server %q could not be used right now, so the call was not sent. Retry in a moment.", f.name)
		case errors.Is(err, errPoolFull):
			msg = fmt.Sprintf("upstream: the MCP server %q runs one process per caller, and as many as allowed are busy. Retry in a moment.", f.name)
		case err != nil && !errors.Is(err, errNotConnected):
			f.logger.Warn("upstream: a caller's process did not start", "error", err)
			msg = fmt.Sprintf("upstream: the MCP server %q could not be started for this call. Retry in a few seconds.", f.name)
		default:
			msg = fmt.Sprintf("upstream: the MCP server %q is not connected right now; Portcullis is reconnecting to it. Retry in a few seconds.", f.name)
		}
	case KindTimeout:
		msg = fmt.Sprintf("upstream: the MCP server %q did not answer in time.", f.name)
	case KindCanceled:
		msg = fmt.Sprintf("upstream: the call to the MCP server %q was cancelled.", f.name)
	case KindProtocol:
		var rpcErr *jsonrpc.Error
		errors.As(err, &rpcErr)
		msg = fmt.Sprintf("upstream: the MCP server %q refused the call: %s", f.name, truncateN(rpcErr.Message, maxErrorMessage))
	case KindTransport:
		if streamEnded(err) {
			// The session is kept (see classify): nothing reconnects.
			msg = fmt.Sprintf("upstream: the MCP server %q closed the call's response stream before the result and gave no event id to resume it from (it keeps no event store), so the result cannot be fetched; the tool may have run. The next call goes to the same session.", f.name)
			break
		}
		fallthrough
	default:
		f.logger.Warn("upstream: a call failed", "error", err)
		msg = fmt.Sprintf("upstream: the connection to the MCP server %q broke during the call (it may have crashed or sent an invalid message); Portcullis is reconnecting. Retry in a few seconds.", f.name)
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// exchangeFailure names the server that refused a token for the caller
// ("the authorization server" unless the error says which) and is
// ` (<OAuth error code>)` of its answer, or nothing without one.
func exchangeFailure(err error) (server, code string) {
	server = "the authorization server"
	var xe *tokenexchange.Error
	if errors.As(err, &xe) {
		if xe.Server != "" {
			server = xe.Server
		}
		if xe.Code != "" {
			code = " (" + xe.Code + ")"
		}
	}
	return server, code
}

// requestError is the JSON-RPC error for a failed resources/read or
// prompts/get, which have no error result.
func (f failures) requestError(kind string, err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	res := f.errorResult(kind, err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: res.Content[0].(*sdk.TextContent).Text}
}

// errNoPrincipal is the answer of a per_principal upstream to a call
// without a caller identity (auth off, or stdio).
var errNoPrincipal = errors.New("upstream: a per_principal upstream serves only callers with a token")

// errNoToken is the answer of an upstream whose token is got for each
// caller (token_exchange, jwt_bearer, id_jag) to a call whose caller's
// token is not at hand.
var errNoToken = errors.New("upstream: an upstream with a token for each caller serves only callers with a token")

// errNoAccount is the answer of an authorization_code upstream to a call
// without a caller, or when no Accounts hook was given.
var errNoAccount = errors.New("upstream: an authorization_code upstream serves only signed-in callers")

// accountError is a failure to read or refresh the caller's connected
// account, other than its absence.
type accountError struct{ err error }

func (e *accountError) Error() string { return "upstream: connected account: " + e.err.Error() }

func (e *accountError) Unwrap() error { return e.err }

// exchangeError is a failed token exchange (or other grant) for the
// caller.
type exchangeError struct{ err error }

func (e *exchangeError) Error() string { return "upstream: token exchange: " + e.err.Error() }

func (e *exchangeError) Unwrap() error { return e.err }

// errPoolFull is the answer when every per-principal process is busy.
var errPoolFull = errors.New("upstream: every per_principal process is busy")

// errNotConnected is sessionFor's error while the shared session is down.
var errNotConnected = errors.New("upstream: not connected")

// truncate shortens a name the upstream sent for a log line.
func truncate(s string) string { return truncateN(s, 128) }

// truncateN is s cut to its first n bytes, with an ellipsis, if longer.
func truncateN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
