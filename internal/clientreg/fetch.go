package clientreg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/portcullis-mcp/portcullis/internal/outbound"
)

// Defaults of [FetchOptions].
const (
	// DefaultMaxDocumentBytes caps a metadata document's body: 5 KiB.
	DefaultMaxDocumentBytes = 5 << 10
	// DefaultFetchTimeout bounds one fetch, from dial to the last byte.
	DefaultFetchTimeout = 5 * time.Second
	// DefaultMinCacheTTL is the least time a fetched document is kept.
	DefaultMinCacheTTL = 5 * time.Minute
	// DefaultMaxCacheTTL is the most time a fetched document is kept.
	DefaultMaxCacheTTL = 24 * time.Hour
	// DefaultErrorCacheTTL is how long a failed fetch or a refused
	// document is remembered.
	DefaultErrorCacheTTL = 30 * time.Second
)

// cacheKeyPrefix starts every key the fetcher gives its [Cache].
const cacheKeyPrefix = "clientreg:cimd:"

// FetchOptions configures a [Fetcher]. The zero value means the defaults.
type FetchOptions struct {
	// MaxBodyBytes caps the document's body; a larger one is an error.
	// Zero means [DefaultMaxDocumentBytes].
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Timeout bounds one fetch as a whole: connecting, TLS, headers and
	// body. Zero means [DefaultFetchTimeout].
	Timeout time.Duration `yaml:"timeout"`
	// MinCacheTTL is the least time a document is kept. A document is
	// kept for its Cache-Control max-age (s-maxage and Expires are not
	// read), or MinCacheTTL when it has none, clamped to [MinCacheTTL,
	// MaxCacheTTL]; one served with no-store is not kept at all. Zero
	// means [DefaultMinCacheTTL].
	MinCacheTTL time.Duration `yaml:"min_cache_ttl"`
	// MaxCacheTTL is the most time a document is kept. Zero means
	// [DefaultMaxCacheTTL]; below MinCacheTTL, MinCacheTTL wins.
	MaxCacheTTL time.Duration `yaml:"max_cache_ttl"`
	// ErrorCacheTTL is how long a failure (a document that could not be
	// fetched, or was refused) is remembered, so that a flood of requests naming a broken or unknown
	// client_id is not a flood of fetches. Zero means
	// [DefaultErrorCacheTTL].
	ErrorCacheTTL time.Duration `yaml:"error_cache_ttl"`
	// MaxRedirectURIs caps the redirect URIs a document may list. Zero
	// means [DefaultMaxRedirectURIs].
	MaxRedirectURIs int `yaml:"max_redirect_uris"`
	// AllowPrivateAddresses lets the fetcher connect to loopback, private,
	// link-local and other non-public addresses, which it otherwise
	// refuses at dial time (SSRF protection). For tests and labs only:
	// anyone who can send a client_id could then make the server fetch
	// from its own network. A warning is logged at start when it is on.
	AllowPrivateAddresses bool `yaml:"allow_private_addresses"`
	// InsecureAllowHTTP accepts http:// client_id URLs besides https://
	// ones: an authorization server treats such a client_id as a document
	// URL and fetches it over plain http. It weakens the scheme only: the
	// address checks stay, so a document on a loopback, private or
	// link-local address is still refused unless allow_private_addresses
	// is on too. For tests only; the documents then travel
	// unauthenticated. A warning is logged at start when it is on.
	InsecureAllowHTTP bool `yaml:"insecure_allow_http"`
}

// FetchDeps are what a [Fetcher] is given rather than configured with.
// The zero value means the defaults.
type FetchDeps struct {
	// Cache keeps documents and failures. Nil means a [MemoryCache] of
	// [DefaultMemoryCacheSize] entries on the Now clock.
	Cache Cache
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives the warnings about weakening options and one Info
	// line per failed fetch (the client_id and why; documents are public,
	// so nothing secret). Nil means no logging.
	Logger *slog.Logger
	// RootCAs are the certificate authorities trusted for https. Nil
	// means the system's.
	RootCAs *x509.CertPool
}

