package limits

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestZeroOptions builds a limiter from the zero Options: it gets the
// default caps and lets a request through.
func TestZeroOptions(t *testing.T) {
	l, err := New(Options{}, Deps{Key: func(*http.Request) string { return "p" }})
	if err != nil {
		t.Fatalf("New(Options{}): %v", err)
	}
	rec := httptest.NewRecorder()
	l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })).
		ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d, want 204", rec.Code)
	}
}
