package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Support says whether a tool's calls may run as tasks.
type Support string

// Task support levels, as SEP-2663 names them.
const (
	// SupportNone: calls always run synchronously (the default).
	SupportNone Support = ""
	// SupportOptional: a call from a client that declared the tasks
	// extension runs as a task; from any other client, synchronously.
	SupportOptional Support = "optional"
	// SupportRequired: only a client that declared the tasks extension may
	// call the tool; others get -32021 (missing required client capability).
	SupportRequired Support = "required"
)

// ToolTasks is how one tool's calls may run as tasks.
type ToolTasks struct {
	Support Support
	// HandlerStarts: the call is a plain call until the handler calls
	// [Run] (after gathering input with multi-round-trip requests, say).
	// Otherwise the whole handler runs as the task.
	HandlerStarts bool
}

// Valid reports whether s is a known level.
func (s Support) Valid() bool {
	return s == SupportNone || s == SupportOptional || s == SupportRequired
}

// Starter lets a tool handler turn its call into a task (see [Run]). The
// MCP layer puts one in the context of every call that may become a task.
type Starter struct {
	start func(Work) (*Task, error)

	mu      sync.Mutex
	created *Task
}

// NewStarter returns a Starter that creates tasks with start.
func NewStarter(start func(Work) (*Task, error)) *Starter { return &Starter{start: start} }

// Created returns the task a handler started, or nil.
func (s *Starter) Created() *Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}

type starterKey struct{}
type taskKey struct{}
type serverKey struct{}

// WithServer returns ctx naming the server (a virtual server's name;
// empty for the root server) on which the calls it reaches are made: a
// task [Manager.Start] creates under it carries the name, for telemetry
// (see [Observer]).
func WithServer(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, serverKey{}, name)
}

// serverOf returns the server name ctx carries, or "".
func serverOf(ctx context.Context) string {
	name, _ := ctx.Value(serverKey{}).(string)
	return name
}

// WithStarter returns ctx carrying s (nil: none).
func WithStarter(ctx context.Context, s *Starter) context.Context {
	return context.WithValue(ctx, starterKey{}, s)
}

// WithTaskID returns ctx marking the code it reaches as running in task id.
func WithTaskID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, taskKey{}, id)
}

// TaskID returns the ID of the task ctx runs in, or "" outside a task.
func TaskID(ctx context.Context) string {
	id, _ := ctx.Value(taskKey{}).(string)
	return id
}

// Run runs f as a task when the call that ctx belongs to may become one
// (its tool supports tasks and the client declared the extension), and
// synchronously otherwise. As a task, Run returns at once with a
// placeholder result that the MCP layer replaces with the task handle; f
// runs in the background with a context that ends when the task is
// cancelled or outlives its TTL, and what it returns becomes the task's
// result (a *jsonrpc.Error fails the task; any other error completes it
// with a tool error, as for a plain call).
//
// A tool that first gathers input with multi-round-trip requests calls Run
// once it has what it needs; a tool that needs no such control is simply
// declared with [SupportOptional] or [SupportRequired], and its whole
// handler runs as a task.
func Run(ctx context.Context, f func(context.Context) (*sdk.CallToolResult, error)) (*sdk.CallToolResult, error) {
	s, _ := ctx.Value(starterKey{}).(*Starter)
	if s == nil {
		return f(ctx)
	}
	t, err := s.start(func(ctx context.Context, _ Input) Outcome {
		return OutcomeOf(f(WithStarter(ctx, nil)))
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.created = t
	s.mu.Unlock()
	return &sdk.CallToolResult{}, nil
}

// OutcomeOf turns what a tools/call handler returned into a task round's
// outcome.
func OutcomeOf(res *sdk.CallToolResult, err error) Outcome {
	if err != nil {
		var jerr *jsonrpc.Error
		if errors.As(err, &jerr) {
			return Outcome{Err: &Error{Code: jerr.Code, Message: jerr.Message, Data: jerr.Data}}
		}
		res = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
	}
	if res == nil {
		res = &sdk.CallToolResult{}
	}
	if len(res.InputRequests) > 0 {
		data, err := json.Marshal(res.InputRequests)
		var reqs map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(data, &reqs)
		}
		if err != nil {
			return Outcome{Err: &Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the tool's input requests could not be encoded."}}
		}
		return Outcome{InputRequests: reqs, State: res.RequestState}
	}
	if res.Content == nil {
		res.Content = []sdk.Content{}
	}
	data, err := json.Marshal(res)
	if err != nil {
		return Outcome{Err: &Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the tool's result could not be encoded."}}
	}
	return Outcome{Result: data}
}
