package authserver

import (
	"math"
	"net/http"
	"strconv"
)

// Handler serves the endpoints and the metadata.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetadata, cors(http.HandlerFunc(s.serveMetadata)))
	mux.Handle("GET "+PathOpenID, cors(http.HandlerFunc(s.serveMetadata)))
	mux.Handle("GET "+PathJWKS, cors(http.HandlerFunc(s.serveJWKS)))
	mux.HandleFunc("GET "+PathAuthorize, s.limit("authorize", s.serveAuthorize))
	mux.HandleFunc("GET "+PathCallback, s.serveCallback)
	mux.HandleFunc("GET "+PathConsent, s.serveConsentPage)
	mux.HandleFunc("GET "+PathContinue, s.serveContinue)
	mux.HandleFunc("POST "+PathConsent, s.serveConsent)
	mux.Handle("POST "+PathToken, cors(s.limit("token", s.serveToken)))
	mux.Handle("POST "+PathRevoke, cors(s.limit("revoke", s.serveRevoke)))
	corsPaths := []string{PathMetadata, PathOpenID, PathJWKS, PathToken, PathRevoke}
	if s.registrar != nil {
		mux.Handle("POST "+PathRegister, cors(s.limit("register", s.serveRegister)))
		corsPaths = append(corsPaths, PathRegister)
	}
	for _, p := range corsPaths {
		mux.Handle("OPTIONS "+p, cors(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	}
	return mux
}

// Paths are the paths Handler serves, for the caller's mux.
func (s *Server) Paths() []string {
	return []string{PathMetadata, PathOpenID, "/oauth/"}
}

// cors lets a browser-based client on any origin read the metadata and
// call the token endpoints: they take no cookies, and their answers are
// for whoever holds the code or token sent.
func cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			hd.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
			hd.Set("Access-Control-Max-Age", "600")
		}
		h.ServeHTTP(w, r)
	})
}

// limit wraps h with the address limiter: a refused request gets 429 with
// Retry-After, in the endpoint's format (OAuth JSON, or a page for a
// browser's authorize request).
func (s *Server) limit(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ok, wait := s.rate.allow(r)
		if ok {
			h(w, r)
			return
		}
		s.observe(Event{Endpoint: endpoint, Outcome: "refused", Reason: "rate_limited"})
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		if endpoint == "authorize" {
			s.page(w, http.StatusTooManyRequests, "Too many requests", "Too many sign-ins from this address; try again in a moment.")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "slow_down", "error_description": "Too many requests from this address; retry after the Retry-After delay."})
	}
}
