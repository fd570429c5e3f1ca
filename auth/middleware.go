package auth

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/internal/bearer"
)

// Middleware guards next (the /mcp handler) with bearer tokens:
//
//   - the token comes only from the Authorization header; a token in the
//     query string (access_token) is refused with 400 invalid_request, and so
//     are two Authorization headers, "Bearer" with no or a syntactically
//     invalid token, and a token longer than [MaxTokenSize];
//   - no Authorization header, or one with another scheme ("Basic …"): 401
//     with WWW-Authenticate: Bearer resource_metadata="…", scope="…";
//   - a token that fails verification: 401 with error="invalid_token" and an
//     error_description naming the reason (never the token);
//   - introspection endpoint down: 503 (fail closed);
//   - a token in neither of introspection's caches while its calls are over
//     IntrospectionOptions.MaxCallsPerSecond: 503 with Retry-After (fail
//     closed, reason introspection_throttled);
//   - a valid token without o.RequiredScopes: 403 error="insufficient_scope".
//
// A refused request that has a body is answered at once, without reading
// it, with "Connection: close" (HTTP/1), so that a client that never
// sends the body it declared cannot hold the connection.
//
// On success the [Principal] is in the request context ([PrincipalFrom]),
// and so is the SDK's [sdkauth.TokenInfo] with UserID issuer+"|"+subject,
// which the SDK uses to bind sessions to the user. Denials go to
// deps.Logger at Info with the reason, never the token, and every outcome
// to deps.Hook.
func Middleware(v Verifier, o Options, metadataURL string, deps Deps) func(http.Handler) http.Handler {
	logger, hook := deps.Logger, deps.Hook
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if hook == nil {
		hook = func(context.Context, Event) {}
	}
	required := append([]string(nil), o.RequiredScopes...)
	// The challenges name the scopes as a client must ask for them.
	challenge := o.AdvertisedScopes(required)
	return func(next http.Handler) http.Handler {
		// The SDK keeps its TokenInfo context key private; the exported way
		// to set it is its own middleware, given the principal we verified.
		withTokenInfo := sdkauth.RequireBearerToken(func(ctx context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
			p, _ := PrincipalFrom(ctx)
			// A cached principal's, made once for the token it is cached
			// under.
			if p.tokenInfo != nil {
				if t, _ := bearer.FromTokenInfo(p.tokenInfo); t == token {
					return p.tokenInfo, nil
				}
			}
			return p.newTokenInfo(token), nil
		}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true, ClockSkew: o.ClockSkew})(withoutCredentials(next))

		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			deny := func(reason Reason, p *Principal, detail error) {
				ev := Event{Outcome: OutcomeDenied, Reason: reason}
				if p != nil {
					ev.Issuer, ev.ClientID = p.Issuer, p.ClientID
				}
				hook(ctx, ev)
				attrs := []slog.Attr{slog.String("reason", string(reason)), slog.String("method", r.Method), slog.String("path", r.URL.Path)}
				if p != nil {
					attrs = append(attrs, slog.String("issuer", p.Issuer), slog.String("client_id", p.ClientID), slog.String("subject", p.Subject))
				}
				if detail != nil {
					attrs = append(attrs, slog.String("detail", detailText(detail)))
				}
				logger.LogAttrs(ctx, slog.LevelInfo, "auth: request denied", attrs...)
			}

			token, reason := bearerToken(r)
			if reason != "" {
				closeUnreadBody(w, r)
			}
			switch reason {
			case "":
			case ReasonMissing:
				writeChallenge(w, http.StatusUnauthorized, metadataURL, challenge, "", "")
				deny(reason, nil, nil)
				return
			default:
				writeChallenge(w, http.StatusBadRequest, metadataURL, challenge, "invalid_request", "malformed request: send the token only in one Authorization: Bearer header")
				deny(reason, nil, nil)
				return
			}
			p, err := v.Verify(ctx, token)
			if err == nil && p == nil {
				err = fail(ReasonInvalid, "verifier returned no principal")
			}
			if err != nil {
				closeUnreadBody(w, r)
				reason := ReasonOf(err)
				switch reason {
				case ReasonIntrospectionFailed:
					w.Header().Set("Retry-After", "5")
					http.Error(w, "authorization server unavailable", http.StatusServiceUnavailable)
				case ReasonIntrospectionThrottled:
					// Fail closed: the token may be fine, so the client
					// should retry, not re-authenticate.
					w.Header().Set("Retry-After", "1")
					w.Header().Set("Cache-Control", "no-store")
					http.Error(w, "too many new tokens to verify; retry shortly", http.StatusServiceUnavailable)
				case ReasonInsufficientScope:
					WriteInsufficientScope(w, metadataURL, challenge)
				default:
					writeChallenge(w, http.StatusUnauthorized, metadataURL, challenge, "invalid_token", "token "+describe(reason))
				}
				deny(reason, nil, err)
				return
			}
			if !p.HasScopes(required...) {
				closeUnreadBody(w, r)
				WriteInsufficientScope(w, metadataURL, challenge)
				deny(ReasonInsufficientScope, p, nil)
				return
			}
			hook(ctx, Event{Outcome: OutcomeAllowed, Issuer: p.Issuer, ClientID: p.ClientID})
			r = r.WithContext(WithPrincipal(ctx, p))
			withTokenInfo.ServeHTTP(w, r)
		})
	}
}

