package mcpmethod

import "testing"

func TestMethods(t *testing.T) {
	tests := []struct {
		method              string
		request, notication bool
	}{
		{method: "tools/call", request: true},
		{method: "initialize", request: true},
		{method: "server/discover", request: true},
		{method: "notifications/initialized", notication: true},
		{method: "notifications/cancelled", notication: true},
		{method: "tools/destroy"},
		{method: "Tools/call"},
		{method: ""},
		// Server-to-client methods are not a client's to send.
		{method: "sampling/createMessage"},
		{method: "notifications/tools/list_changed"},
	}
	for _, tt := range tests {
		if got := IsRequest(tt.method); got != tt.request {
			t.Errorf("IsRequest(%q) = %v, want %v", tt.method, got, tt.request)
		}
		if got := IsNotification(tt.method); got != tt.notication {
			t.Errorf("IsNotification(%q) = %v, want %v", tt.method, got, tt.notication)
		}
	}
}
