// Package tasks runs tool calls as tasks of the MCP tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663) and keeps their state in a
// [Store]: in memory for one replica ([NewMemoryStore]) or in Redis
// ([NewRedisStore]) so that any replica answers tasks/get, tasks/update
// and tasks/cancel for any task, and a result outlives the replica that
// produced it.
//
// A [Manager] creates tasks, runs their work on the replica that created
// them, renews that replica's lease on them while they run, and marks a
// task whose replica stopped renewing as failed. Every task belongs to the
// principal that created it: to anyone else it does not exist.
//
// Tool authors declare task tools with portcullis.TaskTool (or
// tools.AddTaskTool), and a handler that starts its task itself calls
// [Run]. The stores and the manager are outside the compatibility promise
// of the portcullis, auth and tools packages; [Support] and [ToolTasks],
// which those packages use, keep it.
package tasks

import (
	"encoding/json"
	"errors"
	"time"
)

// ExtensionID names the tasks extension in capabilities.
const ExtensionID = "io.modelcontextprotocol/tasks"

// Status is a task's status on the wire.
type Status string

// The statuses of SEP-2663. completed, failed and cancelled are terminal.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Statuses lists every status, live ones first.
var Statuses = []Status{StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled}

// Terminal reports whether s ends a task.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Task is a task as a [Store] keeps it. Stores encode it as JSON; its
// Owner never leaves the server.
type Task struct {
	ID string `json:"id"`
	// Owner is the principal that created the task (the caller's issuer
	// and subject); empty when auth is off.
	Owner string `json:"owner"`
	// Tool is the tool called, for telemetry.
	Tool string `json:"tool"`
	// Server names the server the tool was called on (see [WithServer]),
	// for telemetry; empty for the root server.
	Server        string    `json:"server,omitempty"`
	Status        Status    `json:"status"`
	StatusMessage string    `json:"status_message,omitempty"`
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`
	// Expires is when the store may forget the task: Created plus the
	// time a task may run while it is live, its end plus the retention
	// once terminal. The wire's ttlMs is Expires minus Created.
	Expires      time.Time     `json:"expires"`
	PollInterval time.Duration `json:"poll_interval"`
	// InputRequests are the outstanding requests for client input, by
	// key, each a JSON object {method, params}.
	InputRequests map[string]json.RawMessage `json:"input_requests,omitempty"`
	// InputResponses are responses tasks/update delivered that the
	// task's work has not yet taken, by key.
	InputResponses map[string]json.RawMessage `json:"input_responses,omitempty"`
	// Answered lists every key answered over the task's life: a key is
	// never asked twice.
	Answered []string `json:"answered,omitempty"`
	// Result is the tool result of a completed task; Error the JSON-RPC
	// error object of a failed one.
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// Worker names the replica running the task and Lease how long its
	// claim lasts without renewal. A live task whose lease has passed has
	// lost its worker.
	Worker string    `json:"worker,omitempty"`
	Lease  time.Time `json:"lease"`
	// Trace is the W3C traceparent of the call that created the task, so
	// that the spans of its polls can link to it.
	Trace string `json:"trace,omitempty"`
}

// Clone returns a deep copy of t.
func (t *Task) Clone() *Task {
	c := *t
	c.InputRequests = cloneRaw(t.InputRequests)
	c.InputResponses = cloneRaw(t.InputResponses)
	c.Answered = append([]string(nil), t.Answered...)
	return &c
}

func cloneRaw(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	c := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Errors of stores and of the manager.
var (
	// ErrNotFound: no such task, or not the caller's, or forgotten.
	ErrNotFound = errors.New("tasks: task not found")
	// ErrOwnerCap: the caller already has as many live tasks as allowed.
	ErrOwnerCap = errors.New("tasks: this caller has too many live tasks")
	// ErrTotalCap: the server already has as many live tasks as allowed.
	ErrTotalCap = errors.New("tasks: too many live tasks")
	// ErrUnchanged, returned by an update function, leaves the task as it
	// was.
	ErrUnchanged = errors.New("tasks: unchanged")
)

// Wire is a task as tasks/get answers it (DetailedTask) and as
// CreateTaskResult carries it (without the payload fields).
type Wire struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         Status                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          json.RawMessage            `json:"error,omitempty"`
}

// wireTime is the timestamp format on the wire: RFC 3339 in UTC with
// milliseconds.
const wireTime = "2006-01-02T15:04:05.000Z07:00"

// ToWire returns t as tasks/get shows it: with the payload of its status
// (input requests, result or error) when detailed, and with resultType.
func (t *Task) ToWire(resultType string, detailed bool) *Wire {
	w := &Wire{
		ResultType:     resultType,
		TaskID:         t.ID,
		Status:         t.Status,
		StatusMessage:  t.StatusMessage,
		CreatedAt:      t.Created.UTC().Format(wireTime),
		LastUpdatedAt:  t.Updated.UTC().Format(wireTime),
		TTLMs:          max(t.Expires.Sub(t.Created).Milliseconds(), 1),
		PollIntervalMs: t.PollInterval.Milliseconds(),
	}
	if !detailed {
		return w
	}
	switch t.Status {
	case StatusInputRequired:
		w.InputRequests = t.InputRequests
	case StatusCompleted:
		w.Result = t.Result
	case StatusFailed:
		w.Error = t.Error
	}
	return w
}
