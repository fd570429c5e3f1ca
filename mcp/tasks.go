package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// missingTasksData is the data of -32021 naming the tasks extension.
var missingTasksData = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasks.ExtensionID + `":{}}}}`)

// declaresTasks reports whether a request of revision 2026-07-28 or later
// declares the tasks extension in its per-request client capabilities.
func declaresTasks(r *sdk.CallToolRequest) bool {
	meta := r.Params.GetMeta()
	if meta == nil {
		return false
	}
	if _, ok := meta[sdk.MetaKeyProtocolVersion]; !ok {
		return false
	}
	caps := r.ClientCapabilities()
	if caps == nil || caps.Extensions == nil {
		return false
	}
	_, ok := caps.Extensions[tasks.ExtensionID]
	return ok
}

// taskOwner is the principal a task belongs to: the token's issuer and
// subject, "" with auth off.
func taskOwner(info *sdkauth.TokenInfo) string {
	if info == nil {
		return ""
	}
	return info.UserID
}

// callerOwner is the owner of the tasks req's caller creates.
func callerOwner(req sdk.Request) string {
	var info *sdkauth.TokenInfo
	if extra := req.GetExtra(); extra != nil {
		info = extra.TokenInfo
	}
	return taskOwner(info)
}

// taskMiddleware runs tools/call of task-supporting tools as tasks for
// clients that declared the extension, answers -32021 for a tool that
// requires tasks called by any other client, and lets a handler start a
// task itself with [tasks.Run].
//
// Only /mcp answers tasks/get, so a call over any other transport never
// becomes a task, and one of a tool that requires tasks is refused. The
// tasks it creates are the server's named server (see [Deps.Name]).
func taskMiddleware(mgr *tasks.Manager, server string, support func(tool string) tasks.ToolTasks, transport Transport, remote *remoteTasks) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		if mgr == nil {
			return next
		}
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			r, ok := req.(*sdk.CallToolRequest)
			if method != "tools/call" || !ok || r.Params == nil || tasks.TaskID(ctx) != "" {
				return next(ctx, method, req)
			}
			tt := support(r.Params.Name)
			declared := transport == HTTP && declaresTasks(r)
			switch {
			case tt.Support == tasks.SupportNone && declared && remote != nil:
				// A call forwarded upstream may come back as the
				// upstream's task (remotetasks.go).
				slot := &tasks.RemoteSlot{}
				res, err := next(tasks.WithRemoteSlot(ctx, slot), method, req)
				if source, raw := slot.Created(); raw != nil && err == nil {
					return remote.handle(source, raw, callerOwner(req))
				}
				return res, err
			case tt.Support == tasks.SupportNone:
				return next(ctx, method, req)
			case !declared && tt.Support == tasks.SupportRequired:
				return nil, &jsonrpc.Error{
					Code:    sdk.CodeMissingRequiredClientCapabilities,
					Message: missingTasksCapabilityPrefix + fmt.Sprintf("the tool %q runs only as a task; declare the %s extension in the request's client capabilities.", r.Params.Name, tasks.ExtensionID),
					Data:    missingTasksData,
				}
			case !declared:
				return next(ctx, method, req)
			}
			owner := callerOwner(req)
			if server != "" {
				ctx = tasks.WithServer(ctx, server)
			}
			start := func(work tasks.Work) (*tasks.Task, error) {
				t, err := mgr.Start(ctx, owner, r.Params.Name, work)
				return t, startError(err)
			}
			// A handler that gathers input first starts the task itself
			// (tasks.Run); until it does, the call is a plain call.
			starter := tasks.NewStarter(start)
			if tt.HandlerStarts {
				res, err := next(tasks.WithStarter(ctx, starter), method, req)
				if t := starter.Created(); t != nil {
					// Whatever the SDK made of the handler's placeholder
					// result (an output schema it fails, say), the task
					// exists and runs: its handle is the answer.
					return newCreateTaskResult(t), nil
				}
				return res, err
			}
			// Otherwise the whole call is the task: each round calls the
			// handler, with the client's responses to the previous round's
			// input requests.
			t, err := mgr.Start(ctx, owner, r.Params.Name, func(tctx context.Context, in tasks.Input) tasks.Outcome {
				round := *r
				params := *r.Params
				params.InputResponses, params.RequestState = nil, in.State
				if in.Responses != nil {
					data, _ := json.Marshal(in.Responses)
					if err := json.Unmarshal(data, &params.InputResponses); err != nil {
						return tasks.Outcome{Err: &tasks.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid input responses: " + err.Error()}}
					}
				}
				round.Params = &params
				res, err := next(tctx, method, &round)
				ctr, _ := res.(*sdk.CallToolResult)
				if err == nil && ctr == nil && res != nil {
					return tasks.Outcome{Err: &tasks.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: unexpected result type."}}
				}
				return tasks.OutcomeOf(ctr, err)
			})
			if err != nil {
				if errors.Is(err, tasks.ErrOwnerCap) || errors.Is(err, tasks.ErrTotalCap) || tt.Support == tasks.SupportRequired {
					return nil, startError(err)
				}
				// The store is down: a tool that only supports tasks still
				// answers, synchronously.
				return next(ctx, method, req)
			}
			return newCreateTaskResult(t), nil
		}
	}
}

