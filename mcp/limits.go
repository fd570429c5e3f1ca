package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// DefaultToolTimeout bounds a tool call when mcp.tool_timeout is not set.
const DefaultToolTimeout = 60 * time.Second

// ToolTimeout overrides mcp.tool_timeout for one tool.
type ToolTimeout struct {
	// Tool is the tool's name.
	Tool string `yaml:"tool" schema:"required"`
	// Timeout bounds one call of the tool.
	Timeout time.Duration `yaml:"timeout" schema:"required"`
}

// toolTimeoutMap returns the per-tool overrides as a map.
func toolTimeoutMap(list []ToolTimeout) map[string]time.Duration {
	m := make(map[string]time.Duration, len(list))
	for _, t := range list {
		m[t.Tool] = t.Timeout
	}
	return m
}

// toolTimeoutMiddleware bounds every tools/call by the tool's timeout
// (perTool, else def; zero means unbounded). When the time is up the
// handler's context is cancelled and the call ends at once with an error
// result saying so, even if the handler has not returned yet: a handler
// that ignores its context runs on in the background until it does, but
// the caller is no longer held. The handler runs on a [toolWorkers] worker,
// except a direct call's (see direct.go), which forwards the call with
// the context it is given and so returns when that is cancelled.
func toolTimeoutMiddleware(def time.Duration, perTool map[string]time.Duration, hook limits.Hook, logger *slog.Logger) sdk.Middleware {
	return toolTimeoutLookupMiddleware(def, func(tool string) (time.Duration, bool) {
		d, ok := perTool[tool]
		return d, ok
	}, hook, logger)
}

// toolTimeoutLookupMiddleware is toolTimeoutMiddleware with the timeouts
// of the tools that have their own looked up by perTool.
func toolTimeoutLookupMiddleware(def time.Duration, perTool func(tool string) (time.Duration, bool), hook limits.Hook, logger *slog.Logger) sdk.Middleware {
	if hook == nil {
		hook = func(context.Context, limits.Event) {}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	workers := newToolWorkers(toolWorkerIdle)
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			r, ok := req.(*sdk.CallToolRequest)
			if method != "tools/call" || !ok || r.Params == nil {
				return next(ctx, method, req)
			}
			if tasks.TaskID(ctx) != "" {
				// A task is bounded by its TTL, not the call timeout.
				return next(ctx, method, req)
			}
			name := r.Params.Name
			d, ok := perTool(name)
			if !ok {
				d = def
			}
			if d <= 0 {
				return next(ctx, method, req)
			}
			cctx, cancel := context.WithTimeoutCause(ctx, d, errToolTimeout)
			defer cancel()
			type outcome struct {
				res sdk.Result
				err error
			}
			var o outcome
			if _, direct := ctx.Value(directKey{}).(catalog.DirectHandler); direct {
				// A direct call's handler forwards the call with cctx and
				// returns when it is cancelled: it runs here.
				o.res, o.err = next(cctx, method, req)
			} else {
				done := make(chan outcome, 1) // buffered: a late handler never blocks
				workers.run(func() {
					res, err := next(cctx, method, req)
					done <- outcome{res, err}
				})
				select {
				case o = <-done:
				case <-cctx.Done():
				}
			}
			// The tool may have returned because of the deadline: either way
			// the caller learns it timed out, not some context error.
			if ctx.Err() == nil && context.Cause(cctx) == errToolTimeout {
				hook(ctx, limits.Event{Limit: limits.LimitToolTimeout, Tool: name})
				logger.WarnContext(ctx, "tool call timed out", "tool", name, "timeout", d)
				return &sdk.CallToolResult{
					IsError: true,
					Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(
						"The tool %q did not finish within %s and was cancelled. Try again later, or with a smaller request.", name, d)}},
				}, nil
			}
			if o.res == nil && o.err == nil {
				// The caller went away before the tool finished.
				return nil, ctx.Err()
			}
			return o.res, o.err
		}
	}
}

var errToolTimeout = errors.New("mcp: tool call timed out")