// closeUnreadBody marks a refusal of an HTTP/1 request that has a body
// "Connection: close". Auth refuses before anything reads the body, and
// net/http would otherwise read it before answering, so a client that
// declares a body it never sends, or trickles it, would wait for its 401
// (and hold the connection) until server.read_body_timeout. Closed, the
// connection answers at once and is not reused (the body deadline
// middleware does not wait for the body either). HTTP/2 streams are left
// alone: there the header would close every stream of the connection.
func closeUnreadBody(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// withoutCredentials hands next the request without its Authorization
// header. By then the token is verified and its principal is in the
// context, and nothing past auth needs the token itself: the SDK passes
// every request's headers on to tool handlers (RequestExtra.Header) and
// keeps a legacy session's initialize request for the session's life. So
// a tool cannot forward the caller's token upstream, and an idle session
// does not hold it in memory. The header map is copied, not changed: the
// layers outside auth keep the request as it came. The copy shares the
// value slices, capped at their length, so that an Add past auth
// reallocates instead of writing into the outer request's array.
func withoutCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := *r
		r2.Header = make(http.Header, len(r.Header))
		for k, v := range r.Header {
			if k != "Authorization" {
				r2.Header[k] = v[:len(v):len(v)]
			}
		}
		next.ServeHTTP(w, &r2)
	})
}

// bearerToken extracts the token, or says why it cannot.
func bearerToken(r *http.Request) (string, Reason) {
	if r.URL.RawQuery != "" && r.URL.Query().Has("access_token") {
		return "", ReasonMalformed
	}
	vals := r.Header.Values("Authorization")
	switch len(vals) {
	case 0:
		return "", ReasonMissing
	case 1:
	default:
		return "", ReasonMalformed
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// Another scheme carries no bearer credentials: answer with our challenge.
		return "", ReasonMissing
	}
	token := strings.TrimSpace(rest)
	if token == "" || len(token) > MaxTokenSize || !isB64Token(token) {
		return "", ReasonMalformed
	}
	return token, ""
}

// isB64Token checks RFC 6750 b64token syntax.
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// describe is the client-facing text for a reason.
func describe(r Reason) string {
	switch r {
	case ReasonExpired:
		return "expired"
	case ReasonNotYetValid:
		return "not yet valid"
	case ReasonBadSignature:
		return "signature invalid or algorithm not allowed"
	case ReasonWrongAudience:
		return "audience does not include this resource"
	case ReasonWrongIssuer:
		return "issuer not trusted"
	case ReasonWrongTokenType:
		return "is not an access token"
	case ReasonUnknownKey:
		return "signed with an unknown key"
	case ReasonInactive:
		return "not active"
	case ReasonMalformed:
		return "malformed"
	default:
		return "invalid"
	}
}

// detailText is the log text of a verification error, bounded in length.
func detailText(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// WriteInsufficientScope writes a 403 with error="insufficient_scope"
// naming scopes, so the client can ask for them (step-up). [Middleware]
// uses it for a token without the endpoint's required scopes.
func WriteInsufficientScope(w http.ResponseWriter, metadataURL string, scopes []string) {
	writeChallenge(w, http.StatusForbidden, metadataURL, scopes, "insufficient_scope", "the token lacks the scopes needed")
}

// writeChallenge writes status with a Bearer challenge.
func writeChallenge(w http.ResponseWriter, status int, metadataURL string, scopes []string, code, desc string) {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	param := func(k, v string) {
		b.WriteString(sep)
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(strconv.Quote(v))
		sep = ", "
	}
	if metadataURL != "" {
		param("resource_metadata", metadataURL)
	}
	if len(scopes) > 0 {
		param("scope", strings.Join(scopes, " "))
	}
	if code != "" {
		param("error", code)
	}
	if desc != "" {
		param("error_description", desc)
	}
	w.Header().Set("WWW-Authenticate", b.String())
	w.Header().Set("Cache-Control", "no-store")
	body := http.StatusText(status)
	if code != "" {
		body = code
	}
	http.Error(w, body, status)
}
