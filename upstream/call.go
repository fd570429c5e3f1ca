package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// start begins a request to the upstream, through the StartCall hook.
func (u *proxy) start(ctx context.Context, method, target string) (context.Context, func(kind string)) {
	if u.deps.Hooks.StartCall == nil {
		return ctx, func(string) {}
	}
	return u.deps.Hooks.StartCall(ctx, u.opts.Name, method, target)
}

// meta is the _meta of a request sent upstream: the trace context, if
// the Inject hook adds it; nil otherwise.
func (u *proxy) meta(ctx context.Context) sdk.Meta {
	if u.deps.Hooks.Inject == nil {
		return nil
	}
	m := sdk.Meta{}
	u.deps.Hooks.Inject(ctx, m)
	if len(m) == 0 {
		return nil
	}
	return m
}

// sessionFor returns the session a request of the caller described by
// extra goes to: the shared one, or for a per_principal upstream the
// caller's own process. release must be called when the request is done.
func (u *proxy) sessionFor(ctx context.Context, extra *sdk.RequestExtra) (*sdk.ClientSession, func(), error) {
	if u.pool != nil {
		var env []string
		if u.opts.PassPrincipal == PassPrincipalEnv {
			if p, ok := u.principal(extra); ok {
				env = p.environ()
			}
		}
		var subject tokenexchange.Subject
		if u.opts.OAuth.exchange() && u.deps.SubjectToken != nil && extra != nil {
			if tok, typ, ok := u.deps.SubjectToken(extra.TokenInfo, u.opts.OAuth.subjectType()); ok {
				subject = tokenexchange.Subject{Token: tok, Type: typ}
			}
		}
		cr := creds{subject: subject}
		if u.opts.OAuth.account() {
			if u.deps.Accounts == nil || extra == nil || extra.TokenInfo == nil {
				return nil, nil, errNoAccount
			}
			// A caller without a connected account is asked to connect
			// one before a session is opened for it.
			tok, err := u.deps.Accounts.Token(ctx, extra.TokenInfo, u.opts.Name)
			if err != nil {
				if need := (*ConnectRequired)(nil); errors.As(err, &need) {
					return nil, nil, need
				}
				return nil, nil, &accountError{err}
			}
			cr.account, cr.token = extra.TokenInfo, tok
		}
		return u.pool.acquire(ctx, u.principalKey(extra), env, cr)
	}
	sess := u.sup.session()
	if sess == nil {
		return nil, nil, errNotConnected
	}
	return sess, func() {}, nil
}

// senderFor returns the sender of a request on sess: its direct hop, or
// the SDK client session when sess has none (an upstream of an older era,
// a stdio upstream, one that keeps sessions) or the request is a call of
// tool (the upstream's name; "" for other requests) whose input schema
// binds arguments to headers, which the SDK client writes.
func (u *proxy) senderFor(sess *sdk.ClientSession, tool string) sender {
	return u.conn.links.senderFor(sess, !u.sup.headerBound(tool))
}

// callTool returns the handler of the upstream tool called name.
func (u *proxy) callTool(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res, err := u.call(ctx, req, name, false)
		if err != nil {
			return nil, err
		}
		return res.(*sdk.CallToolResult), nil // only a direct call gets another type
	}
}

// directTool returns the direct handler of the upstream tool called
// name (see catalog.DirectHandler): a 2026-07-28 caller's call served
// without Portcullis's SDK server, by the direct hop where the call takes
// it and by the SDK client otherwise.
func (u *proxy) directTool(name string) catalog.DirectHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
		return u.call(ctx, req, name, true)
	}
}

