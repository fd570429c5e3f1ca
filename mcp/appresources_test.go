package mcp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/portcullis-mcp/portcullis/internal/curation"
)

// appRead reads uri in era on the endpoint at url: a 2025-11-25 request
// without a session, or a 2026-07-28 one.
func appRead(t *testing.T, url, era, uri string) response {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer -", "Mcp-Protocol-Version": era}
	meta := ""
	if era == modernHdr {
		h["Mcp-Method"], h["Mcp-Name"] = "resources/read", uri
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	}
	return post(t, url, `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"`+uri+`"`+meta+`}}`, h)
}

// readContents is the URI and text of a read's first contents; "" for an
// error.
func readContents(r response) (uri, text string) {
	res, _ := r.message["result"].(map[string]any)
	contents, _ := res["contents"].([]any)
	if len(contents) == 0 {
		return "", ""
	}
	c, _ := contents[0].(map[string]any)
	uri, _ = c["uri"].(string)
	text, _ = c["text"].(string)
	return uri, text
}

// TestAppReadsByUpstreamURIs checks, in both eras, on /mcp and on views,
// that a resources/read of an App resource by its URI in its upstream
// reads the one resource served here that it stands for, under the URI
// asked for; that a URI several served resources stand for is refused
// naming their URIs; and that a view reaches nothing it does not serve
// by any URI.
func TestAppReadsByUpstreamURIs(t *testing.T) {
	const own = "ui://get-time/mcp-app.html"
	type want struct {
		text      string   // the HTML read, under own
		ambiguous []string // else the URIs the error names
	}
	tests := []struct {
		name     string
		exposure *curation.Exposure
		reads    map[string]want
	}{
		{name: "mcp", reads: map[string]want{
			own:                              {ambiguous: []string{"ui://a/get-time/mcp-app.html", "ui://b/get-time/mcp-app.html"}},
			"ui://a/get-time/mcp-app.html":   {text: "<html>a</html>"},
			"ui://a/a/get-time/mcp-app.html": {},
			"ui://nothing.html":              {},
		}},
		{name: "view of a", exposure: &curation.Exposure{Tools: []curation.ToolSelection{{Source: "a", Name: "get-time", ExposeAs: "clock"}}}, reads: map[string]want{
			own:                            {text: "<html>a</html>"},
			"ui://a/get-time/mcp-app.html": {text: "<html>a</html>"},
			"ui://b/get-time/mcp-app.html": {},
		}},
		{name: "view of b's plain tool", exposure: &curation.Exposure{Tools: []curation.ToolSelection{{Source: "b", Name: "only-b"}}}, reads: map[string]want{
			own:                            {},
			"ui://b/get-time/mcp-app.html": {},
		}},
	}
	for _, era := range eras {
		for _, tt := range tests {
			t.Run(era+"/"+tt.name, func(t *testing.T) {
				ts := appEndpoint(t, appCatalog(t, &appServers{}), tt.exposure, nil)
				for uri, w := range tt.reads {
					r := appRead(t, ts.URL, era, uri)
					gotURI, text := readContents(r)
					switch {
					case w.text != "":
						if text != w.text || gotURI != uri {
							t.Errorf("%s: %d %s, want %s under the URI read", uri, r.status, r.body, w.text)
						}
					case w.ambiguous != nil:
						msg := errorMessage(r.message)
						if errorCode(r.message) != jsonrpc.CodeInvalidParams || !strings.Contains(msg, "Ambiguous resource URI") ||
							!strings.Contains(msg, `"`+strings.Join(w.ambiguous, `", "`)+`"`) {
							t.Errorf("%s: %d %s, want the ambiguity error naming %v", uri, r.status, r.body, w.ambiguous)
						}
					default:
						if text != "" || r.message["error"] == nil && r.status == http.StatusOK {
							t.Errorf("%s: %d %s, want it not found", uri, r.status, r.body)
						}
					}
				}
			})
		}
	}
}
