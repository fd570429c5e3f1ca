package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Remote tasks: a call forwarded to an upstream that offers the tasks
// extension may come back as the upstream's task handle (see
// [tasks.RemoteSlot]). The caller gets that handle with a task ID of
// Portcullis's: "remote." and, sealed like a requestState (AES-GCM) and
// bound to the caller, the upstream's name and its task ID. tasks/get,
// tasks/update and tasks/cancel of such an ID are opened with the
// caller's identity — another caller's, or a tampered one, is a task not
// found, as for Portcullis's own tasks — and go to that upstream with its
// own task ID ([tasks.RemoteRouter]); the ID in the answer is the
// caller's again. Nothing is stored: any replica can answer.

// remoteTaskPrefix begins the ID of a task that runs on an upstream.
const remoteTaskPrefix = "remote."

// remoteTaskDigest binds a sealed remote task ID to that use: a
// requestState cannot pass for one.
var remoteTaskDigest = func() []byte {
	d := sha256.Sum256([]byte("portcullis remote task"))
	return d[:]
}()

// Bounds of how long a remote task ID opens: the upstream's ttlMs plus
// remoteTaskSlack, at most remoteTaskMaxTTL; remoteTaskDefaultTTL without
// a ttlMs.
const (
	remoteTaskSlack      = time.Hour
	remoteTaskMaxTTL     = 7 * 24 * time.Hour
	remoteTaskDefaultTTL = 24 * time.Hour
)

type remoteTasks struct {
	sealer *Sealer
	route  tasks.RemoteRouter
	now    func() time.Time
}

// newRemoteTasks returns the remote tasks of deps; nil (none) without a
// router, a sealer or the tasks extension.
func newRemoteTasks(deps Deps) *remoteTasks {
	if deps.RemoteTasks == nil || deps.Sealer == nil || deps.Tasks == nil {
		return nil
	}
	return &remoteTasks{sealer: deps.Sealer, route: deps.RemoteTasks, now: time.Now}
}

// remoteTaskID is what a remote task ID seals.
type remoteTaskID struct {
	Source string `json:"s"`
	ID     string `json:"t"`
}

// rawResult is a result whose members are passed on as the upstream sent
// them. Embedding the SDK's Result interface (never set, never encoded)
// makes it a Result the SDK will send.
type rawResult struct {
	sdk.Result `json:"-"`
	fields     map[string]json.RawMessage
}

func (r *rawResult) GetMeta() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.fields["_meta"], &m)
	return m
}

func (r *rawResult) SetMeta(m map[string]any) {
	if b, err := json.Marshal(m); err == nil {
		r.fields["_meta"] = b
	}
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.fields) }

// errRemoteHandle is the caller's error for an upstream's task handle
// that Portcullis cannot pass on.
var errRemoteHandle = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the upstream server answered with a task handle that could not be passed on."}

// handle returns the caller's CreateTaskResult for the task handle raw
// that source answered with, bound to owner.
func (rt *remoteTasks) handle(source string, raw json.RawMessage, owner string) (sdk.Result, error) {
	var fields map[string]json.RawMessage
	var id string
	if json.Unmarshal(raw, &fields) != nil || json.Unmarshal(fields["taskId"], &id) != nil || id == "" {
		return nil, errRemoteHandle
	}
	ttl := remoteTaskDefaultTTL
	var ttlMs int64
	if json.Unmarshal(fields["ttlMs"], &ttlMs) == nil && ttlMs > 0 {
		ttl = min(time.Duration(ttlMs)*time.Millisecond+remoteTaskSlack, remoteTaskMaxTTL)
	}
	plain, err := json.Marshal(remoteTaskID{Source: source, ID: id})
	if err != nil {
		return nil, errRemoteHandle
	}
	sealed, err := rt.sealer.SealUntil(string(plain), remoteTaskDigest, owner, rt.now().Add(ttl))
	if err != nil {
		return nil, errRemoteHandle
	}
	fields["taskId"], _ = json.Marshal(remoteTaskPrefix + sealed)
	return &rawResult{fields: fields}, nil
}

// open returns what the remote task ID id names, if it opens for owner.
func (rt *remoteTasks) open(id, owner string) (remoteTaskID, bool) {
	rest, ok := strings.CutPrefix(id, remoteTaskPrefix)
	if !ok {
		return remoteTaskID{}, false
	}
	plain, err := rt.sealer.Open(rest, remoteTaskDigest, owner)
	var t remoteTaskID
	if err != nil || json.Unmarshal([]byte(plain), &t) != nil || t.Source == "" || t.ID == "" {
		return remoteTaskID{}, false
	}
	return t, true
}

// isRemoteTask reports whether id names a remote task (whether or not it
// opens).
func isRemoteTask(id string) bool { return strings.HasPrefix(id, remoteTaskPrefix) }

// serve answers a tasks/get, tasks/update or tasks/cancel of the remote
// task id (params as the caller sent them) for owner: reply gets the
// upstream's result, fail the error.
func (rt *remoteTasks) serve(ctx context.Context, method, id, owner string, params json.RawMessage,
	reply func(any), fail func(status int, code int64, msg string, data json.RawMessage)) {
	t, ok := rt.open(id, owner)
	var fields map[string]json.RawMessage
	if !ok || json.Unmarshal(params, &fields) != nil {
		fail(http.StatusOK, jsonrpc.CodeInvalidParams, taskNotFoundMessage, nil)
		return
	}
	// The caller's _meta stays here, as on every request sent upstream.
	delete(fields, "_meta")
	fields["taskId"], _ = json.Marshal(t.ID)
	upParams, _ := json.Marshal(fields)
	raw, err := rt.route(ctx, t.Source, method, upParams)
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		fail(http.StatusOK, rpcErr.Code, rpcErr.Message, rpcErr.Data)
		return
	case err != nil:
		fail(http.StatusOK, jsonrpcerr.ServerError, "The upstream server that runs the task did not answer; retry later.", nil)
		return
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil || res == nil {
		fail(http.StatusOK, jsonrpc.CodeInternalError, "Internal error: the upstream server's answer could not be passed on.", nil)
		return
	}
	if _, ok := res["taskId"]; ok {
		res["taskId"], _ = json.Marshal(id)
	}
	reply(res)
}

// Messages of the errors the tasks surface answers with.
const (
	taskStoreUnreachableMessage  = "Internal error: the task store is unreachable; retry later."
	taskNotFoundMessage          = "Task not found: it does not exist, has expired, or belongs to another caller."
	missingTasksCapabilityPrefix = "Missing required client capability: "
)
