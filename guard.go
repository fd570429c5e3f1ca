package portcullis

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
)

// principalKey is what the per-principal limits key on: the token's issuer,
// subject and client id. With auth off there is none, and only the overall
// in-flight cap applies: keying on the client address would put every
// caller behind one proxy in one bucket.
func principalKey(r *http.Request) string {
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		return p.Key()
	}
	return ""
}

// limitHook receives every refusal by a limit (internal/limits and the MCP
// layer's body size, session cap and tool timeout): it counts it in
// metrics, logs it at debug level and records its audit event.
func limitHook(logger *slog.Logger, metrics *observability.Metrics, au *auditor) limits.Hook {
	return func(ctx context.Context, ev limits.Event) {
		au.limitRefused(ctx, string(ev.Limit), ev.Tool)
		if ev.Limit == limits.LimitRate {
			metrics.RateLimited("principal")
		} else {
			metrics.LimitRejected(string(ev.Limit))
		}
		logger.DebugContext(ctx, "limit reached", "limit", string(ev.Limit), "tool", ev.Tool)
	}
}

// authGuard returns the middleware that guards /mcp: the bearer token is
// verified, and the caller's Principal put in the request context. With
// auth off (loopback only, or the loud opt-out) /mcp is open, and the tools
// that the policy guards are hidden (see newApp). Readiness waits for the
// issuers' keys; auth outcomes are counted in metrics.
func authGuard(ctx context.Context, o auth.Options, metrics *observability.Metrics, logger *slog.Logger, health *observability.Health, au *auditor) (func(http.Handler) http.Handler, error) {
	if !o.Enabled() {
		if o.InsecureAllowUnauthenticated {
			logger.Warn("auth.insecure_allow_unauthenticated is on: /mcp accepts calls from anyone who can reach it")
		}
		return func(h http.Handler) http.Handler { return h }, nil
	}
	for i, iss := range o.Issuers {
		if iss.AllowHTTP {
			logger.Warn("an issuer is allowed over plain http; tokens and keys can be tampered with in transit", "key", fmt.Sprintf("auth.issuers[%d].allow_http", i), "issuer", iss.Issuer)
		}
		if iss.AllowUntypedAccessTokens {
			logger.Warn("an issuer's JWTs are accepted without typ at+jwt; only the ID-token claims tell its ID tokens from its access tokens", "key", fmt.Sprintf("auth.issuers[%d].allow_untyped_access_tokens", i), "issuer", iss.Issuer)
		}
	}
	if o.Introspection.AllowMissingAudience {
		logger.Warn("introspected tokens without an audience are accepted; a token the authorization server issued for another service is accepted here too", "key", "auth.introspection.allow_missing_audience")
	}
	v, err := auth.NewVerifier(ctx, o, auth.Deps{Logger: logger})
	if err != nil {
		return nil, err
	}
	if r, ok := v.(auth.Readier); ok {
		// The key sets log why (see auth.Deps.Logger); /readyz, which
		// anyone may call, says only what is not ready.
		health.AddCheck("issuer keys not loaded", r.Ready)
		// Fetch the keys now, in the background: the first request need
		// not wait for them, and an unreachable issuer is logged at start.
		go func() { _ = r.Ready(ctx) }()
	}
	hook := func(ctx context.Context, e auth.Event) {
		metrics.AuthEvent(e.Outcome, string(e.Reason))
		au.authRefused(ctx, e)
	}
	return auth.Middleware(v, o, auth.MetadataURL(o.Resource), auth.Deps{Logger: logger, Hook: hook}), nil
}

// stepUp returns how /mcp answers a call of a tool the caller sees but
// may not call: the spec's step-up, 403 with a WWW-Authenticate challenge
// naming the scopes to ask for, the union of those the token holds and
// those the call needs, so that a client that authorizes them afresh keeps
// what it had. Nil with auth off (authOn false): there is no token to
// step up. authOn is configFile.authOn, not o.Enabled: the app is built
// before setupAuthServer adds the authorization server's issuer to o.
func stepUp(o auth.Options, authOn bool) func(http.ResponseWriter, *http.Request, []string) {
	if !authOn {
		return nil
	}
	metadataURL := auth.MetadataURL(o.Resource)
	return func(w http.ResponseWriter, r *http.Request, needed []string) {
		scopes := needed
		if p, ok := auth.PrincipalFrom(r.Context()); ok {
			scopes = o.AdvertisedScopes(p.Scopes)
			for _, s := range needed {
				if !slices.Contains(scopes, s) {
					scopes = append(scopes, s)
				}
			}
		}
		auth.WriteInsufficientScope(w, metadataURL, scopes)
	}
}

// toolDeniedHook receives every tools/call the server named server (empty
// for the root server) answered as an unknown tool or with the step-up
// 403: it counts it in portcullis_tool_calls_denied_total (the tool label
// bounded as the operation metric's: a name known says is the server's,
// or _OTHER; with the root server's name from original when the server
// renamed it, original nil meaning never) and logs it with the caller, as
// auth failures are logged: at Info when the policy refused a registered
// tool, at Debug for a name that is not registered (so a scanner cannot
// flood the log), and records its audit event. Never the token or the
// arguments.
func toolDeniedHook(logger *slog.Logger, metrics *observability.Metrics, server string, known func(string) bool, original func(string) string, au *auditor) mcp.DenialHook {
	return func(ctx context.Context, d mcp.Denial) {
		counted := observability.ToolDenial{Server: server, Reason: d.Reason, Tool: observability.Other}
		if known(d.Tool) {
			counted.Tool = d.Tool
			if original != nil {
				if orig := original(d.Tool); orig != d.Tool {
					counted.ToolOriginal = orig
				}
			}
		}
		metrics.ToolDenied(counted)
		au.refused(ctx, server, toolRefusal{info: d.Info, tool: counted.Tool, original: counted.ToolOriginal, calledAs: truncateName(d.CalledAs), reason: d.Reason, rule: d.Rule, needed: d.Needed})
		level := slog.LevelDebug
		if d.Reason == mcp.DenialPolicy || d.Reason == mcp.DenialStepUp || d.Reason == mcp.DenialRule {
			level = slog.LevelInfo
		}
		if !logger.Enabled(ctx, level) {
			return
		}
		attrs := []slog.Attr{slog.String("reason", d.Reason), slog.String("tool", truncateName(d.Tool))}
		if d.Rule != "" {
			attrs = append(attrs, slog.String("rule", d.Rule))
		}
		if d.CalledAs != "" {
			attrs = append(attrs, slog.String("tool_called_as", truncateName(d.CalledAs)))
		}
		if server != "" {
			attrs = append(attrs, slog.String("server", server))
		}
		if p, ok := auth.PrincipalFromTokenInfo(d.Info); ok {
			attrs = append(attrs, slog.String("issuer", p.Issuer), slog.String("client_id", p.ClientID), slog.String("subject", p.Subject))
		}
		if len(d.Needed) > 0 {
			attrs = append(attrs, slog.Any("needed_scopes", d.Needed))
		}
		logger.LogAttrs(ctx, level, "tool call denied", attrs...)
	}
}

// toolPolicy returns the per-tool policy, or nil when auth.policy is empty:
// then every tool is open to whoever the middleware let in (which already
// checked auth.required_scopes), and the MCP layer skips the per-call and
// per-list checks.
func toolPolicy(o auth.Options) mcp.ToolPolicy {
	if len(o.Policy) == 0 {
		return nil
	}
	return auth.NewPolicy(o).Decide
}
