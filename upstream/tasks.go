package upstream

import (
	"context"
	"encoding/json"
	"fmt"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks pass through. An upstream on 2026-07-28 that offers the tasks
// extension is told, in a tools/call of a caller that declared the
// extension (and may be answered with a task, see tasks.AcceptsRemote),
// that the client supports it. If it answers with its task handle (a
// CreateTaskResult, resultType "task"), the handle goes to the caller
// through tasks.SetRemote, and the caller's tasks/get, tasks/update and
// tasks/cancel come back through [Manager.RouteTask]. Telling the
// upstream that the client supports tasks, capturing the handles and
// sending the tasks/ methods is capture.go's.

// errTaskNotFound answers a task request for an upstream that is not
// there (any more).
var errTaskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task not found: it does not exist, has expired, or belongs to another caller."}

// RouteTask sends a tasks/get, tasks/update or tasks/cancel request
// (params with the upstream's own task ID) to the upstream named source,
// on the session of the caller ctx carries (its token info, for a
// per_principal upstream), and returns the upstream's result. It is the
// [tasks.RemoteRouter] of the upstreams.
func (m *Manager) RouteTask(ctx context.Context, source, method string, params json.RawMessage) (json.RawMessage, error) {
	var u *proxy
	for _, up := range m.ups {
		if up.opts.Name == source {
			u = up
		}
	}
	known := false
	for _, tm := range taskMethods {
		known = known || tm == method
	}
	if u == nil || !known {
		return nil, errTaskNotFound
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(params, &fields); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params."}
	}
	// The span names the method only: task IDs are unbounded.
	ctx, done := u.start(ctx, method, "")
	sess, release, err := u.sessionFor(ctx, &sdk.RequestExtra{TokenInfo: sdkauth.TokenInfoFromContext(ctx)})
	if err != nil {
		done(KindUnavailable)
		return nil, u.fail.requestError(KindUnavailable, err)
	}
	defer release()
	if !offersTasks(sess) {
		done(KindProtocol)
		return nil, errTaskNotFound
	}
	p := &rawParams{fields: fields}
	p.Meta = u.meta(ctx)
	if p.Meta == nil {
		p.Meta = sdk.Meta{}
	}
	tasksCapability(p.Meta)
	res, err := sdk.CallCustomMethod[*rawParams, *rawResult](ctx, sess, method, p)
	kind := u.sup.classify(ctx, sess, err)
	done(kind)
	if err != nil {
		return nil, u.fail.requestError(kind, err)
	}
	if res == nil || len(res.raw) == 0 {
		return nil, fmt.Errorf("upstream: %s: %s: no result", u.opts.Name, method)
	}
	return res.raw, nil
}
