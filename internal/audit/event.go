// Package audit is Portcullis's audit trail: events of a documented,
// versioned schema ([Schema]) recorded by a [Recorder] and sent to sinks
// (JSON lines, syslog, and what the program adds, such as OpenTelemetry
// logs) through a bounded queue per sink, so that a sink that is down
// never blocks a call and every event it misses is counted.
//
// docs/security.md describes the schema: every event carries its
// schema, a unique id, the time, its type and outcome, the actor (and
// the delegation chain of a delegated token) and the trace id; each type
// adds its own fields.
package audit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Schema names the schema of the events: it changes when a field's
// meaning does, not when a field or a type is added.
const Schema = "portcullis.audit/v1"

// Event types.
const (
	TypeToolCall          = "tool.call"
	TypeToolRefused       = "tool.refused"
	TypeAuthRefused       = "auth.refused"
	TypeLimitRefused      = "limit.refused"
	TypeSignIn            = "signin"
	TypeConsent           = "consent"
	TypeTokenIssued       = "token.issued"
	TypeTokenRefreshed    = "token.refreshed"
	TypeTokenRevoked      = "token.revoked"
	TypeTokenReused       = "token.reused"
	TypeClientRegistered  = "client.registered"
	TypeUpstreamConnected = "upstream.connection"
	TypeTokenExchanged    = "upstream.token_exchange"
	TypeConfigLoaded      = "config.loaded"
	// A user's connected account at an upstream: connected (or refused:
	// another user's link, a mix-up), refreshed (or dropped when the
	// upstream revoked it), disconnected.
	TypeAccountConnected    = "account.connect"
	TypeAccountRefreshed    = "account.refresh"
	TypeAccountDisconnected = "account.disconnect"
)

// Outcomes.
const (
	OutcomeSuccess = "success"
	// OutcomeFailure: the operation ran and failed (a tool's error
	// result, an upstream that did not answer).
	OutcomeFailure = "failure"
	// OutcomeRefused: a check refused the operation (a token, a scope, a
	// policy rule, a limit, a reused refresh token).
	OutcomeRefused = "refused"
	// OutcomeError: the operation could not complete (a protocol error,
	// a timeout).
	OutcomeError = "error"
)

