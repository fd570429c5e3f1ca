package observability

import (
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRequestMeta(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  sdk.Request
		want string // the traceparent in _meta
	}{
		{name: "tools/list without params", req: &sdk.ListToolsRequest{}},
		{name: "notifications/initialized without params", req: &sdk.InitializedRequest{}},
		{name: "params without _meta", req: &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "echo"}}},
		{
			name: "traceparent in _meta",
			req: &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{
				Name: "echo",
				Meta: sdk.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			}},
			want: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := requestMeta(tt.req)["traceparent"].(string)
			if got != tt.want {
				t.Errorf("requestMeta(...)[traceparent] = %q, want %q", got, tt.want)
			}
			c := metaCarrier(tt.req)
			if (c != nil) != (tt.want != "") {
				t.Errorf("metaCarrier = %v, want a carrier only when _meta has a traceparent", c)
			}
			_ = protocolVersion(tt.req) // must not panic either
		})
	}
}
