package mcp

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/loopback"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// CORS on /mcp. A browser page may call the endpoint when its origin is
// allowed: listed in [Options.AllowedOrigins], or, while that list is
// empty, a loopback page talking to a loopback server. Any other origin
// gets 403 and no CORS headers. A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) from an allowed origin is answered
// before auth, since browsers send no token on a preflight. Actual
// responses to an allowed origin name it in Access-Control-Allow-Origin
// (never "*": the answer depends on the origin, hence Vary: Origin) and
// expose the protocol's response headers. No cookies are involved (the
// token is a header), so Access-Control-Allow-Credentials is not sent.

// corsMaxAge is how long a browser may cache a preflight's answer. Browsers
// cap it (Chromium at two hours).
const corsMaxAge = 2 * time.Hour

var (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = strings.Join(mcpheader.Request, ", ")
	corsExposeHeaders = strings.Join(mcpheader.Response, ", ")
	corsMaxAgeSeconds = strconv.Itoa(int(corsMaxAge / time.Second))
)

// isPreflight reports whether r is a CORS preflight request.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// cors applies the Origin allow-list and CORS to r. It returns false when
// it has answered: a refused origin (403) or a preflight (204).
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if !h.originAllowed(r, origin) {
		h.logger.WarnContext(r.Context(), "origin not allowed", "origin", origin)
		// The refusal comes before auth and never reads the body: with
		// Connection: close, net/http (and limits.BodyDeadline) do not
		// wait for a body the client may never send, as for auth's
		// refusals (auth.Middleware). Not on HTTP/2, where it would close
		// every stream of the connection.
		if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			w.Header().Set("Connection", "close")
		}
		http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
		return false
	}
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Origin", origin)
	addVary(hdr, "Origin")
	if !isPreflight(r) {
		hdr.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		return true
	}
	addVary(hdr, "Access-Control-Request-Method")
	addVary(hdr, "Access-Control-Request-Headers")
	hdr.Set("Access-Control-Allow-Methods", corsAllowMethods)
	hdr.Set("Access-Control-Allow-Headers", allowHeaders(r.Header.Get("Access-Control-Request-Headers")))
	hdr.Set("Access-Control-Max-Age", corsMaxAgeSeconds)
	w.WriteHeader(http.StatusNoContent)
	return false
}

// allowHeaders is Access-Control-Allow-Headers for a preflight that asked
// for requested: the transport's headers, plus each Mcp-Param-* header
// asked for (their names depend on the tool, so they cannot be listed in
// advance; a wildcard would not cover Authorization).
func allowHeaders(requested string) string {
	out := corsAllowHeaders
	for name := range strings.SplitSeq(requested, ",") {
		name = strings.TrimSpace(name)
		if len(name) > len(mcpheader.ParamPrefix) && strings.EqualFold(name[:len(mcpheader.ParamPrefix)], mcpheader.ParamPrefix) && isToken(name) {
			out += ", " + name
		}
	}
	return out
}

// isToken reports whether s is an HTTP token (a valid header name).
func isToken(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// addVary adds name to the Vary header unless it is there.
func addVary(hdr http.Header, name string) {
	for _, v := range hdr.Values("Vary") {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), name) {
				return
			}
		}
	}
	hdr.Add("Vary", name)
}

// OriginGuard applies the Origin allow-list and CORS before next runs: a
// browser request from an origin the endpoint does not allow gets 403, a
// preflight from one it allows gets its answer, and actual requests from
// it get the CORS response headers. Put in front of the auth middleware,
// it refuses a page on another origin (a DNS-rebinding attack) without
// looking at its token, answers preflights (which carry no token), and
// puts the CORS headers on auth's 401 and 403 too, so that a browser client
// can read their WWW-Authenticate. The handler applies it again itself, so
// it is safe alone.
func (h *Handler) OriginGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.cors(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// originAllowed reports whether a browser origin may call the endpoint.
// With origins listed, it must be one of them: a page on another loopback
// port is another program (any local web server, a page it serves), so
// once the operator names the origins they trust, loopback pages must be
// named too. With none listed, it must be a loopback origin and the
// address the request arrived at loopback too (a local page talking to a
// local server, such as the MCP Inspector; a DNS-rebinding page has a
// non-loopback origin).
func (h *Handler) originAllowed(r *http.Request, origin string) bool {
	if len(h.origins) > 0 {
		return slices.Contains(h.origins, origin)
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !loopback.Host(local.String()) {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && loopback.Host(u.Host)
}
