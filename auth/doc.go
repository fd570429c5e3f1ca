// Package auth makes Portcullis an OAuth 2.1 resource server: it verifies
// bearer tokens, puts the caller's [Principal] in the request context,
// decides per-tool access, and serves the Protected Resource Metadata that
// lets an MCP client find the authorization server.
//
// # Configuring
//
// [Options] is the `auth:` section of the config file. Call
// [Options.Defaults], then [Options.Validate], which lists every problem at
// once. Auth is on when [Options.Enabled]: at least one issuer or an
// introspection endpoint.
//
//	auth:
//	  resource: https://mcp.example.com/mcp
//	  issuers:
//	    - issuer: https://login.example.com
//	      audiences: [api://portcullis]
//	  required_scopes: [mcp:tools]
//	  policy:
//	    - tool: deploy
//	      scopes: [deploy:write]
//
// # Verifying tokens
//
// [NewVerifier] builds a [Verifier]: for a JWT it picks the issuer by the
// (unverified) "iss", then go-oidc checks the signature against the
// issuer's key set with the configured algorithm allow-list ("none" and HMAC
// are never accepted); auth itself checks that the token is an access
// token (JOSE typ at+jwt, RFC 9068; see
// [IssuerOptions.AllowUntypedAccessTokens]), exp (required), nbf and iat
// with [Options.ClockSkew], the audience ([Options.Resource] plus
// [IssuerOptions.Audiences]; an empty list accepts nothing), sub and
// required claims. Key sets are fetched on first use (or by [Readier.Ready]), found
// by OpenID Connect discovery or RFC 8414 unless a JWKS URL is given, and
// refreshed when a token names an unknown kid, at most once per
// [Options.JWKSRefreshInterval] whatever the number of kids. When the IdP is
// down, the keys already loaded keep working. Tokens that are not JWTs go to
// RFC 7662 introspection when it is configured, whose answer is held to
// the same rules: an audience naming this resource (see
// [IntrospectionOptions.AllowMissingAudience]), a sub, and exp, nbf, iat
// and iss when present. Successful verifications
// are cached by the SHA-256 of the token until the earlier of the token's
// exp and [Options.CacheTTL].
//
// Every refusal is an *[Error] whose [Reason] says why; [ReasonOf] reads it.
//
// # Guarding the endpoint
//
// [Middleware] wraps the MCP handler: it takes the token only from the
// Authorization header, answers 401/400/403/503 with the right
// WWW-Authenticate challenge, reports an [Event] to a [Hook] for every
// request, and on success stores the [Principal] ([PrincipalFrom]) and the
// SDK's auth.TokenInfo, whose UserID (issuer "|" subject) the SDK uses to
// bind sessions to their user. It never logs a token.
//
// [MetadataHandler] serves RFC 9728 metadata; mount it at
// [MetadataWellKnown] and at [MetadataPath](resource), and name
// [MetadataURL](resource) in the challenge.
//
// [Policy] decides which tools a principal may see and call. The MCP layer
// hides a tool from a principal it refuses: the tool is not listed, and a
// call of it is answered as a call of a tool that does not exist, never
// with a 403 that would confirm it exists ([Policy.Needed] goes to the log
// only). [WriteInsufficientScope] is the middleware's answer to a token
// without [Options.RequiredScopes].
package auth
