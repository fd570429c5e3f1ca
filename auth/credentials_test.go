package auth

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestWithoutCredentials(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/mcp", http.NoBody)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Mcp-Method", "tools/call")
	// Three values: the slice's capacity is then more than its length.
	req.Header["Accept"] = append(append(append([]string(nil), "a"), "b"), "c")
	var inner http.Header
	withoutCredentials(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		inner = r.Header
		r.Header.Add("Accept", "added inside")
		r.Header.Set("Mcp-Method", "changed inside")
	})).ServeHTTP(httptest.NewRecorder(), req)

	if v := inner.Values("Authorization"); len(v) != 0 {
		t.Errorf("the handler past auth sees Authorization %q, want none", v)
	}
	if got := inner.Values("Accept"); !slices.Equal(got, []string{"a", "b", "c", "added inside"}) {
		t.Errorf("the handler past auth sees Accept %q", got)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer secret" {
		t.Errorf("the outer request's Authorization is %q, want it kept", got)
	}
	if got := req.Header.Values("Accept"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("the outer request's Accept is %q after an Add past auth, want a b c", got)
	}
	if got := req.Header.Get("Mcp-Method"); got != "tools/call" {
		t.Errorf("the outer request's Mcp-Method is %q after a Set past auth, want tools/call", got)
	}
	// An Add past auth must not write into the outer request's array.
	if full := req.Header["Accept"][:cap(req.Header["Accept"])]; slices.Contains(full, "added inside") {
		t.Errorf("an Add past auth wrote into the outer request's Accept array: %q", full)
	}
}
