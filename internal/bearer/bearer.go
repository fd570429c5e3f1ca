// Package bearer carries a caller's raw bearer token from the auth
// middleware to the one consumer allowed to use it: the RFC 8693 token
// exchange of upstreams (package upstream, wired by the root package).
//
// The token travels in the SDK's TokenInfo, which the SDK hands to every
// method handler per request (RequestExtra.TokenInfo), as a value whose
// type has only unexported fields and prints as "[redacted]". Code
// outside this module cannot import this package, so a tool handler that
// reads TokenInfo sees the value but cannot read the token.
package bearer

import (
	"fmt"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// extraKey is the key of the token in TokenInfo.Extra.
const extraKey = "portcullis.bearer"

// token holds a raw bearer token. It prints, marshals and logs as nothing
// of it.
type token struct{ v string }

// Format writes "[redacted]" for every verb, so that fmt and slog's text
// output never show the token.
func (*token) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[redacted]")) }

// MarshalJSON writes "[redacted]".
func (*token) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// MarshalText writes "[redacted]".
func (*token) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Set stores raw in extra, the Extra map of a TokenInfo being built.
func Set(extra map[string]any, raw string) {
	extra[extraKey] = &token{v: raw}
}

// FromTokenInfo returns the raw bearer token the auth middleware verified
// for the request ti belongs to, or false without one.
func FromTokenInfo(ti *sdkauth.TokenInfo) (string, bool) {
	if ti == nil {
		return "", false
	}
	t, ok := ti.Extra[extraKey].(*token)
	if !ok || t == nil || t.v == "" {
		return "", false
	}
	return t.v, true
}
