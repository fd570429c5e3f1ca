// Package clientreg is how Portcullis, as an OAuth 2.1 authorization
// server for MCP clients, learns about a client it has not registered
// beforehand. The MCP authorization specification (2025-11-25 and
// 2026-07-28) offers two ways, and this package validates both; issuing
// client_ids, secrets and tokens is the authorization server's job.
//
// # Client ID Metadata Documents
//
// A client whose client_id is an https URL
// (draft-ietf-oauth-client-id-metadata-document) publishes its metadata
// as a JSON document at that URL. [IsURLClientID] tells such a client_id
// from one the server issued, and a [Fetcher] gets and checks the
// document:
//
//	f := clientreg.NewFetcher(clientreg.FetchOptions{}, clientreg.FetchDeps{Logger: logger})
//	m, err := f.Get(ctx, clientID)
//	if err != nil {
//		// refuse the request; errors.Is tells ErrInvalidClientID,
//		// ErrFetch and ErrDocument apart
//	}
//	if !m.MatchRedirectURI(redirectURI) {
//		// show an error page; never redirect to it
//	}
//
// Fetching a URL any caller names is a server-side request forgery risk,
// so the fetcher connects only to public addresses (checked on the
// address actually dialed, after DNS), follows no redirect, and caps the
// body and the time. Documents are cached by their Cache-Control max-age
// within bounds, failures briefly; the [Cache] is an interface so that
// replicas can share one.
//
// # Dynamic Client Registration
//
// [ValidateRegistration] checks an RFC 7591 registration request and
// returns the client's [Metadata], or a [*RegistrationError] whose
// [RegistrationError.Response] is the RFC 7591 error body.
//
// # Redirect URIs
//
// Both ways share the redirect URI rules: https, http only on a loopback
// host (RFC 8252 §7.3), or a private-use scheme in reverse-domain form
// (RFC 8252 §7.1); never a fragment, user info, or a scheme such as
// javascript: or data:. [Metadata.MatchRedirectURI] compares exactly,
// except that a loopback redirect URI matches on any port.
package clientreg
