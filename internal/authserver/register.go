package authserver

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/clientreg"
)

// serveRegister registers a public client: validated metadata, a random
// client_id, no secret (token_endpoint_auth_method none whatever was
// asked: RFC 7591 lets the server say what it registered).
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	reg := s.registrar
	w.Header().Set("Cache-Control", "no-store")
	if reg.token != nil {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), reg.token) != 1 {
			s.observe(Event{Endpoint: "register", Outcome: "refused", Reason: "invalid_token"})
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="registration needs the initial access token"`)
			writeJSON(w, http.StatusUnauthorized, clientreg.ErrorResponse{Error: "invalid_token", Description: "Registration on this server needs an initial access token (RFC 7591 §3)."})
			return
		}
	}
	if !reg.all.AllowN(reg.now(), 1) {
		s.observe(Event{Endpoint: "register", Outcome: "refused", Reason: "rate_limited"})
		s.logger.Warn("authorization server: registrations over registration.per_minute", "per_minute", reg.o.PerMinute)
		w.Header().Set("Retry-After", "60")
		writeJSON(w, http.StatusTooManyRequests, clientreg.ErrorResponse{Error: "slow_down", Description: "Too many registrations; retry later."})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, clientreg.DefaultRegistrationMaxBodyBytes))
	if err != nil {
		s.observe(Event{Endpoint: "register", Outcome: "refused", Reason: "invalid_client_metadata"})
		writeJSON(w, http.StatusBadRequest, clientreg.ErrorResponse{Error: clientreg.CodeInvalidClientMetadata, Description: "The body is not a JSON object within 16 KiB."})
		return
	}
	m, err := clientreg.ValidateRegistration(body, clientreg.RegistrationOptions{})
	var rerr *clientreg.RegistrationError
	if errors.As(err, &rerr) {
		s.observe(Event{Endpoint: "register", Outcome: "refused", Reason: rerr.Code})
		writeJSON(w, http.StatusBadRequest, rerr.Response())
		return
	}
	if err != nil {
		s.observe(Event{Endpoint: "register", Outcome: "refused", Reason: clientreg.CodeInvalidClientMetadata})
		writeJSON(w, http.StatusBadRequest, clientreg.ErrorResponse{Error: clientreg.CodeInvalidClientMetadata, Description: "The client metadata is invalid."})
		return
	}
	for _, sc := range strings.Fields(m.Scope) {
		if !containsString(s.scopes, sc) {
			s.observe(Event{Endpoint: "register", Outcome: "refused", Reason: "invalid_client_metadata"})
			writeJSON(w, http.StatusBadRequest, clientreg.ErrorResponse{Error: clientreg.CodeInvalidClientMetadata, Description: fmt.Sprintf("Scope %q is not one this server issues.", sc)})
			return
		}
	}
	m.ClientID = "dcr-" + randomString(18)
	m.TokenEndpointAuthMethod = "none"
	b, err := json.Marshal(m)
	if err != nil {
		s.observe(Event{Endpoint: "register", Outcome: "error", Reason: "encode"})
		writeJSON(w, http.StatusInternalServerError, clientreg.ErrorResponse{Error: "server_error"})
		return
	}
	if err := s.kv.Set(ctx, registeredKey(m.ClientID), b, reg.o.TTL); err != nil {
		s.logger.Error("authorization server: store failed", "endpoint", "register", "error", err)
		s.observe(Event{Endpoint: "register", Outcome: "error", Reason: "store"})
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, clientreg.ErrorResponse{Error: "temporarily_unavailable", Description: "The authorization server's store is unavailable; try again shortly."})
		return
	}
	s.observe(Event{Endpoint: "register", Outcome: "ok"})
	s.logger.Info("audit", "event", "client_registered", "client_id", m.ClientID, "client_name", m.ClientName, "redirect_uris", m.RedirectURIs)
	s.record(ctx, audit.TypeClientRegistered, audit.OutcomeSuccess, m.ClientID, "", nil, "client_name", m.ClientName, "redirect_uris", strings.Join(m.RedirectURIs, " "))
	writeJSON(w, http.StatusCreated, registrationResponse{Metadata: *m, ClientIDIssuedAt: reg.now().Unix()})
}