// startError turns a failure to create a task into the JSON-RPC error the
// caller gets.
func startError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tasks.ErrOwnerCap):
		return &jsonrpc.Error{Code: jsonrpcerr.ServerError, Message: "Too many tasks: this caller already has as many live tasks as allowed; wait for one to finish or cancel one."}
	case errors.Is(err, tasks.ErrTotalCap):
		return &jsonrpc.Error{Code: jsonrpcerr.ServerError, Message: "Too many tasks: the server already runs as many tasks as allowed; retry later."}
	case errors.Is(err, tasks.ErrStopped):
		return &jsonrpc.Error{Code: jsonrpcerr.ServerError, Message: "The server is shutting down; retry on another instance."}
	default:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: taskStoreUnreachableMessage}
	}
}

// createTaskResult is the CreateTaskResult of SEP-2663: the task's fields
// at the top level, resultType "task". Embedding the SDK's Result interface
// (never set, never encoded) makes it a Result the SDK will send.
type createTaskResult struct {
	sdk.Result `json:"-"`
	Meta       map[string]any `json:"_meta,omitempty"`
	*tasks.Wire
}

func newCreateTaskResult(t *tasks.Task) *createTaskResult {
	return &createTaskResult{Wire: t.ToWire("task", false)}
}

func (r *createTaskResult) GetMeta() map[string]any  { return r.Meta }
func (r *createTaskResult) SetMeta(m map[string]any) { r.Meta = m }

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	TaskID         *string                    `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	Meta           struct {
		Caps *struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
}

// isTaskMethod reports whether method belongs to the tasks extension.
func isTaskMethod(method string) bool { return strings.HasPrefix(method, "tasks/") }

// serveTask answers a tasks/get, tasks/update or tasks/cancel request of
// revision 2026-07-28 or later; tasks/result and tasks/list (removed in
// this revision), any other tasks/ method, and every tasks/ method when the
// extension is off get -32601.
func (h *Handler) serveTask(w http.ResponseWriter, r *http.Request, m envelope) {
	link := ""
	reply := func(result any) {
		if rec, ok := w.(jsonrpcerr.AnswerRecorder); ok {
			rec.RecordAnswered(link)
		}
		data, err := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  any             `json:"result"`
		}{"2.0", m.ID, result})
		if err != nil {
			jsonrpcerr.Write(w, http.StatusOK, m.ID, jsonrpc.CodeInternalError, "Internal error.")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(data)
	}
	fail := func(status int, code int64, msg string, data json.RawMessage) {
		if data == nil {
			jsonrpcerr.Write(w, status, m.ID, code, msg)
			return
		}
		jsonrpcerr.WriteData(w, status, m.ID, code, msg, data)
	}
	// With the extension off, no tasks/ method exists.
	known := m.Method == "tasks/get" || m.Method == "tasks/update" || m.Method == "tasks/cancel"
	if !known || h.tasks == nil {
		fail(http.StatusOK, jsonrpcerr.MethodNotFound, fmt.Sprintf("Method not found: %q.", m.Method), nil)
		return
	}
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification: nothing to answer
		return
	}
	var p taskParams
	if len(m.Params) == 0 || json.Unmarshal(m.Params, &p) != nil || p.TaskID == nil {
		fail(http.StatusOK, jsonrpc.CodeInvalidParams, "Invalid params: taskId (a string) is required.", nil)
		return
	}
	if got := r.Header.Get(mcpheader.Method); got != "" && got != m.Method {
		fail(http.StatusBadRequest, sdk.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Method is %q but the body's method is %q.", got, m.Method), nil)
		return
	}
	if vals, ok := r.Header[http.CanonicalHeaderKey(mcpheader.Name)]; ok && len(vals) > 0 && strings.TrimSpace(vals[0]) != *p.TaskID {
		fail(http.StatusBadRequest, sdk.CodeHeaderMismatch, "Header mismatch: Mcp-Name must equal params.taskId.", nil)
		return
	}
	if p.Meta.Caps == nil || p.Meta.Caps.Extensions[tasks.ExtensionID] == nil {
		fail(http.StatusOK, sdk.CodeMissingRequiredClientCapabilities, missingTasksCapabilityPrefix+"declare the "+tasks.ExtensionID+" extension in the request's client capabilities to use "+m.Method+".", missingTasksData)
		return
	}
	owner := ""
	if info := sdkauth.TokenInfoFromContext(r.Context()); info != nil {
		owner = taskOwner(info)
	}
	ctx := r.Context()
	if isRemoteTask(*p.TaskID) {
		if h.remote == nil {
			fail(http.StatusOK, jsonrpc.CodeInvalidParams, taskNotFoundMessage, nil)
			return
		}
		h.remote.serve(ctx, m.Method, *p.TaskID, owner, m.Params, reply, fail)
		return
	}
	var err error
	switch m.Method {
	case "tasks/get":
		var t *tasks.Task
		if t, err = h.tasks.Get(ctx, owner, *p.TaskID); err == nil {
			link = t.Trace
			reply(t.ToWire("complete", true))
			return
		}
	case "tasks/update":
		if p.InputResponses == nil {
			fail(http.StatusOK, jsonrpc.CodeInvalidParams, "Invalid params: inputResponses (an object) is required.", nil)
			return
		}
		err = h.tasks.Respond(ctx, owner, *p.TaskID, p.InputResponses)
	case "tasks/cancel":
		err = h.tasks.Cancel(ctx, owner, *p.TaskID)
	}
	switch {
	case err == nil:
		reply(map[string]string{"resultType": "complete"})
	case errors.Is(err, tasks.ErrNotFound):
		fail(http.StatusOK, jsonrpc.CodeInvalidParams, taskNotFoundMessage, nil)
	default:
		h.logger.WarnContext(ctx, "task store error", "mcp.method.name", m.Method, "error", err)
		fail(http.StatusOK, jsonrpc.CodeInternalError, taskStoreUnreachableMessage, nil)
	}
}
