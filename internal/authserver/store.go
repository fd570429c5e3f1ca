package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/storage"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// store is fosite's storage on a kv.KV: authorization codes, PKCE requests,
// access and refresh token sessions, refresh-token families.
//
// A grant's family is fosite's request id, which every token issued from
// one authorization code (and every refresh of them) shares. The family
// names its current refresh token (rt-current); a refresh moves that to
// the new token in one compare-and-swap, the last write before the client
// is answered, so that of two refreshes racing with one token one wins,
// and a refresh that failed before it (the store unavailable, or a write
// that reached too few replicas and was taken back) leaves the presented
// token current: the client's retry with it is a refresh, not a reuse.
// Presenting a refresh token that is no longer current is reuse: fosite
// revokes the family, which refuses every refresh token of it from then
// on. Access tokens are JWTs verified without the store, so they live
// until they expire (access_token_ttl).
type store struct {
	kv      kv.KV
	clients *clientRegistry
	o       *Options
	// onReuse is told when a used refresh token is presented.
	onReuse func(ctx context.Context, clientID, subject string)
	// resourceOf is the resource a grant is for (Server.grantResource).
	resourceOf func(fosite.Requester) string
}

// Key families in the KV.
const (
	kCode      = "code"       // code signature → storedRequest
	kCodeUsed  = "code-used"  // code signature → "1" once exchanged
	kPKCE      = "pkce"       // code signature → storedRequest
	kAccess    = "at"         // access token signature → storedRequest
	kRefresh   = "rt"         // refresh token signature → storedRequest
	kFamily    = "family"     // request id → "revoked"
	kRefreshOf = "rt-current" // request id → the current refresh token's key
)

// transaction is one token request of fosite's, which begins a
// storage.Transactional transaction around each request that writes
// several records: the refresh it rotates.
type transaction struct {
	mu sync.Mutex
	// rotating is the key of the refresh token RotateRefreshToken
	// retires, of the family (request id) family: CreateRefreshTokenSession
	// swaps the family's current token from it to the new one.
	rotating, family string
}

type txKey struct{}

// txOf returns ctx's transaction, or nil.
func txOf(ctx context.Context) *transaction {
	tx, _ := ctx.Value(txKey{}).(*transaction)
	return tx
}

// BeginTX implements storage.Transactional.
func (s *store) BeginTX(ctx context.Context) (context.Context, error) {
	return context.WithValue(ctx, txKey{}, &transaction{}), nil
}

// Commit implements storage.Transactional: what was written stays.
func (s *store) Commit(ctx context.Context) error { return nil }

// Rollback implements storage.Transactional. Nothing is taken back: the
// swap of a refresh family's current token is a refresh's last write,
// and takes itself back when it fails (rediskit's CompareAndSwap), so
// what a failed refresh wrote before it leaves the presented token
// current.
func (s *store) Rollback(ctx context.Context) error { return nil }

// storedRequest is a fosite request as the store keeps it. Only the
// request form's non-secret parameters are kept: never a code, verifier,
// refresh token, assertion or client secret, nor a token's signature
// (tokens are named by their hashKey).
type storedRequest struct {
	ID             string          `json:"id"`
	RequestedAt    time.Time       `json:"requested_at"`
	ClientID       string          `json:"client_id"`
	RequestedScope []string        `json:"requested_scope,omitempty"`
	GrantedScope   []string        `json:"granted_scope,omitempty"`
	RequestedAud   []string        `json:"requested_aud,omitempty"`
	GrantedAud     []string        `json:"granted_aud,omitempty"`
	Form           url.Values      `json:"form,omitempty"`
	Session        json.RawMessage `json:"session"`
	// AccessKey is, in a refresh token's record, the hashKey of the
	// access token issued with it.
	AccessKey string `json:"access_key,omitempty"`
}

// keptForm are the request parameters a stored request keeps: what the
// token endpoint compares (redirect_uri), what PKCE verifies against
// (code_challenge, code_challenge_method), and what was asked.
var keptForm = []string{"client_id", "redirect_uri", "response_type", "grant_type", "scope", "resource", "code_challenge", "code_challenge_method"}