// call sends a call of the upstream tool called name for the caller's
// request req. A direct call (see directTool) has no caller session: its
// caller takes input-required results itself, asked for no
// notifications, and may get the upstream's complete result as it came
// (*catalog.RawToolResult); any other call's result is a
// *sdk.CallToolResult.
func (u *proxy) call(ctx context.Context, req *sdk.CallToolRequest, name string, direct bool) (sdk.Result, error) {
	ctx, done := u.start(ctx, "tools/call", name)
	sess, release, err := u.sessionFor(ctx, req.Extra)
	if cr := (*ConnectRequired)(nil); errors.As(err, &cr) {
		done(KindConnect)
		return u.connectRequired(req, cr, direct)
	}
	if err != nil {
		done(KindUnavailable)
		return u.fail.errorResult(KindUnavailable, err), nil
	}
	defer release()
	params := &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(req.Params.Arguments), Meta: u.meta(ctx)}
	if len(req.Params.Arguments) == 0 {
		params.Arguments = map[string]any{}
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		ours, done := u.relay.progressToken(ctx, req.Session, tok)
		defer done()
		params.SetProgressToken(ours)
	}
	if u.opts.PassPrincipal == PassPrincipalMeta {
		if p, ok := u.principal(req.Extra); ok {
			if params.Meta == nil {
				params.Meta = sdk.Meta{}
			}
			params.Meta[MetaKeyPrincipal] = p.meta()
		}
	}
	params.Meta = callerMeta(params.Meta, sess, req, req.Params.Meta)
	// An upstream that offers tasks may answer a caller that declared
	// them with its task handle, which the SDK client cannot decode:
	// the raw result is captured (tasks.go).
	var capture *taskCapture
	if tasks.AcceptsRemote(ctx) && offersTasks(sess) {
		capture = &taskCapture{}
		tasksCapability(params.Meta)
	}
	state, err := u.relay.unwrapState(req.Params.RequestState)
	if err != nil {
		done(KindProtocol)
		return nil, err
	}
	target := &callTarget{ctx: ctx, session: req.Session, upstream: sess, direct: direct}
	s := u.senderFor(sess, name)
	sendRound := func(responses sdk.InputResponseMap, state string) (sdk.Result, error) {
		p := *params
		p.InputResponses, p.RequestState = responses, state
		return s.callTool(ctx, target, capture, &p)
	}
	res, err := u.relay.rounds(target, sendRound, withoutConnect(req.Params.InputResponses), state)
	if err == nil && capture != nil {
		if raw := capture.result(); raw != nil && tasks.SetRemote(ctx, u.opts.Name, raw) {
			// The caller gets the upstream's task handle instead
			// (mcp/remotetasks.go); this placeholder is not sent.
			done("")
			return &sdk.CallToolResult{}, nil
		}
	}
	if cr := u.accountGone(ctx, req.Extra, err); cr != nil {
		done(KindConnect)
		return u.connectRequired(req, cr, direct)
	}
	kind := u.sup.classify(ctx, sess, err)
	if err == nil && toolError(res) {
		kind = KindToolError
	}
	done(kind)
	if rpcErr, ok := passedError(err); ok {
		// The completion of a URL-mode elicitation the caller is
		// asked to open comes later, outside the call (elicitation.go).
		for _, p := range urlElicitations(rpcErr) {
			u.relay.elicitations.remember(target, p)
		}
		return nil, rpcErr
	}
	if err != nil {
		return u.fail.errorResult(kind, err), nil
	}
	return u.servedResult(res), nil
}

// toolError reports whether res is a tool's error result.
func toolError(res sdk.Result) bool {
	switch r := res.(type) {
	case *sdk.CallToolResult:
		return r.IsError
	case *catalog.RawToolResult:
		return r.IsError
	}
	return false
}

// forward sends a caller's prompts/get or resources/read (method, of
// target) upstream, round by round (see rounds), from the caller's
// requestState and input responses: send makes one round on the session
// sess the caller's request goes to, by its sender s, for the caller t.
func (u *proxy) forward(ctx context.Context, method, target string, extra *sdk.RequestExtra, caller *sdk.ServerSession, requestState string, responses sdk.InputResponseMap,
	send func(ctx context.Context, sess *sdk.ClientSession, s sender, t *callTarget, responses sdk.InputResponseMap, state string) (sdk.Result, error)) (sdk.Result, error) {
	ctx, done := u.start(ctx, method, target)
	sess, release, err := u.sessionFor(ctx, extra)
	if cr := (*ConnectRequired)(nil); errors.As(err, &cr) {
		done(KindConnect)
		return nil, u.connectError(caller, cr)
	}
	if err != nil {
		done(KindUnavailable)
		return nil, u.fail.requestError(KindUnavailable, err)
	}
	defer release()
	state, err := u.relay.unwrapState(requestState)
	if err != nil {
		done(KindProtocol)
		return nil, err
	}
	t := &callTarget{ctx: ctx, session: caller, upstream: sess}
	s := u.senderFor(sess, "")
	r, err := u.relay.rounds(t, func(responses sdk.InputResponseMap, state string) (sdk.Result, error) {
		return send(ctx, sess, s, t, responses, state)
	}, responses, state)
	kind := u.sup.classify(ctx, sess, err)
	done(kind)
	if err != nil {
		return nil, u.fail.requestError(kind, err)
	}
	return r, nil
}

