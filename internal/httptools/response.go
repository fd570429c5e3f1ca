package httptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// excerptBytes bounds the excerpt of an error response's body a tool
// error shows.
const excerptBytes = 512

// errTooLarge is a response body over max_response_bytes.
var errTooLarge = errors.New("httptools: response body too large")

// readBody reads at most max bytes of r, failing with errTooLarge past
// them.
func readBody(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errTooLarge
	}
	return b, nil
}

// result maps the API's response to the tool's result: a 2xx to its body
// as text (and structured content when JSON and asked for), anything else
// to a tool error naming the status with an excerpt of the body, scrubbed
// of the credentials the request carried (secrets).
func (t *tool) result(resp *http.Response, body []byte, secrets []string) *sdk.CallToolResult {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return toolError(fmt.Sprintf("The API answered %s to %s %s.%s", resp.Status, t.spec.Method, t.spec.Path, excerpt(body, secrets)))
	}
	isJSON := jsonMedia(resp.Header.Get("Content-Type"))
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(body)}}}
	wantStructured := t.spec.Result == spec.ResultJSON || len(t.spec.OutputSchema) > 0
	if t.spec.Result == spec.ResultJSON && !json.Valid(body) {
		return toolError(fmt.Sprintf("The API answered %s to %s %s with a body that is not JSON.", resp.Status, t.spec.Method, t.spec.Path))
	}
	if wantStructured && (isJSON || t.spec.Result == spec.ResultJSON) {
		if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '{' && json.Valid(b) {
			res.StructuredContent = json.RawMessage(b)
		}
	}
	if len(t.spec.OutputSchema) > 0 && res.StructuredContent == nil {
		// Clients refuse a result without the structured content an
		// output schema promises: the model gets a tool error instead.
		return toolError(fmt.Sprintf("The API answered %s to %s %s with a body that is not a JSON object, which the tool's output schema requires.%s", resp.Status, t.spec.Method, t.spec.Path, excerpt(body, secrets)))
	}
	if len(body) == 0 {
		res.Content = []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("The API answered %s with no body.", resp.Status)}}
	}
	return res
}

// failure maps a request that got no usable response to a tool error.
func (t *tool) failure(ctx context.Context, err error, timeout string) *sdk.CallToolResult {
	var ae *argError
	var xe *tokenexchange.Error
	switch {
	case errors.As(err, &ae):
		return toolError(ae.msg + ".")
	case errors.Is(err, errTooLarge):
		return toolError(fmt.Sprintf("The API's response to %s %s is over %d bytes, the limit of this API (max_response_bytes).", t.spec.Method, t.spec.Path, t.api.opts.MaxResponseBytes))
	case errors.Is(err, errNoSubject):
		return toolError("This tool's API is sent a token got for each caller, and this call has no caller's token to get one with.")
	case errors.As(err, &xe):
		return toolError(fmt.Sprintf("No token for you could be got for this tool's API: %s refused it%s.", xe.Server, code(xe.Code)))
	case errors.Is(err, errRedirect):
		return toolError(fmt.Sprintf("The API redirected %s %s where this tool may not go.", t.spec.Method, t.spec.Path))
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return toolError(fmt.Sprintf("The API did not answer %s %s within %s.", t.spec.Method, t.spec.Path, timeout))
	}
	return toolError(fmt.Sprintf("The API could not be reached for %s %s.", t.spec.Method, t.spec.Path))
}

// accountFailure maps a caller's connected account that cannot be had to
// a tool error: the page that connects it when there is none.
func (t *tool) accountFailure(err error) *sdk.CallToolResult {
	if cr := (*upstream.ConnectRequired)(nil); errors.As(err, &cr) {
		return toolError(fmt.Sprintf("The API %q acts as your own account there, and you have not connected it yet. Open %s to connect it, then try again.", t.api.opts.Name, cr.URL))
	}
	return toolError(fmt.Sprintf("Your connected account at the API %q cannot be used now; try again later, or connect it again.", t.api.opts.Name))
}

// code is " (<OAuth error code>)", or nothing without one.
func code(c string) string {
	if c == "" {
		return ""
	}
	return " (" + c + ")"
}

func toolError(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// excerpt returns the start of an error response's body to show with
// the status: valid UTF-8, at most excerptBytes, with every secret
// replaced; empty for no body.
func excerpt(body []byte, secrets []string) string {
	s := string(body)
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	cut := len(s) > excerptBytes
	if cut {
		s = s[:excerptBytes]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return " The response: " + strings.ToValidUTF8(s, "�")
}

// jsonMedia reports whether a Content-Type is JSON (application/json or
// a +json type).
func jsonMedia(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
