package auth

import "context"

// Hook receives auth events (the observability package implements it; auth
// imports no telemetry). It must be fast and must not block.
type Hook func(context.Context, Event)

// Event is what [Middleware] reports for every request it guards.
type Event struct {
	// Outcome is "allowed" or "denied".
	Outcome string
	// Reason is empty when allowed.
	Reason Reason
	// Issuer and ClientID are known once a token verified.
	Issuer, ClientID string
}

// Outcomes of an [Event].
const (
	OutcomeAllowed = "allowed"
	OutcomeDenied  = "denied"
)