// Actor is who acted: a verified token's principal, or for the
// authorization server's events the user and client the flow is for.
type Actor struct {
	Issuer   string `json:"issuer,omitempty"`
	Subject  string `json:"subject,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// Act is the delegation chain of a delegated token (RFC 8693 "act"),
	// outermost first: who acts for Subject.
	Act []Delegate `json:"act,omitempty"`
}

// Delegate is one party of a delegation chain.
type Delegate struct {
	Subject  string `json:"subject,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}

// ActChain reads the delegation chain of a token's "act" claim (JSON),
// outermost first, at most 8 deep; nil when it has none or it is not an
// object.
func ActChain(raw json.RawMessage) []Delegate {
	var out []Delegate
	for len(raw) > 0 && len(out) < 8 {
		var act struct {
			Sub      string          `json:"sub"`
			ClientID string          `json:"client_id"`
			Act      json.RawMessage `json:"act"`
		}
		if json.Unmarshal(raw, &act) != nil || (act.Sub == "" && act.ClientID == "") {
			break
		}
		out = append(out, Delegate{Subject: act.Sub, ClientID: act.ClientID})
		raw = act.Act
	}
	return out
}

// Event is one audit event. The [Recorder] sets Schema, ID and Time;
// the rest is the emitter's. Fields that do not apply are left zero and
// left out of the encoding. An event is not changed once recorded.
type Event struct {
	ID      string
	Time    time.Time
	Type    string
	Outcome string
	Actor   Actor
	// TraceID and SpanID are the W3C trace id of the request and the id
	// of its span, hex; empty outside one.
	TraceID, SpanID string
	// Server names the virtual server ("" for /mcp).
	Server string
	// Tool is the tool as the caller called it; ToolOriginal the
	// catalog's name when a virtual server renamed it; ToolCalledAs the
	// name the call used when that is not the name the tool is listed by
	// (an MCP App's call by its upstream's own name); Upstream the
	// upstream that serves it or that the event is about.
	Tool, ToolOriginal, ToolCalledAs, Upstream string
	// Duration of the operation (tool calls).
	Duration time.Duration
	// Reason says why an operation was refused or failed, in a word of
	// the event type's (token's "expired", a limit's "rate", ...).
	Reason string
	// Rule names the policy rule that refused a call.
	Rule string
	// Scopes are the scopes a token was issued, or a call needed.
	Scopes []string
	// Arguments and Result are a call's arguments and result as JSON,
	// recorded only where configured, with named paths redacted;
	// Truncated is set when either was cut to the byte cap (and is then
	// a JSON string holding the cut text).
	Arguments, Result json.RawMessage
	Truncated         bool
	// Detail holds what else an event type says (strings only).
	Detail map[string]string

	encodeOnce sync.Once
	encoded    []byte
}

// newID returns 16 random bytes, hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// JSON returns the event as one line of JSON (no newline), encoded once
// and shared by the sinks: do not change it.
func (e *Event) JSON() []byte {
	e.encodeOnce.Do(func() { e.encoded = e.AppendJSON(make([]byte, 0, 512)) })
	return e.encoded
}

// AppendJSON appends the event as a JSON object to b.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"schema":"`+Schema+`"`...)
	b = appendField(b, "id", e.ID)
	b = append(b, `,"time":"`...)
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendField(b, "type", e.Type)
	b = appendField(b, "outcome", e.Outcome)
	a := e.Actor
	if a.Issuer != "" || a.Subject != "" || a.ClientID != "" || len(a.Act) > 0 {
		b = append(b, `,"actor":{`...)
		n := len(b)
		b = appendField(b, "issuer", a.Issuer)
		b = appendField(b, "subject", a.Subject)
		b = appendField(b, "client_id", a.ClientID)
		if len(a.Act) > 0 {
			b = append(b, `,"act":[`...)
			for i, d := range a.Act {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '{')
				m := len(b)
				b = appendField(b, "subject", d.Subject)
				b = appendField(b, "client_id", d.ClientID)
				b = dropLeadingComma(b, m)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = dropLeadingComma(b, n)
		b = append(b, '}')
	}
	b = appendField(b, "trace_id", e.TraceID)
	b = appendField(b, "span_id", e.SpanID)
	b = appendField(b, "server", e.Server)
	b = appendField(b, "tool", e.Tool)
	b = appendField(b, "tool_original", e.ToolOriginal)
	b = appendField(b, "tool_called_as", e.ToolCalledAs)
	b = appendField(b, "upstream", e.Upstream)
	if e.Duration > 0 || e.Type == TypeToolCall {
		b = append(b, `,"duration_us":`...)
		b = strconv.AppendInt(b, e.Duration.Microseconds(), 10)
	}
	b = appendField(b, "reason", e.Reason)
	b = appendField(b, "rule", e.Rule)
	if len(e.Scopes) > 0 {
		b = append(b, `,"scopes":[`...)
		for i, s := range e.Scopes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	if len(e.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		b = append(b, e.Arguments...)
	}
	if len(e.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, e.Result...)
	}
	if e.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	if len(e.Detail) > 0 {
		b = append(b, `,"detail":{`...)
		keys := slices.Sorted(maps.Keys(e.Detail))
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, e.Detail[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func dropLeadingComma(b []byte, at int) []byte {
	if len(b) > at && b[at] == ',' {
		return append(b[:at], b[at+1:]...)
	}
	return b
}

// appendField appends ,"key":"value" when value is not empty.
func appendField(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, `\u202`...)
				b = append(b, hexDigits[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
