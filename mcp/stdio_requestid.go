package mcp

import (
	"context"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Read hands the SDK the next message. A request gets the header of its
// Extra with its id under [RequestIDHeader], as the HTTP handler passes
// the id of a single-request POST: the SDK gives middleware a request's
// Extra but not its id, which telemetry records as jsonrpc.request.id.
// The header has no Content-Type, which tells telemetry that the request
// did not come over HTTP.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Extra == nil {
		if id, ok := requestIDText(req.ID); ok {
			req.Extra = &sdk.RequestExtra{Header: http.Header{RequestIDHeader: {id}}}
		}
	}
	return msg, err
}

// requestIDText is a request id as jsonrpc.request.id records it: a
// string as is, a number in decimal.
func requestIDText(id jsonrpc.ID) (string, bool) {
	switch v := id.Raw().(type) {
	case string:
		return v, true
	case int64:
		return strconv.FormatInt(v, 10), true
	}
	return "", false
}