// principal returns the caller's identity, or false without one.
func (u *proxy) principal(extra *sdk.RequestExtra) (Principal, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return Principal{}, false
	}
	if u.deps.Principal != nil {
		return u.deps.Principal(extra.TokenInfo)
	}
	return Principal{Subject: extra.TokenInfo.UserID, Scopes: extra.TokenInfo.Scopes}, true
}

// principalKey names the caller for the pool: the Deps.PrincipalKey of
// its token info, or "" when it has none.
func (u *proxy) principalKey(extra *sdk.RequestExtra) string {
	var ti *sdkauth.TokenInfo
	if extra != nil {
		ti = extra.TokenInfo
	}
	if ti == nil {
		return ""
	}
	if u.deps.PrincipalKey != nil {
		return u.deps.PrincipalKey(ti)
	}
	return ti.UserID
}

// connectInput is the key of Portcullis's own input request for a
// connection, in a 2026-07-28 caller's input-required result and its
// retried call's input responses (which are not sent upstream).
const connectInput = "io.portcullis/connect"

// connectRequired answers a call of a caller without a connected account.
// A caller that declared URL-mode elicitation is asked to open the
// connect page as its protocol revision does it: on 2026-07-28 (a direct
// call, or a session of that era), an input-required result with a URL
// elicitation, the call retried once the user is done; on earlier ones,
// the URL elicitation error (-32042), then
// notifications/elicitation/complete (Manager.ElicitationComplete). Any
// other caller, and one that declined, gets a tool error naming the page.
func (u *proxy) connectRequired(req *sdk.CallToolRequest, cr *ConnectRequired, direct bool) (sdk.Result, error) {
	msg := fmt.Sprintf("The MCP server %q acts as your own account there, and you have not connected it yet. Open %s to connect it, then try again.", u.opts.Name, cr.URL)
	declined := false
	if r, ok := req.Params.InputResponses[connectInput].(*sdk.ElicitResult); ok && r.Action != "accept" {
		declined = true
	}
	elicit := &sdk.ElicitParams{Mode: "url", URL: cr.URL, ElicitationID: cr.ElicitationID, Message: msg}
	switch {
	case declined || !acceptsURLElicitation(req.ClientCapabilities()):
	case direct || passesInput(req.Session):
		// That revision has no completion notice, and so no elicitation
		// id: the retried call is the completion.
		e := *elicit
		e.ElicitationID = ""
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{connectInput: &e}}, nil
	case req.Session != nil:
		u.elicits.keep(cr.ElicitationID, req.Session)
		return nil, sdk.URLElicitationRequiredError([]*sdk.ElicitParams{elicit})
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}, nil
}

// connectError answers a caller's prompts/get or resources/read without a
// connected account: the URL elicitation error where the caller's session
// declared URL elicitation (its completion notice follows), else an error
// naming the page.
func (u *proxy) connectError(caller *sdk.ServerSession, cr *ConnectRequired) error {
	msg := fmt.Sprintf("The MCP server %q acts as your own account there, and you have not connected it yet. Open %s to connect it, then try again.", u.opts.Name, cr.URL)
	if caller != nil && caller.InitializeParams() != nil && acceptsURLElicitation(caller.InitializeParams().Capabilities) {
		u.elicits.keep(cr.ElicitationID, caller)
		return sdk.URLElicitationRequiredError([]*sdk.ElicitParams{{Mode: "url", URL: cr.URL, ElicitationID: cr.ElicitationID, Message: msg}})
	}
	return errors.New(msg)
}

// withoutConnect is the input responses of a retried call without
// Portcullis's own (connectInput), which the upstream never asked for;
// nil when none is left.
func withoutConnect(m sdk.InputResponseMap) sdk.InputResponseMap {
	if _, ok := m[connectInput]; !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, connectInput)
	if len(out) == 0 {
		return nil
	}
	return out
}

// accountGone returns, for a call on the caller's connected account that
// failed with err, the caller's ConnectRequired when the account is no
// longer usable: the upstream refused its token (the transport told
// Accounts.Rejected) and it could not be renewed, as when it was revoked
// at the upstream's authorization server. The caller is then asked to
// connect again rather than told the connection broke. Nil otherwise.
func (u *proxy) accountGone(ctx context.Context, extra *sdk.RequestExtra, err error) *ConnectRequired {
	if err == nil || !u.opts.OAuth.account() || u.deps.Accounts == nil || extra == nil || extra.TokenInfo == nil {
		return nil
	}
	_, aerr := u.deps.Accounts.Token(ctx, extra.TokenInfo, u.opts.Name)
	if cr := (*ConnectRequired)(nil); errors.As(aerr, &cr) {
		return cr
	}
	return nil
}