// hashKey names a token signature in the kv.KV by its SHA-256, so that the
// store's keys are not token material. Where one record points at
// another token's (a refresh token's at its access token's, a grant's at
// its current refresh token's), it holds this key too, never the
// signature: a JWT's signature is its last part, the HMAC of fosite's
// opaque tokens is theirs, and neither may be read out of the store.
func hashKey(kind, signature string) string {
	return kv.Join(kind, kv.Hash(signature))
}

func (s *store) encode(r fosite.Requester) ([]byte, error) {
	sr := storedRequest{
		ID:             r.GetID(),
		RequestedAt:    r.GetRequestedAt(),
		ClientID:       r.GetClient().GetID(),
		RequestedScope: r.GetRequestedScopes(),
		GrantedScope:   r.GetGrantedScopes(),
		RequestedAud:   r.GetRequestedAudience(),
		GrantedAud:     r.GetGrantedAudience(),
		Form:           url.Values{},
	}
	form := r.GetRequestForm()
	for _, k := range keptForm {
		if v, ok := form[k]; ok {
			sr.Form[k] = v
		}
	}
	sess, ok := r.GetSession().(*Session)
	if !ok {
		return nil, fmt.Errorf("authserver: session of type %T", r.GetSession())
	}
	raw, err := json.Marshal(sess.stored())
	if err != nil {
		return nil, err
	}
	sr.Session = raw
	return json.Marshal(sr)
}

// decode rebuilds a request; into receives the session (fosite passes the
// session of the request being handled).
func (s *store) decode(ctx context.Context, b []byte, into fosite.Session) (*fosite.Request, *storedRequest, error) {
	var sr storedRequest
	if err := json.Unmarshal(b, &sr); err != nil {
		return nil, nil, fmt.Errorf("authserver: stored request: %w", err)
	}
	sess, ok := into.(*Session)
	if !ok || sess == nil {
		sess = newSession()
	}
	if err := json.Unmarshal(sr.Session, sess); err != nil {
		return nil, nil, fmt.Errorf("authserver: stored session: %w", err)
	}
	client, err := s.clients.GetClient(ctx, sr.ClientID)
	if err != nil {
		return nil, nil, err
	}
	req := &fosite.Request{
		ID:                sr.ID,
		RequestedAt:       sr.RequestedAt,
		Client:            client,
		RequestedScope:    sr.RequestedScope,
		GrantedScope:      sr.GrantedScope,
		RequestedAudience: sr.RequestedAud,
		GrantedAudience:   sr.GrantedAud,
		Form:              sr.Form,
		Session:           sess,
	}
	return req, &sr, nil
}

// put stores r under key; accessKey, when set, is the hashKey of the
// access token issued with a refresh token.
func (s *store) put(ctx context.Context, key string, r fosite.Requester, ttl time.Duration, accessKey string) error {
	b, err := s.encode(r)
	if err != nil {
		return err
	}
	if accessKey != "" {
		var sr storedRequest
		_ = json.Unmarshal(b, &sr)
		sr.AccessKey = accessKey
		if b, err = json.Marshal(sr); err != nil {
			return err
		}
	}
	return s.kv.Set(ctx, key, b, ttl)
}

func (s *store) load(ctx context.Context, key string, into fosite.Session) (*fosite.Request, *storedRequest, error) {
	b, err := s.kv.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil, fosite.ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	return s.decode(ctx, b, into)
}

// Authorization codes.

func (s *store) CreateAuthorizeCodeSession(ctx context.Context, code string, r fosite.Requester) error {
	return s.put(ctx, hashKey(kCode, code), r, s.o.CodeTTL, "")
}

func (s *store) GetAuthorizeCodeSession(ctx context.Context, code string, into fosite.Session) (fosite.Requester, error) {
	req, _, err := s.load(ctx, hashKey(kCode, code), into)
	if err != nil {
		return nil, err
	}
	if _, err := s.kv.Get(ctx, hashKey(kCodeUsed, code)); err == nil {
		// fosite revokes what the code was exchanged for.
		return req, fosite.ErrInvalidatedAuthorizeCode
	} else if !errors.Is(err, kv.ErrNotFound) {
		return nil, err
	}
	return req, nil
}

