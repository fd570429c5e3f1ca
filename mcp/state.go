package mcp

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// KeySize is the length in bytes of a request-state key (AES-256).
const KeySize = keyring.KeySize

// ErrInvalidState is returned by [Sealer.Open] for any requestState that does
// not open: tampered, truncated, sealed with an unknown key, expired, or bound
// to another request or principal. Callers must not tell these apart to the
// client.
var ErrInvalidState = errors.New("mcp: invalid requestState")

// sealVersion prefixes every sealed state so the format can change later.
const sealVersion = "v1."

// Sealer seals and opens the requestState of multi-round-trip (MRTR) results.
//
// requestState travels through the client, so it is attacker input. A Sealer
// encrypts and authenticates it with AES-256-GCM, binding an expiry, a digest
// of the request that produced it, and the caller's identity. The first key
// seals; every key opens, so keys can be rotated by prepending a new key,
// waiting one TTL, and dropping the old one. All replicas must share the keys.
type Sealer struct {
	aeads []keyedAEAD
	ttl   time.Duration
	now   func() time.Time
}

type keyedAEAD struct {
	id   [4]byte
	aead cipher.AEAD
}

// sealedState is the plaintext inside a sealed requestState. Subject and
// State are bytes, not strings, so that JSON carries them exactly: a JSON
// string would replace bytes that are not UTF-8, altering a tool's binary
// state and the subject it is bound to.
type sealedState struct {
	Expires int64  `json:"e"`
	Digest  []byte `json:"d"`
	Subject []byte `json:"s,omitempty"`
	State   []byte `json:"v"`
}

// NewSealer returns a Sealer that seals with keys[0] and opens with any key.
// Each key must be [KeySize] bytes. ttl is how long a sealed state stays
// valid; now is the clock (nil means time.Now).
func NewSealer(keys [][]byte, ttl time.Duration, now func() time.Time) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("mcp: request-state sealing needs at least one key")
	}
	if ttl <= 0 {
		return nil, errors.New("mcp: request-state TTL must be positive")
	}
	if now == nil {
		now = time.Now
	}
	s := &Sealer{ttl: ttl, now: now}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("mcp: request-state key %d is %d bytes, want %d", i, len(k), KeySize)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("mcp: request-state key %d: %w", i, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("mcp: request-state key %d: %w", i, err)
		}
		sum := sha256.Sum256(k)
		var id [4]byte
		copy(id[:], sum[:4])
		s.aeads = append(s.aeads, keyedAEAD{id: id, aead: aead})
	}
	return s, nil
}

// NewRandomKey returns a fresh random key, for development use.
func NewRandomKey() []byte {
	k := make([]byte, KeySize)
	rand.Read(k) // never returns an error (crypto/rand documents it)
	return k
}

// LoadKeys reads keys from a file holding one base64 (standard or URL, padded
// or not) key per line, newest first. Blank lines and lines starting with '#'
// are ignored. A file larger than 64 KiB is refused.
func LoadKeys(path string) ([][]byte, error) {
	keys, err := keyring.Load(path)
	if err != nil {
		return nil, fmt.Errorf("mcp: request-state keys: %w", err)
	}
	return keys, nil
}

// Seal returns state sealed and bound to digest and subject, valid for
// the Sealer's TTL.
func (s *Sealer) Seal(state string, digest []byte, subject string) (string, error) {
	return s.SealUntil(state, digest, subject, s.now().Add(s.ttl))
}

// SealUntil is [Sealer.Seal] with the state valid until expires.
func (s *Sealer) SealUntil(state string, digest []byte, subject string, expires time.Time) (string, error) {
	pt, err := json.Marshal(sealedState{
		Expires: expires.Unix(),
		Digest:  digest,
		Subject: []byte(subject),
		State:   []byte(state),
	})
	if err != nil {
		return "", fmt.Errorf("mcp: sealing requestState: %w", err)
	}
	k := s.aeads[0]
	buf := make([]byte, 0, len(k.id)+k.aead.NonceSize()+len(pt)+k.aead.Overhead())
	buf = append(buf, k.id[:]...)
	nonce := make([]byte, k.aead.NonceSize())
	rand.Read(nonce)
	buf = append(buf, nonce...)
	buf = k.aead.Seal(buf, nonce, pt, k.id[:])
	return sealVersion + base64.RawURLEncoding.EncodeToString(buf), nil
}

