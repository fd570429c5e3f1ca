package doctor

import (
	"context"
	"net/http"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// mcpMethod checks that a 2026-07-28 request whose Mcp-Method header does
// not match its body is refused (the SDK answers 400, code -32020), after a
// matching request is accepted, so the 400 is known to be about the header.
func (d *doctor) mcpMethod(ctx context.Context) {
	if d.blocked(CheckMcpMethod) || d.needsToken(CheckMcpMethod, "/mcp asks for a token before it reads headers") {
		return
	}
	hdr := map[string]string{mcpheader.ProtocolVersion: modernVersion, mcpheader.Method: "tools/list"}
	r, err := d.post(ctx, modernList, true, hdr)
	if err != nil {
		d.fail(CheckMcpMethod, "2026-07-28 tools/list: %v", err)
		return
	}
	if r.status != http.StatusOK {
		d.fail(CheckMcpMethod, "a well-formed 2026-07-28 tools/list got %s, want 200", r.describe())
		return
	}
	hdr[mcpheader.Method] = "ping"
	r, err = d.post(ctx, modernList, true, hdr)
	switch {
	case err != nil:
		d.fail(CheckMcpMethod, "2026-07-28 tools/list with Mcp-Method ping: %v", err)
	case r.status == http.StatusBadRequest:
		d.pass(CheckMcpMethod, "Mcp-Method ping on a tools/list body got 400%s", r.rpcError())
	default:
		d.fail(CheckMcpMethod, "Mcp-Method ping on a tools/list body got %s, want 400: a proxy between client and server may rewrite or drop Mcp-* headers", r.describe())
	}
}