// InvalidateAuthorizeCodeSession marks the code used; of two exchanges
// racing, only one gets past this.
func (s *store) InvalidateAuthorizeCodeSession(ctx context.Context, code string) error {
	ok, err := s.kv.SetNX(ctx, hashKey(kCodeUsed, code), kv.Nonce(), s.o.CodeTTL+s.o.RefreshTokenTTL)
	if err != nil {
		return err
	}
	if !ok {
		return fosite.ErrInvalidatedAuthorizeCode
	}
	return nil
}

// PKCE.

func (s *store) CreatePKCERequestSession(ctx context.Context, signature string, r fosite.Requester) error {
	return s.put(ctx, hashKey(kPKCE, signature), r, s.o.CodeTTL, "")
}

func (s *store) GetPKCERequestSession(ctx context.Context, signature string, into fosite.Session) (fosite.Requester, error) {
	req, _, err := s.load(ctx, hashKey(kPKCE, signature), into)
	if err != nil {
		return nil, err
	}
	return req, nil
}

func (s *store) DeletePKCERequestSession(ctx context.Context, signature string) error {
	return s.kv.Del(ctx, hashKey(kPKCE, signature))
}

// Access tokens: kept only so that revocation and refresh can find them;
// /mcp never looks them up.

func (s *store) CreateAccessTokenSession(ctx context.Context, signature string, r fosite.Requester) error {
	return s.put(ctx, hashKey(kAccess, signature), r, s.o.AccessTokenTTL, "")
}

func (s *store) GetAccessTokenSession(ctx context.Context, signature string, into fosite.Session) (fosite.Requester, error) {
	req, _, err := s.load(ctx, hashKey(kAccess, signature), into)
	if err != nil {
		return nil, err
	}
	return req, nil
}

func (s *store) DeleteAccessTokenSession(ctx context.Context, signature string) error {
	return s.kv.Del(ctx, hashKey(kAccess, signature))
}

// Refresh tokens.

// CreateRefreshTokenSession stores the refresh token and makes it its
// family's current one: for a new grant, by setting it; for a refresh, by
// swapping it in for the token RotateRefreshToken retired, which fails
// (fosite.ErrInactiveToken) when another refresh with that token won the
// race. The swap is the refresh's last write: when it reaches too few
// replicas it is swapped back, and the presented token stays current.
func (s *store) CreateRefreshTokenSession(ctx context.Context, signature, accessSignature string, r fosite.Requester) error {
	var accessKey string
	if accessSignature != "" {
		accessKey = hashKey(kAccess, accessSignature)
	}
	key := hashKey(kRefresh, signature)
	if err := s.put(ctx, key, r, s.o.RefreshTokenTTL, accessKey); err != nil {
		return err
	}
	current := kv.Join(kRefreshOf, r.GetID())
	tx := txOf(ctx)
	var from string
	if tx != nil {
		tx.mu.Lock()
		if tx.family == r.GetID() {
			from = tx.rotating
		}
		tx.mu.Unlock()
	}
	if from == "" {
		return s.kv.Set(ctx, current, []byte(key), s.o.RefreshTokenTTL)
	}
	ok, err := s.kv.CompareAndSwap(ctx, current, []byte(from), []byte(key), s.o.RefreshTokenTTL)
	if err != nil {
		return err
	}
	if !ok {
		return fosite.ErrInactiveToken
	}
	return nil
}

// GetRefreshTokenSession returns the refresh token's request, with
// fosite.ErrInactiveToken when it is not its family's current token (a
// refresh replaced it) or its family is revoked: fosite then treats the
// presentation as reuse and revokes the family.
func (s *store) GetRefreshTokenSession(ctx context.Context, signature string, into fosite.Session) (fosite.Requester, error) {
	key := hashKey(kRefresh, signature)
	req, sr, err := s.load(ctx, key, into)
	if err != nil {
		return nil, err
	}
	revoked, err := s.familyRevoked(ctx, sr.ID)
	if err != nil {
		return nil, err
	}
	current, err := s.kv.Get(ctx, kv.Join(kRefreshOf, sr.ID))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return nil, fosite.ErrNotFound // the family is gone
	case err != nil:
		return nil, err
	}
	if string(current) != key || revoked {
		if s.onReuse != nil {
			s.onReuse(ctx, sr.ClientID, req.GetSession().GetSubject())
		}
		return req, fosite.ErrInactiveToken
	}
	return req, nil
}

