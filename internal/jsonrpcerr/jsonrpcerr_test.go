package jsonrpcerr

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLine(t *testing.T) {
	tests := []struct {
		name    string
		id      json.RawMessage
		code    int64
		message string
		want    string
	}{
		{name: "no id", code: ParseError, message: "Parse error.", want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error."}}` + "\n"},
		{name: "empty id", id: json.RawMessage{}, code: InvalidRequest, message: "m", want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}` + "\n"},
		{name: "number id", id: json.RawMessage(`7`), code: MethodNotFound, message: "m", want: `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"m"}}` + "\n"},
		{name: "string id", id: json.RawMessage(`"a"`), code: ServerError, message: "m", want: `{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"m"}}` + "\n"},
		{name: "an id that is not JSON", id: json.RawMessage(`{`), code: ServerError, message: "m", want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"m"}}` + "\n"},
		{name: "HTML is escaped", code: ServerError, message: "<a>", want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"\u003ca\u003e"}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Line(tt.id, tt.code, tt.message)); got != tt.want {
				t.Errorf("Line = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("Retry-After", "1")
	Write(w, http.StatusServiceUnavailable, json.RawMessage(`1`), ServerError, "busy")
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", w.Code)
	}
	if got := w.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q: a header set before the call is lost", got)
	}
	if want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"busy"}}` + "\n"; w.Body.String() != want {
		t.Errorf("body %s, want %s", w.Body, want)
	}
}
