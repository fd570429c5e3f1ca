package tasks

import (
	"context"
	"encoding/json"
	"sync"
)

// Remote tasks run on another MCP server (an upstream) that offers the
// tasks extension: a call forwarded to it may be answered with the
// server's own task handle. The MCP layer puts a [RemoteSlot] in the
// context of every call whose caller declared the extension (over HTTP);
// the handler that forwards the call hands the server's CreateTaskResult
// to it with [SetRemote], and the MCP layer answers the caller with that
// handle under a task ID of its own, which names the server and the
// server's task and is bound to the caller. tasks/get, tasks/update and
// tasks/cancel of such an ID go to the server (see [RemoteRouter]).

// RemoteSlot receives the task another server created for a call.
type RemoteSlot struct {
	mu     sync.Mutex
	source string
	result json.RawMessage
}

// Created returns the server (as the handler named it) and the
// CreateTaskResult it answered with, or "" and nil when the call did not
// become a remote task.
func (s *RemoteSlot) Created() (source string, result json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.source, s.result
}

type remoteKey struct{}

// WithRemoteSlot returns ctx carrying s: the call may become a remote
// task.
func WithRemoteSlot(ctx context.Context, s *RemoteSlot) context.Context {
	return context.WithValue(ctx, remoteKey{}, s)
}

// AcceptsRemote reports whether the call ctx belongs to may become a
// remote task: its caller declared the extension, and the call is not
// itself a round of a task of Portcullis's.
func AcceptsRemote(ctx context.Context) bool {
	s, _ := ctx.Value(remoteKey{}).(*RemoteSlot)
	return s != nil && TaskID(ctx) == ""
}

// SetRemote records that source answered the call ctx belongs to with the
// task handle result (its CreateTaskResult). It reports false when the
// call cannot become a remote task (see [AcceptsRemote]).
func SetRemote(ctx context.Context, source string, result json.RawMessage) bool {
	s, _ := ctx.Value(remoteKey{}).(*RemoteSlot)
	if s == nil || TaskID(ctx) != "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.source, s.result = source, result
	return true
}

// RemoteRouter sends a tasks/get, tasks/update or tasks/cancel request
// (method, with params as the caller sent them but the server's own task
// ID) to source, the server that created the task, on behalf of the
// caller that ctx carries, and returns the server's result. An error the
// server answered with is a *jsonrpc.Error.
type RemoteRouter func(ctx context.Context, source, method string, params json.RawMessage) (json.RawMessage, error)
