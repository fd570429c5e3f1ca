package auth

import (
	"errors"
	"fmt"
)

// Reason says why a request was or was not authenticated. Reasons are stable
// strings: the middleware maps them to HTTP statuses, and the telemetry hook
// uses them as a metric label.
type Reason string

// The reasons a token or request can be refused.
const (
	ReasonMissing                Reason = "missing"                 // no Authorization header
	ReasonMalformed              Reason = "malformed"               // not a JWT, bad header syntax, token in the query string
	ReasonExpired                Reason = "expired"                 // exp (plus skew) is in the past
	ReasonNotYetValid            Reason = "not_yet_valid"           // nbf or iat (minus skew) is in the future
	ReasonBadSignature           Reason = "bad_signature"           // signature does not verify, or a disallowed algorithm
	ReasonWrongAudience          Reason = "wrong_audience"          // aud names none of the accepted audiences
	ReasonWrongIssuer            Reason = "wrong_issuer"            // iss is not a configured issuer
	ReasonWrongTokenType         Reason = "wrong_token_type"        // a JWT that is not an access token (typ not at+jwt, an ID token)
	ReasonUnknownKey             Reason = "unknown_key"             // kid not in the issuer's key set, even after a refresh
	ReasonInsufficientScope      Reason = "insufficient_scope"      // valid token without the scopes or roles needed
	ReasonIntrospectionFailed    Reason = "introspection_failed"    // the introspection endpoint could not answer
	ReasonIntrospectionThrottled Reason = "introspection_throttled" // a token in neither cache while introspection calls are over their bound
	ReasonInactive               Reason = "inactive"                // introspection said active=false
	ReasonInvalid                Reason = "invalid"                 // any other defect (missing exp, missing required claim…)
)

// Error is the error a [Verifier] returns. Callers branch on Reason with
// [errors.As] or compare with the sentinels ([ErrExpired], …) using
// [errors.Is]. Err holds detail for logs; it never contains the token and is
// never sent to clients.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "auth: " + string(e.Reason)
	}
	return "auth: " + string(e.Reason) + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error sentinel with the same Reason, so
// errors.Is(err, ErrExpired) works for any expired-token error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Err == nil && t.Reason == e.Reason
}

// Sentinels, one per [Reason], for use with [errors.Is].
var (
	ErrMissing                = &Error{Reason: ReasonMissing}
	ErrMalformed              = &Error{Reason: ReasonMalformed}
	ErrExpired                = &Error{Reason: ReasonExpired}
	ErrNotYetValid            = &Error{Reason: ReasonNotYetValid}
	ErrBadSignature           = &Error{Reason: ReasonBadSignature}
	ErrWrongAudience          = &Error{Reason: ReasonWrongAudience}
	ErrWrongIssuer            = &Error{Reason: ReasonWrongIssuer}
	ErrWrongTokenType         = &Error{Reason: ReasonWrongTokenType}
	ErrUnknownKey             = &Error{Reason: ReasonUnknownKey}
	ErrInsufficientScope      = &Error{Reason: ReasonInsufficientScope}
	ErrIntrospectionFailed    = &Error{Reason: ReasonIntrospectionFailed}
	ErrIntrospectionThrottled = &Error{Reason: ReasonIntrospectionThrottled}
	ErrInactive               = &Error{Reason: ReasonInactive}
	ErrInvalid                = &Error{Reason: ReasonInvalid}
)

// ReasonOf returns the Reason carried by err, or [ReasonInvalid] when err
// carries none (an unexpected error still refuses the token).
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonInvalid
}

// fail builds an *Error with a formatted detail.
func fail(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Err: fmt.Errorf(format, args...)}
}
