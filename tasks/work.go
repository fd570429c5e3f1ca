package tasks

import (
	"context"
	"encoding/json"
)

// Input is what one round of a task's work gets: the client's responses
// to the input requests of the previous round, and the state that round
// left. Both are empty in the first round.
type Input struct {
	Responses map[string]json.RawMessage
	State     string
}

// Outcome is how one round of a task's work ended: with a result, with
// requests for client input (and state for the next round), or with a
// JSON-RPC error. A round that returns Result with Err nil completes the
// task, even if the result is a tool error (isError).
type Outcome struct {
	Result        json.RawMessage
	InputRequests map[string]json.RawMessage
	State         string
	Err           *Error
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Work runs one round of a task. It is called again, with the client's
// responses, after a round that asked for input. ctx ends when the task is
// cancelled or outlives its TTL.
type Work func(ctx context.Context, in Input) Outcome