func (s *store) DeleteRefreshTokenSession(ctx context.Context, signature string) error {
	return s.kv.Del(ctx, hashKey(kRefresh, signature))
}

// RotateRefreshToken retires the presented refresh token: it stays
// stored, so that its reuse is recognised until it expires, and stops
// being current once CreateRefreshTokenSession swaps in the new token,
// within the same transaction. It refuses (fosite.ErrInactiveToken) a
// token that is no longer current: another refresh with it won.
func (s *store) RotateRefreshToken(ctx context.Context, requestID, signature string) error {
	tx := txOf(ctx)
	if tx == nil {
		return errors.New("authserver: a refresh token rotated outside a transaction")
	}
	key := hashKey(kRefresh, signature)
	b, err := s.kv.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return fosite.ErrNotFound
	}
	if err != nil {
		return err
	}
	var sr storedRequest
	if err := json.Unmarshal(b, &sr); err != nil {
		return err
	}
	current, err := s.kv.Get(ctx, kv.Join(kRefreshOf, requestID))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return fosite.ErrNotFound
	case err != nil:
		return err
	case string(current) != key:
		return fosite.ErrInactiveToken
	}
	tx.mu.Lock()
	tx.rotating, tx.family = key, requestID
	tx.mu.Unlock()
	if sr.AccessKey != "" {
		// The access token issued with it is no longer looked up.
		return s.kv.Del(ctx, sr.AccessKey)
	}
	return nil
}

func (s *store) familyRevoked(ctx context.Context, requestID string) (bool, error) {
	_, err := s.kv.Get(ctx, kv.Join(kFamily, requestID))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kv.ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

// RevokeRefreshToken revokes the whole family of requestID (RFC 7009: the
// grant, not one token), and forgets the user's consent to its client for
// its resource, so the next sign-in of that client to that server asks
// again: revoking a grant (the
// client's "disconnect", a reused refresh token, a replayed code) is how
// a consent is withdrawn.
func (s *store) RevokeRefreshToken(ctx context.Context, requestID string) error {
	if err := s.kv.Set(ctx, kv.Join(kFamily, requestID), []byte("revoked"), s.o.RefreshTokenTTL); err != nil {
		return err
	}
	if key, err := s.kv.Get(ctx, kv.Join(kRefreshOf, requestID)); err == nil {
		if req, _, err := s.load(ctx, string(key), nil); err == nil {
			if sess, ok := req.GetSession().(*Session); ok {
				_ = s.kv.Del(ctx, consentKey(sess.User, req.GetClient().GetID(), s.resourceOf(req)))
			}
		}
	}
	return nil
}

// RevokeAccessToken forgets the family's access token record; the JWT
// itself lives until it expires.
func (s *store) RevokeAccessToken(ctx context.Context, requestID string) error {
	return nil
}

// Clients and client assertions: fosite's ClientManager.

func (s *store) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	return s.clients.GetClient(ctx, id)
}

func (s *store) ClientAssertionJWTValid(ctx context.Context, jti string) error {
	_, err := s.kv.Get(ctx, kv.Join("client-jti", jti))
	switch {
	case err == nil:
		return fosite.ErrJTIKnown
	case errors.Is(err, kv.ErrNotFound):
		return nil
	default:
		return err
	}
}

func (s *store) SetClientAssertionJWT(ctx context.Context, jti string, exp time.Time) error {
	return s.kv.Set(ctx, kv.Join("client-jti", jti), []byte("1"), time.Until(exp)+time.Minute)
}

var (
	_ oauth2.CoreStorage            = (*store)(nil)
	_ oauth2.TokenRevocationStorage = (*store)(nil)
	_ fosite.ClientManager          = (*store)(nil)
	_ storage.Transactional         = (*store)(nil)
)

// consentKey names a user's remembered approval of a client for one
// resource: an approval for one server does not count for another.
func consentKey(u User, clientID, resource string) string {
	return kv.Join("consent", kv.Hash(u.Subject), kv.Hash(clientID), kv.Hash(resource))
}