// Fetcher gets Client ID Metadata Documents
// (draft-ietf-oauth-client-id-metadata-document): the client_id is an
// https URL and the client's metadata is the JSON document found there.
// It is safe for concurrent use.
type Fetcher struct {
	o      FetchOptions
	cache  Cache
	now    func() time.Time
	log    *slog.Logger
	client *http.Client
	group  singleflight.Group

	// beforeFlight, when set (by tests), runs after the cache is looked
	// up and before the shared fetch is joined.
	beforeFlight func()
}

// NewFetcher returns a Fetcher. Its HTTP client is the project's outbound
// transport with these changes: no proxy (through a proxy the address
// check would see the proxy's address rather than the one fetched), a
// dialer that refuses non-public addresses unless
// o.AllowPrivateAddresses, deps.RootCAs, no connection kept once a fetch
// is done (documents are cached for minutes at least, and idle
// connections to hosts any caller can name are not worth holding), and
// no redirects followed.
func NewFetcher(o FetchOptions, deps FetchDeps) *Fetcher {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxDocumentBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultFetchTimeout
	}
	if o.MinCacheTTL <= 0 {
		o.MinCacheTTL = DefaultMinCacheTTL
	}
	if o.MaxCacheTTL <= 0 {
		o.MaxCacheTTL = DefaultMaxCacheTTL
	}
	if o.ErrorCacheTTL <= 0 {
		o.ErrorCacheTTL = DefaultErrorCacheTTL
	}
	if o.MaxRedirectURIs <= 0 {
		o.MaxRedirectURIs = DefaultMaxRedirectURIs
	}
	f := &Fetcher{o: o, cache: deps.Cache, now: deps.Now, log: deps.Logger}
	if f.now == nil {
		f.now = time.Now
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.cache == nil {
		f.cache = NewMemoryCache(DefaultMemoryCacheSize, f.now)
	}
	if o.AllowPrivateAddresses {
		f.log.Warn("clientreg: allow_private_addresses is on: client metadata documents may be fetched from loopback and private networks; never use this in production")
	}
	if o.InsecureAllowHTTP {
		f.log.Warn("clientreg: insecure_allow_http is on: http client_id URLs are accepted; never use this in production")
	}

	dialer := &net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}
	if !o.AllowPrivateAddresses {
		dialer.ControlContext = outbound.CheckDial
	}
	t := outbound.Transport()
	t.Proxy = nil
	t.DialContext = dialer.DialContext
	t.TLSClientConfig = &tls.Config{RootCAs: deps.RootCAs, MinVersion: tls.VersionTLS12}
	t.DisableKeepAlives = true
	f.client = &http.Client{
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return f
}

// Get returns the metadata of the client whose client_id is the URL
// clientID, from the cache or by fetching the document there.
//
// clientID must pass [ValidateClientIDURL], or the error wraps
// [ErrInvalidClientID] and nothing is fetched. The fetch refuses
// non-public addresses (checked on each address actually dialed), follows
// no redirect (any status but 200 is an error), requires a Content-Type of
// application/json and a body of at most MaxBodyBytes, and gives up after
// Timeout; such failures wrap [ErrFetch]. The document must be a JSON
// object whose client_id equals clientID byte for byte, with
// redirect_uris, no client_secret or client_secret_expires_at, and
// token_endpoint_auth_method none (the default; private_key_jwt is not
// supported); its other fields follow the rules of [ValidateRegistration].
// A refused document wraps [ErrDocument] and a [*RegistrationError].
//
// Concurrent Gets for one clientID share one fetch. A document is cached
// as [FetchOptions.MinCacheTTL] describes; a failure is cached for
// [FetchOptions.ErrorCacheTTL]. The fetch does not stop when ctx is
// canceled, so that the other callers waiting on it and the cache still
// get its result, but Get then returns ctx's error at once. The Metadata
// returned is the caller's own.
func (f *Fetcher) Get(ctx context.Context, clientID string) (*Metadata, error) {
	if err := ValidateClientIDURL(clientID, f.o.InsecureAllowHTTP); err != nil {
		return nil, err
	}
	if m, err, ok := f.cached(ctx, clientID); ok {
		return m, err
	}
	if f.beforeFlight != nil {
		f.beforeFlight()
	}
	ch := f.group.DoChan(clientID, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.o.Timeout)
		defer cancel()
		// Another flight may have just filled the cache.
		if m, err, ok := f.cached(fctx, clientID); ok {
			return m, err
		}
		return f.fetchAndStore(fctx, clientID)
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("clientreg: waiting for %s: %w", clientID, ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Metadata).clone(), nil
	}
}

