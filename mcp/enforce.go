package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
)

// Where the visibility rule (visibility.go) is enforced: in the HTTP
// handler before the SDK sees a request (gateTools), and in the SDK's
// receiving middleware, outermost first: an App's name resolved to the
// listed tool (resolveToolsMiddleware, see apps.go), the gate, and
// tools/list filtered.

// gateTools answers the request as a call of an unknown tool, and returns
// false, when a tool it names is one the caller does not see: the tool of
// any tools/call request in the body, or the Mcp-Name of a 2026-07-28
// tools/call. The answer depends on the name only, never on whether the
// tool exists, and comes after the checks that every request gets (body
// size, JSON syntax), so that nothing earlier tells the two apart.
// Notifications (no id) get no answer; the SDK middleware refuses them.
// A batch does not come here (see ServeHTTP).
func (h *Handler) gateTools(w http.ResponseWriter, r *http.Request, msgs []envelope) bool {
	info := sdkauth.TokenInfoFromContext(r.Context())
	deny := func(id json.RawMessage, tool string) bool {
		stepUp, jerr := h.gate.check(r.Context(), info, tool)
		switch {
		case stepUp != nil:
			h.stepUp(w, r, stepUp)
			return false
		case jerr != nil:
			jsonrpcerr.Write(w, http.StatusOK, id, jerr.Code, jerr.Message)
			return false
		}
		return true
	}
	if tool := headerToolName(r.Header); tool != "" && len(msgs) == 1 {
		if len(msgs[0].ID) == 0 {
			return true
		}
		// The SDK holds a single message to its headers: a body naming
		// another tool than Mcp-Name is its to refuse, with 400 and
		// HeaderMismatch whichever tools exist, not the gate's as an
		// unknown tool.
		var p struct {
			Name string `json:"name"`
		}
		if msgs[0].Method == "tools/call" && (decode(msgs[0].Params, &p) != nil || p.Name != tool) {
			return true
		}
		return deny(msgs[0].ID, tool)
	}
	for _, m := range msgs {
		if m.Method != "tools/call" || len(m.ID) == 0 {
			continue
		}
		var p struct {
			Name string `json:"name"`
		}
		// A malformed params object is the SDK's to reject.
		if decode(m.Params, &p) != nil {
			continue
		}
		if !deny(m.ID, p.Name) {
			return false
		}
	}
	return true
}

// gateToolsMiddleware answers a tools/call of a tool the caller does not
// see (unregistered, or refused by the policy) with the unknown-tool error,
// before the SDK looks the tool up, and one the policy's rules refuse,
// on the caller or on the arguments (as view, nil for none, sets them),
// with the refusal naming the rule.
func gateToolsMiddleware(gate *toolGate, view *catalog.ServerView) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			r, ok := req.(*sdk.CallToolRequest)
			if !ok || r.Params == nil {
				return next(ctx, method, req)
			}
			var info *sdkauth.TokenInfo
			if extra := req.GetExtra(); extra != nil {
				info = extra.TokenInfo
			}
			stepUp, jerr := gate.check(ctx, info, r.Params.Name)
			if jerr != nil {
				return nil, jerr
			}
			if stepUp != nil {
				// The HTTP handler answers with the step-up 403 before the
				// SDK sees the call; this is the second line.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "Forbidden: the token lacks the scopes this tool needs: " + strings.Join(stepUp, " ") + ". Ask the user to authorize them."}
			}
			if jerr := gate.arguments(ctx, info, view, r.Params.Name, r.Params.Arguments); jerr != nil {
				return nil, jerr
			}
			return next(ctx, method, req)
		}
	}
}

// filterToolsMiddleware removes from tools/list the tools the caller does
// not see, and marks such a list private so that no shared cache serves it
// to another caller.
func filterToolsMiddleware(gate *toolGate) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		if !gate.filters() {
			return next
		}
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			list, ok := res.(*sdk.ListToolsResult)
			if err != nil || !ok {
				return res, err
			}
			var info *sdkauth.TokenInfo
			if extra := req.GetExtra(); extra != nil {
				info = extra.TokenInfo
			}
			visible := list.Tools[:0:0]
			for _, t := range list.Tools {
				if gate.sees(ctx, info, t.Name) {
					visible = append(visible, t)
				}
			}
			filtered := *list
			filtered.Tools = visible
			filtered.CacheScope = "private"
			return &filtered, nil
		}
	}
}

// resolveToolsMiddleware makes a tools/call of a name that stands for one
// tool (see [toolGate.resolve]) a call of that tool by its listed name,
// and remembers the name used ([CalledAs]). It belongs outermost. A name
// that stands for several is left as it is, for the gate to refuse.
func resolveToolsMiddleware(gate *toolGate) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		if gate.apps == nil {
			return next
		}
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			r, ok := req.(*sdk.CallToolRequest)
			if !ok || r.Params == nil {
				return resolveResource(ctx, gate.apps, next, method, req)
			}
			var info *sdkauth.TokenInfo
			if extra := req.GetExtra(); extra != nil {
				info = extra.TokenInfo
			}
			listed, _ := gate.resolve(ctx, info, r.Params.Name)
			if listed == "" {
				return next(ctx, method, req)
			}
			params := *r.Params
			params.Name = listed
			call := *r
			call.Params = &params
			return next(withCalledAs(ctx, r.Params.Name), method, &call)
		}
	}
}
