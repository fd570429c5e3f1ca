//lint:file-ignore SA1019 a legacy session's client answers sampling requests, which the 2026-07-28 revision deprecates

package mcp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// TestSharedSessionServerRequestsOnTwoReplicas: two calls of one session,
// one on each replica, each ask the client something at the same time,
// each as its copy's first server→client request; the client answers the
// elicitation first, while the sampling request waits. Both answers reach
// both copies (through the bus), and each call completes with its own:
// the copies sent their requests under ids of their own, where the SDK
// numbers both 1.
func TestSharedSessionServerRequestsOnTwoReplicas(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.route = func(r *http.Request) int {
		if r.Method != http.MethodPost {
			return 1
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"test_sampling"`)) {
			return 1
		}
		return 0
	}
	sampling := make(chan struct{}) // the sampling request reached the client
	elicited := make(chan struct{}) // the elicitation's answer was handed to the client transport
	done := make(chan struct{})     // the test is over: handlers still waiting give up
	ct := &sdk.StreamableClientTransport{Endpoint: rs.url, HTTPClient: &http.Client{Transport: headerTransport{"alice"}}, MaxRetries: -1}
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, _ *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			select {
			case <-sampling:
			case <-done:
				return nil, context.Canceled
			}
			defer close(elicited)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"username": "the-elicited-name"}}, nil
		},
		CreateMessageHandler: func(_ context.Context, _ *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			close(sampling)
			select {
			case <-elicited:
			case <-done:
				return nil, context.Canceled
			}
			// The elicitation's answer is on its way to both copies
			// before this one is sent.
			time.Sleep(50 * time.Millisecond)
			return &sdk.CreateMessageResult{Model: "m", Role: "assistant", Content: &sdk.TextContent{Text: "the-sampled-text"}}, nil
		},
	})
	cs, err := c.Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	defer close(done)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	type result struct {
		name, text string
		err        error
	}
	results := make(chan result, 2)
	call := func(name, tool string, args map[string]any) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		r := result{name: name, err: err}
		if err == nil {
			for _, c := range res.Content {
				if tc, ok := c.(*sdk.TextContent); ok {
					r.text += tc.Text
				}
			}
		}
		results <- r
	}
	go call("elicitation", "test_elicitation", map[string]any{"message": "who?"})
	go call("sampling", "test_sampling", map[string]any{"prompt": "hi"})
	want := map[string]string{"elicitation": "the-elicited-name", "sampling": "the-sampled-text"}
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		if !strings.Contains(r.text, want[r.name]) {
			t.Errorf("%s: result %q, want it to hold its own answer %q", r.name, r.text, want[r.name])
		}
	}
}