// cacheEntry is what the fetcher stores: a document that passed
// validation, or a failure. The document is validated again when read,
// so entries written by another version stay held to this one's rules.
type cacheEntry struct {
	Doc     json.RawMessage `json:"doc,omitempty"`
	Kind    string          `json:"kind,omitempty"` // "fetch" or "document"
	Code    string          `json:"code,omitempty"` // of the RegistrationError
	Desc    string          `json:"desc,omitempty"` // of the RegistrationError
	Message string          `json:"msg,omitempty"`
	// Expires is when the entry expires by the fetcher's clock, in Unix
	// milliseconds, so that an entry a cache keeps too long is still
	// ignored.
	Expires int64 `json:"exp"`
}

// cached returns what the cache holds for clientID, and ok false when it
// holds nothing usable.
func (f *Fetcher) cached(ctx context.Context, clientID string) (m *Metadata, err error, ok bool) {
	raw, found, cerr := f.cache.Get(ctx, cacheKeyPrefix+clientID)
	if cerr != nil {
		f.log.Warn("clientreg: reading the client metadata cache failed", "client_id", clientID, "error", cerr)
		return nil, nil, false
	}
	if !found {
		return nil, nil, false
	}
	var e cacheEntry
	if json.Unmarshal(raw, &e) != nil || f.now().UnixMilli() >= e.Expires {
		return nil, nil, false
	}
	switch e.Kind {
	case "":
		m, rerr := validateDocument(clientID, e.Doc, f.o.MaxRedirectURIs)
		if rerr != nil {
			return nil, nil, false
		}
		return m, nil, true
	case "fetch":
		return nil, &cachedError{msg: e.Message, kind: ErrFetch}, true
	case "document":
		return nil, &cachedError{msg: e.Message, kind: ErrDocument, reg: &RegistrationError{Code: e.Code, Description: e.Desc}}, true
	}
	return nil, nil, false
}

// cachedError is a failure read back from the cache.
type cachedError struct {
	msg  string
	kind error
	reg  *RegistrationError
}

func (e *cachedError) Error() string { return e.msg }

func (e *cachedError) Unwrap() []error {
	if e.reg != nil {
		return []error{e.kind, e.reg}
	}
	return []error{e.kind}
}

// fetchAndStore fetches the document and caches the outcome.
func (f *Fetcher) fetchAndStore(ctx context.Context, clientID string) (*Metadata, error) {
	doc, ttl, err := f.fetch(ctx, clientID)
	var m *Metadata
	var rerr *RegistrationError
	if err == nil {
		m, rerr = validateDocument(clientID, doc, f.o.MaxRedirectURIs)
		if rerr != nil {
			err = fmt.Errorf("%w: %s: %w", ErrDocument, clientID, rerr)
		}
	}
	var e cacheEntry
	switch {
	case rerr != nil:
		e = cacheEntry{Kind: "document", Code: rerr.Code, Desc: rerr.Description, Message: err.Error()}
		ttl = f.o.ErrorCacheTTL
	case err != nil:
		e = cacheEntry{Kind: "fetch", Message: err.Error()}
		ttl = f.o.ErrorCacheTTL
	default:
		e = cacheEntry{Doc: doc}
	}
	if err != nil {
		f.log.Info("clientreg: client metadata document refused", "client_id", clientID, "error", err)
	}
	if ttl > 0 {
		e.Expires = f.now().Add(ttl).UnixMilli()
		raw, _ := json.Marshal(e)
		// The fetch may have used up ctx's time; storing gets its own.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.o.Timeout)
		defer cancel()
		if serr := f.cache.Set(sctx, cacheKeyPrefix+clientID, raw, ttl); serr != nil {
			f.log.Warn("clientreg: writing the client metadata cache failed", "client_id", clientID, "error", serr)
		}
	}
	return m, err
}

