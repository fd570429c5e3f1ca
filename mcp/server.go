package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/tools"
)

// ServerConfig is what [NewServer] needs besides the tool catalog.
type ServerConfig struct {
	// Version is the server version reported to clients.
	Version string
	// Instructions are sent to clients in the initialize result.
	Instructions string
	// Sealer seals MRTR requestState. Nil disables multi-round-trip state:
	// a handler that returns requestState then fails the call, and any
	// requestState a client sends is rejected. The rounds of a task keep
	// their state in the server and need no sealing.
	Sealer *Sealer
	// Policy decides which tools a caller may see and call. Nil allows
	// every tool to everyone. A tool the policy refuses a caller is hidden
	// from it: a call answers as an unknown tool (see [Denial]).
	Policy ToolPolicy
	// OnDenied receives every tools/call answered as an unknown tool. Nil
	// means none.
	OnDenied DenialHook
	// Logger receives server-side errors (panics, sealing failures).
	// Nil means discard.
	Logger *slog.Logger
	// Middleware is added to the server's receiving middleware, outermost
	// first, before Portcullis's own (so it sees what clients see).
	Middleware []sdk.Middleware
	// ToolTimeout bounds each tools/call (see [Options.ToolTimeout]); zero
	// means unbounded. ToolTimeouts overrides it per tool.
	ToolTimeout  time.Duration
	ToolTimeouts []ToolTimeout
	// LimitHook receives an event for every tool call cut off by its
	// timeout. Nil means none.
	LimitHook limits.Hook
	// Tasks enables the tasks extension (io.modelcontextprotocol/tasks):
	// the server advertises it and runs calls of task-supporting tools as
	// tasks. A zero TaskConfig leaves it off.
	Tasks TaskConfig
}

// NewServer builds the SDK server that offers everything in cat.
//
// Besides the catalog's tools, resources and prompts, the server gets
// receiving middleware that recovers panicking handlers into error results,
// answers a call of a tool the caller may not see as an unknown tool (naming
// the nearest tool it may see), and seals and opens MRTR requestState.
func NewServer(cat *tools.Catalog, cfg ServerConfig) *sdk.Server {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := &sdk.ServerOptions{
		Instructions: cfg.Instructions,
		Logger:       sdkLogger(logger),
	}
	if cfg.Tasks.Manager != nil {
		opts.Capabilities = &sdk.ServerCapabilities{
			//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
			Logging:    &sdk.LoggingCapabilities{},
			Extensions: map[string]any{tasks.ExtensionID: map[string]any{}},
		}
	}
	cat.Apply(opts)
	s := sdk.NewServer(&sdk.Implementation{
		Name:    "portcullis",
		Title:   "Portcullis",
		Version: cfg.Version,
	}, opts)
	cat.Register(s)

	// Applied right to left: recover is innermost so that it turns a panic
	// into a result the sealing and suggestion layers see like any other.
	gate := newToolGate(cfg.Policy, cat, cfg.OnDenied)
	mws := append([]sdk.Middleware{}, cfg.Middleware...)
	mws = append(mws,
		gateToolsMiddleware(gate),
		filterToolsMiddleware(cfg.Policy),
		taskMiddleware(cfg.Tasks),
		sealStateMiddleware(cfg.Sealer, logger),
		toolTimeoutMiddleware(cfg.ToolTimeout, toolTimeoutMap(cfg.ToolTimeouts), cfg.LimitHook, logger),
		recoverMiddleware(logger),
	)
	s.AddReceivingMiddleware(mws...)
	return s
}

// recoverMiddleware turns a panic in a handler into an error: a tool result
// with IsError for tools/call, an internal JSON-RPC error otherwise. The
// process lives on.
func recoverMiddleware(logger *slog.Logger) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (res sdk.Result, err error) {
			defer func() {
				p := recover()
				if p == nil {
					return
				}
				target := ""
				if r, ok := req.(*sdk.CallToolRequest); ok && r.Params != nil {
					target = r.Params.Name
				}
				logger.ErrorContext(ctx, "handler panicked",
					"mcp.method.name", method, "target", target,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if method == "tools/call" && tasks.TaskID(ctx) == "" {
					res = &sdk.CallToolResult{
						IsError: true,
						Content: []sdk.Content{&sdk.TextContent{
							Text: fmt.Sprintf("The tool %q failed with an internal error. This is a bug in the server, not in your request; retrying will likely fail the same way.", target),
						}},
					}
					err = nil
					return
				}
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}()
			return next(ctx, method, req)
		}
	}
}