// Open returns the state sealed in sealed, or [ErrInvalidState] if it does
// not open, has expired, or is bound to another digest or subject.
func (s *Sealer) Open(sealed string, digest []byte, subject string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, sealVersion)
	if !ok {
		return "", ErrInvalidState
	}
	// A state has exactly one encoding, the one Seal wrote: the decoder
	// skips CR and LF anywhere and, unless strict, ignores the unused low
	// bits of the last character, so other strings would decode to the
	// same bytes. Only a decoding that encodes back to the input counts.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(raw) < 4 || base64.RawURLEncoding.EncodeToString(raw) != rest {
		return "", ErrInvalidState
	}
	for _, k := range s.aeads {
		if !bytes.Equal(raw[:4], k.id[:]) {
			continue
		}
		body := raw[4:]
		if len(body) < k.aead.NonceSize() {
			return "", ErrInvalidState
		}
		pt, err := k.aead.Open(nil, body[:k.aead.NonceSize()], body[k.aead.NonceSize():], k.id[:])
		if err != nil {
			return "", ErrInvalidState
		}
		var st sealedState
		if err := json.Unmarshal(pt, &st); err != nil {
			return "", ErrInvalidState
		}
		if s.now().Unix() > st.Expires || !bytes.Equal(st.Digest, digest) || string(st.Subject) != subject {
			return "", ErrInvalidState
		}
		return string(st.State), nil
	}
	return "", ErrInvalidState
}

// requestDigest returns a digest of what identifies a request across MRTR
// rounds: its method and the parts of its params that the client echoes
// unchanged (tool or prompt name and arguments, or resource URI). Arguments
// are canonicalised so that key order does not matter.
func requestDigest(method, name string, args json.RawMessage) []byte {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(method), []byte(name), canonicalJSON(args)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return h.Sum(nil)
}

// canonicalJSON re-encodes a JSON value with sorted object keys and no
// insignificant space. Invalid or empty JSON is returned as is.
func canonicalJSON(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return nil // {} and no arguments are the same request
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// sealStateMiddleware seals the requestState of outgoing MRTR results and
// opens the requestState of incoming retries, so handlers only ever see the
// plain state they produced. A state that does not open is rejected with
// -32602 before the handler runs.
//
// State is bound to the caller's identity (the UserID of the request's
// token info, which also binds legacy sessions), so one caller cannot replay
// another's state.
func sealStateMiddleware(sealer *Sealer, logger *slog.Logger) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			state, digest, ok := mrtrState(method, req)
			if !ok || tasks.TaskID(ctx) != "" {
				// A task's rounds keep their state in the server (see
				// tasks.Input), where nobody can alter it: sealing it would
				// only make it expire while the client takes its time.
				return next(ctx, method, req)
			}
			sub := ""
			if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
				sub = extra.TokenInfo.UserID
			}
			if *state != "" {
				if sealer == nil {
					return nil, invalidStateError()
				}
				plain, err := sealer.Open(*state, digest(), sub)
				if err != nil {
					return nil, invalidStateError()
				}
				*state = plain
			}
			res, err := next(ctx, method, req)
			if err != nil || res == nil {
				return res, err
			}
			out := resultState(res)
			if out == nil || *out == "" {
				return res, err
			}
			if sealer == nil {
				logger.ErrorContext(ctx, "handler returned requestState but no sealing key is configured", "mcp.method.name", method)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
			sealed, serr := sealer.Seal(*out, digest(), sub)
			if serr != nil {
				logger.ErrorContext(ctx, "sealing requestState", "error", serr)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
			*out = sealed
			return res, nil
		}
	}
}

func invalidStateError() error {
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidParams,
		Message: "Invalid requestState: it was altered, has expired, or belongs to another request. Retry the original request without requestState.",
	}
}

// mrtrState returns a pointer to the requestState of a request that can take
// part in a multi-round trip, and the digest that binds it. The digest is
// computed only when asked for (a state arrived or is handed out), from the
// request as it was before the handler ran: most calls need none.
func mrtrState(method string, req sdk.Request) (state *string, digest func() []byte, ok bool) {
	var name string
	var args []byte
	switch r := req.(type) {
	case *sdk.CallToolRequest:
		if r.Params == nil {
			return nil, nil, false
		}
		state, name, args = &r.Params.RequestState, r.Params.Name, bytes.Clone(r.Params.Arguments)
	case *sdk.GetPromptRequest:
		if r.Params == nil {
			return nil, nil, false
		}
		args, _ = json.Marshal(r.Params.Arguments)
		state, name = &r.Params.RequestState, r.Params.Name
	case *sdk.ReadResourceRequest:
		if r.Params == nil {
			return nil, nil, false
		}
		state, name = &r.Params.RequestState, r.Params.URI
	default:
		return nil, nil, false
	}
	var d []byte
	return state, func() []byte {
		if d == nil {
			d = requestDigest(method, name, args)
		}
		return d
	}, true
}

func resultState(res sdk.Result) *string {
	switch r := res.(type) {
	case *sdk.CallToolResult:
		return &r.RequestState
	case *sdk.GetPromptResult:
		return &r.RequestState
	case *sdk.ReadResourceResult:
		return &r.RequestState
	}
	return nil
}