// fetch gets the document's body and how long to cache it (zero: not at
// all). Once ctx is done, whatever the request returned is discarded for
// ctx's error: a canceled HTTP/1.1 request can still deliver the headers,
// or a chunked body cut short at a chunk boundary, that the server sent
// when the client gave up, which would pass for a (wrong) answer.
func (f *Fetcher) fetch(ctx context.Context, clientID string) ([]byte, time.Duration, error) {
	body, ttl, err := f.fetchOnce(ctx, clientID)
	if cerr := context.Cause(ctx); cerr != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrFetch, clientID, cerr)
	}
	return body, ttl, err
}

func (f *Fetcher) fetchOnce(ctx context.Context, clientID string) ([]byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrFetch, clientID, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrFetch, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return nil, 0, fmt.Errorf("%w: %s: status %d: redirects are not followed", ErrFetch, clientID, resp.StatusCode)
		}
		return nil, 0, fmt.Errorf("%w: %s: status %d", ErrFetch, clientID, resp.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, 0, fmt.Errorf("%w: %s: Content-Type %q, want application/json", ErrFetch, clientID, clip(resp.Header.Get("Content-Type")))
	}
	if resp.ContentLength > f.o.MaxBodyBytes {
		return nil, 0, fmt.Errorf("%w: %s: the document is larger than %d bytes", ErrFetch, clientID, f.o.MaxBodyBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.o.MaxBodyBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: reading the body: %w", ErrFetch, clientID, err)
	}
	if int64(len(body)) > f.o.MaxBodyBytes {
		return nil, 0, fmt.Errorf("%w: %s: the document is larger than %d bytes", ErrFetch, clientID, f.o.MaxBodyBytes)
	}
	return body, f.cacheTTL(resp.Header.Values("Cache-Control")), nil
}

// cacheTTL reads the Cache-Control header: zero for no-store, else
// max-age (MinCacheTTL when it is missing or malformed) clamped to
// [MinCacheTTL, MaxCacheTTL].
func (f *Fetcher) cacheTTL(cacheControl []string) time.Duration {
	maxAge := time.Duration(-1)
	for _, h := range cacheControl {
		for d := range strings.SplitSeq(h, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-store":
				return 0
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(value, `"`), 10, 64)
				if err == nil && n >= 0 && maxAge < 0 {
					maxAge = time.Duration(min(n, int64(f.o.MaxCacheTTL/time.Second))) * time.Second
				}
			}
		}
	}
	// maxAge is at most MaxCacheTTL already; MinCacheTTL wins over a
	// MaxCacheTTL below it.
	return max(f.o.MinCacheTTL, maxAge)
}

// document is a metadata document as decoded, with the fields it must
// not have.
type document struct {
	Metadata
	ClientSecret          json.RawMessage `json:"client_secret"`
	ClientSecretExpiresAt json.RawMessage `json:"client_secret_expires_at"`
}

// validateDocument checks a fetched document against the URL it came
// from and returns its metadata.
func validateDocument(clientID string, body []byte, maxRedirectURIs int) (*Metadata, *RegistrationError) {
	var d document
	if rerr := decodeObject(body, &d); rerr != nil {
		return nil, rerr
	}
	if d.ClientID != clientID {
		return nil, metadataErr(fmt.Sprintf("the document's client_id %q is not the URL it was fetched from", clip(d.ClientID)))
	}
	if d.ClientSecret != nil || d.ClientSecretExpiresAt != nil {
		return nil, metadataErr("a client metadata document must not hold client_secret or client_secret_expires_at")
	}
	m := d.Metadata
	if rerr := validateMetadata(&m, maxRedirectURIs, []string{authMethodNone}, documentAuthMethodRefusal); rerr != nil {
		return nil, rerr
	}
	return &m, nil
}

// documentAuthMethodRefusal explains why a metadata document may not use
// method.
func documentAuthMethodRefusal(method string) string {
	switch method {
	case "client_secret_basic", "client_secret_post", "client_secret_jwt":
		return "needs a shared secret, which a client metadata document cannot have; use none"
	case "private_key_jwt":
		return "is not supported by this server; use none"
	}
	return ""
}