// gateToolsMiddleware answers a tools/call of a tool the caller does not
// see (unregistered, or refused by the policy) with the unknown-tool error,
// before the SDK looks the tool up.
func gateToolsMiddleware(gate *toolGate) sdk.Middleware {
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
			if jerr := gate.check(ctx, info, r.Params.Name); jerr != nil {
				return nil, jerr
			}
			return next(ctx, method, req)
		}
	}
}

// sealStateMiddleware seals the requestState of outgoing MRTR results and
// opens the requestState of incoming retries, so handlers only ever see the
// plain state they produced. A state that does not open is rejected with
// -32602 before the handler runs.
//
// State is bound to the caller's identity (the UserID of the request's
// token info, which also binds legacy sessions), so one caller cannot replay
// another's state.
func sealStateMiddleware(sealer *Sealer, logger *slog.Logger) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			state, digest, ok := mrtrState(method, req)
			if !ok || tasks.TaskID(ctx) != "" {
				// A task's rounds keep their state in the server (see
				// tasks.Input), where nobody can alter it: sealing it would
				// only make it expire while the client takes its time.
				return next(ctx, method, req)
			}
			sub := ""
			if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
				sub = extra.TokenInfo.UserID
			}
			if *state != "" {
				if sealer == nil {
					return nil, invalidStateError()
				}
				plain, err := sealer.Open(*state, digest(), sub)
				if err != nil {
					return nil, invalidStateError()
				}
				*state = plain
			}
			res, err := next(ctx, method, req)
			if err != nil || res == nil {
				return res, err
			}
			out := resultState(res)
			if out == nil || *out == "" {
				return res, err
			}
			if sealer == nil {
				logger.ErrorContext(ctx, "handler returned requestState but no sealing key is configured", "mcp.method.name", method)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
			sealed, serr := sealer.Seal(*out, digest(), sub)
			if serr != nil {
				logger.ErrorContext(ctx, "sealing requestState", "error", serr)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
			*out = sealed
			return res, nil
		}
	}
}

// ToolPolicy reports whether the caller with token info may call tool, and
// if not, the scopes it would need. info is nil when auth is off.
type ToolPolicy func(info *sdkauth.TokenInfo, tool string) (allowed bool, needed []string)

// filterToolsMiddleware removes from tools/list the tools the caller may not
// call, and marks such a list private so that no shared cache serves it to
// another caller.
func filterToolsMiddleware(policy ToolPolicy) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		if policy == nil {
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
				if ok, _ := policy(info, t.Name); ok {
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

func invalidStateError() error {
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidParams,
		Message: "Invalid requestState: it was altered, has expired, or belongs to another request. Retry the original request without requestState.",
	}
}

// mrtrState returns a pointer to the requestState of a request that can take
// part in a multi-round trip, and the digest that binds it. The digest is
// computed only when asked for (a state arrived or is handed out), from the
// request as it was before the handler ran: most calls need none.
func mrtrState(method string, req sdk.Request) (state *string, digest func() []byte, ok bool) {
	var name string
	var args []byte
	switch r := req.(type) {
	case *sdk.CallToolRequest:
		if r.Params == nil {
			return nil, nil, false
		}
		state, name, args = &r.Params.RequestState, r.Params.Name, bytes.Clone(r.Params.Arguments)
	case *sdk.GetPromptRequest:
		if r.Params == nil {
			return nil, nil, false
		}
		args, _ = json.Marshal(r.Params.Arguments)
		state, name = &r.Params.RequestState, r.Params.Name
	case *sdk.ReadResourceRequest:
		if r.Params == nil {
			return nil, nil, false
		}
		state, name = &r.Params.RequestState, r.Params.URI
	default:
		return nil, nil, false
	}
	var d []byte
	return state, func() []byte {
		if d == nil {
			d = requestDigest(method, name, args)
		}
		return d
	}, true
}

func resultState(res sdk.Result) *string {
	switch r := res.(type) {
	case *sdk.CallToolResult:
		return &r.RequestState
	case *sdk.GetPromptResult:
		return &r.RequestState
	case *sdk.ReadResourceResult:
		return &r.RequestState
	}
	return nil
}
