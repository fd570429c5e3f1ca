//lint:file-ignore SA1019 the 2026-07-28 revision deprecates MCP sampling and roots; an upstream still asks for them in its input requests

package upstream

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Multi-round-trip results (SEP-2322, protocol 2026-07-28). An upstream
// on that era that needs input from the client during a tools/call,
// prompts/get or resources/read answers with an input-required result: its
// input requests (elicitation, sampling, roots) and an opaque requestState
// the client echoes, with its responses, in a retry of the same request.
// Portcullis's client does not fulfil them itself (the SDK client's
// multi-round-trip middleware is off, see newClient):
//
//   - A caller on 2026-07-28 gets the result as the upstream sent it,
//     its input requests unchanged and its requestState wrapped with the
//     upstream's name (wrapState). Portcullis's server seals that state,
//     bound to the caller, the request and an expiry, like the state of its
//     own tools (mcp.Sealer), so the caller can neither read nor alter the
//     upstream's. The retry, whose state the server has opened, reaches the
//     same upstream tool (the state is bound to the request), which checks
//     the upstream's name and sends the caller's input responses and the
//     upstream's own state on.
//   - A caller of an older era cannot be handed input requests. Portcullis
//     sends each to the caller's session as a request (elicitation/create,
//     sampling/createMessage, roots/list), within the call, and retries
//     with the answers, for at most maxRounds rounds.

// maxRounds bounds the rounds of one call that Portcullis fulfils for a
// caller of an older era, as the SDK client bounds its own.
const maxRounds = 10

// statePrefix begins every requestState Portcullis hands a caller for an
// upstream's.
const statePrefix = "upstream.v1."

// upstreamState is an upstream's requestState and the upstream's name.
// State is bytes, not a string, so that JSON carries it exactly.
type upstreamState struct {
	Upstream string `json:"u"`
	State    []byte `json:"s,omitempty"`
}

// wrapState returns the upstream's requestState as the caller is handed it
// (before sealing): with the upstream's name, so that the retry goes on only
// to this upstream.
func (r *relay) wrapState(state string) string {
	b, err := json.Marshal(upstreamState{Upstream: r.name, State: []byte(state)})
	if err != nil { // a struct of a string and bytes always encodes
		panic(err)
	}
	return statePrefix + string(b)
}

// unwrapState returns the upstream's requestState from the state of a
// retry (opened by Portcullis's server). An empty state is none; one that
// is not this upstream's is refused with -32602.
func (r *relay) unwrapState(state string) (string, error) {
	if state == "" {
		return "", nil
	}
	rest, ok := strings.CutPrefix(state, statePrefix)
	var st upstreamState
	if !ok || json.Unmarshal([]byte(rest), &st) != nil || st.Upstream != r.name {
		return "", &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidParams,
			Message: "Invalid requestState: it does not belong to this request. Retry the original request without requestState.",
		}
	}
	return string(st.State), nil
}

// inputRequired returns the input requests and a pointer to the
// requestState of a result that needs input; ok is false for any other.
func inputRequired(res sdk.Result) (reqs sdk.InputRequestMap, state *string, ok bool) {
	switch r := res.(type) {
	case *sdk.CallToolResult:
		return r.InputRequests, &r.RequestState, r.NeedsInput()
	case *sdk.GetPromptResult:
		return r.InputRequests, &r.RequestState, r.NeedsInput()
	case *sdk.ReadResourceResult:
		return r.InputRequests, &r.RequestState, r.NeedsInput()
	}
	return nil, nil, false
}

// round sends one round of a request to an upstream: the request with
// the given input responses and requestState (the upstream's own).
type round func(responses sdk.InputResponseMap, state string) (sdk.Result, error)

// rounds sends a request upstream, starting with the caller's input
// responses and the upstream's state unwrapped from the caller's, and
// handles an input-required result: wrapped for a caller that takes it,
// fulfilled through the caller's session and sent again otherwise.
func (r *relay) rounds(t *callTarget, sendRound round, responses sdk.InputResponseMap, state string) (sdk.Result, error) {
	for round := 1; ; round++ {
		res, err := sendRound(responses, state)
		if err != nil {
			return nil, err
		}
		reqs, st, needs := inputRequired(res)
		switch {
		case !needs:
			return res, nil
		case t.direct || passesInput(t.session):
			*st = r.wrapState(*st)
			return res, nil
		case len(reqs) == 0:
			// Load shedding: the upstream asks for a retry later.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is busy; retry later"}
		case round >= maxRounds:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("portcullis: the server asked for input more than %d times in one call", maxRounds)}
		}
		if responses, err = r.fulfil(t, reqs); err != nil {
			return nil, err
		}
		state = *st
	}
}

// fulfil sends an upstream's input requests to a caller of an older era,
// one at a time, and returns its answers.
func (r *relay) fulfil(t *callTarget, reqs sdk.InputRequestMap) (sdk.InputResponseMap, error) {
	if t.session == nil {
		return nil, r.refuse("an input request", "the caller's session cannot receive requests")
	}
	out := make(sdk.InputResponseMap, len(reqs))
	for id, ir := range reqs {
		var res sdk.InputResponse
		var err error
		switch p := ir.(type) {
		case *sdk.ElicitParams:
			res, err = r.askElicit(t, p)
		case *sdk.CreateMessageWithToolsParams:
			res, err = r.askSampling(t, p)
		case *sdk.CreateMessageParams:
			res, err = r.askSampling(t, withTools(p))
		case *sdk.ListRootsParams:
			res, err = r.askRoots(t, p)
		default:
			err = r.refuse("an input request", fmt.Sprintf("Portcullis does not know input requests of type %T", ir))
		}
		if err != nil {
			return nil, err
		}
		out[id] = res
	}
	return out, nil
}
