package clientreg

import "errors"

// The error codes of RFC 7591 §3.2.2 this package returns.
const (
	// CodeInvalidRedirectURI means a redirect URI is missing or refused.
	CodeInvalidRedirectURI = "invalid_redirect_uri"
	// CodeInvalidClientMetadata means another metadata field is refused.
	CodeInvalidClientMetadata = "invalid_client_metadata"
)

// ErrorResponse is the body of an RFC 7591 §3.2.2 error response, which
// the registration endpoint sends with status 400.
type ErrorResponse struct {
	// Error is the error code, such as [CodeInvalidRedirectURI].
	Error string `json:"error"`
	// Description is a sentence for the client's developer.
	Description string `json:"error_description,omitempty"`
}

// RegistrationError is why client metadata was refused, as RFC 7591
// describes it. Its Description names the field and the rule, never
// anything but what the client itself sent, so it may be shown to the
// client.
type RegistrationError struct {
	// Code is [CodeInvalidRedirectURI] or [CodeInvalidClientMetadata].
	Code string
	// Description says which field broke which rule.
	Description string
}

// Error returns "clientreg: " followed by the code and the description.
func (e *RegistrationError) Error() string {
	return "clientreg: " + e.Code + ": " + e.Description
}

// Response returns the RFC 7591 error response body for e.
func (e *RegistrationError) Response() ErrorResponse {
	return ErrorResponse{Error: e.Code, Description: e.Description}
}

// Errors [Fetcher.Get] wraps, for callers to branch on with errors.Is.
var (
	// ErrInvalidClientID means the client_id is not a URL a metadata
	// document may be fetched from; nothing was fetched.
	ErrInvalidClientID = errors.New("clientreg: invalid client_id URL")
	// ErrFetch means the document could not be fetched: a refused
	// address, a network error or timeout, a status other than 200 (a
	// redirect included), a wrong Content-Type, or a body over the cap.
	ErrFetch = errors.New("clientreg: fetching the client metadata document failed")
	// ErrDocument means the document was fetched but refused. The error
	// chain also holds a [*RegistrationError] with a description that may
	// be shown to the client.
	ErrDocument = errors.New("clientreg: client metadata document refused")
)
