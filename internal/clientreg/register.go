package clientreg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Defaults of [RegistrationOptions].
const (
	// DefaultRegistrationMaxBodyBytes is the default cap on a registration
	// request body.
	DefaultRegistrationMaxBodyBytes = 16 << 10
	// DefaultMaxRedirectURIs is the default cap on the number of redirect
	// URIs one client registers or one document lists.
	DefaultMaxRedirectURIs = 10
)

// RegistrationOptions bounds what [ValidateRegistration] accepts. The zero
// value means the defaults.
type RegistrationOptions struct {
	// MaxBodyBytes caps the request body. Zero means
	// [DefaultRegistrationMaxBodyBytes].
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// MaxRedirectURIs caps the number of redirect URIs. Zero means
	// [DefaultMaxRedirectURIs].
	MaxRedirectURIs int `yaml:"max_redirect_uris"`
}

// registrationAuthMethods are the token_endpoint_auth_method values a
// dynamic registration may ask for; whether to issue a secret for the last
// two is the caller's decision.
var registrationAuthMethods = []string{authMethodNone, "client_secret_basic", "client_secret_post"}

// ValidateRegistration checks the body of an RFC 7591 client registration
// request and returns the client's metadata with its defaults filled in
// (grant_types authorization_code and refresh_token, response_types code,
// token_endpoint_auth_method none). The returned ClientID is always empty:
// a client_id in the request is ignored, as are fields this package does
// not know (software_statement included: it is not verified, so none of
// its claims are used).
//
// The body must be one JSON object of at most o.MaxBodyBytes bytes with
// redirect_uris (see [Metadata.MatchRedirectURI] for how they are matched
// later). Each redirect URI is absolute, has no fragment and no user info,
// and is https, or http on a loopback host (127.0.0.1, [::1], localhost),
// or a private-use scheme in reverse-domain form with a dot, such as
// com.example.app:/callback; javascript:, data:, file: and their kind are
// refused by name. grant_types ⊆ {authorization_code, refresh_token} and
// holds authorization_code; response_types ⊆ {code};
// token_endpoint_auth_method is none, client_secret_basic or
// client_secret_post. client_name, software_id and software_version are
// at most 256 bytes of UTF-8 without control characters; client_uri and
// logo_uri are https URLs of at most 2048 bytes; scope follows RFC 6749
// §3.3 in at most 1024 bytes.
//
// A refusal is a [*RegistrationError] whose Code is
// [CodeInvalidRedirectURI] or [CodeInvalidClientMetadata] and whose
// [RegistrationError.Response] is the body to send with status 400.
func ValidateRegistration(body []byte, o RegistrationOptions) (*Metadata, error) {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultRegistrationMaxBodyBytes
	}
	if o.MaxRedirectURIs <= 0 {
		o.MaxRedirectURIs = DefaultMaxRedirectURIs
	}
	if len(body) > o.MaxBodyBytes {
		return nil, metadataErr(fmt.Sprintf("the request body is larger than %d bytes", o.MaxBodyBytes))
	}
	m, rerr := decodeMetadata(body)
	if rerr != nil {
		return nil, rerr
	}
	m.ClientID = ""
	if rerr := validateMetadata(m, o.MaxRedirectURIs, registrationAuthMethods, func(string) string { return "" }); rerr != nil {
		return nil, rerr
	}
	return m, nil
}

// decodeMetadata decodes one JSON object into Metadata, with an error
// description that names the field whose type is wrong.
func decodeMetadata(body []byte) (*Metadata, *RegistrationError) {
	var m Metadata
	if err := decodeObject(body, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// decodeObject decodes body, which must be a single JSON object, into v.
func decodeObject(body []byte, v any) *RegistrationError {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return metadataErr("the metadata must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			if strings.HasPrefix(te.Field, "redirect_uris") {
				return redirectErr("redirect_uris must be an array of strings")
			}
			return metadataErr(fmt.Sprintf("%s has the wrong type (%s)", clip(te.Field), te.Value))
		}
		return metadataErr("the metadata is not valid JSON")
	}
	return nil
}
