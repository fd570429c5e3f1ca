package httptools

import (
	"container/list"
	"errors"
	"net/http"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/upstream"
)

// maxCallers bounds the callers whose transports (and cached tokens) an
// API whose token is got for each caller keeps; the least recently used
// is dropped first.
const maxCallers = 4096

// errNoSubject is a call of an API whose token is got for each caller
// without a caller's token to get it with.
var errNoSubject = errors.New("httptools: no caller's token to get the API's token with")

// callers keeps, for an API whose token is got for each caller
// (oauth.grant token_exchange, jwt_bearer, id_jag), each caller's client,
// whose transport caches the token got for that caller.
type callers struct {
	o    *Options
	base http.RoundTripper
	deps Deps

	mu    sync.Mutex
	byKey map[string]*list.Element // of *caller
	lru   list.List                // most recently used first
}

type caller struct {
	key    string
	rt     *upstream.CallerTransport
	client *http.Client
}

// client returns the client of the caller ti describes, its token given
// to its transport for the next token request.
func (c *callers) client(ti *sdkauth.TokenInfo) (*http.Client, error) {
	if c.deps.SubjectToken == nil || c.deps.PrincipalKey == nil || ti == nil {
		return nil, errNoSubject
	}
	key := c.deps.PrincipalKey(ti)
	tok, typ, ok := c.deps.SubjectToken(ti, c.o.OAuth.SubjectType())
	if key == "" || !ok {
		return nil, errNoSubject
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.lru.MoveToFront(e)
		cl := e.Value.(*caller)
		cl.rt.SetSubject(tok, typ)
		return cl.client, nil
	}
	rt, err := upstream.NewCallerTransport(c.o.Name, c.o.Headers, c.o.OAuth, tokenClient, c.base)
	if err != nil {
		return nil, err
	}
	rt.SetSubject(tok, typ)
	cl := &caller{key: key, rt: rt, client: newClient(c.o, rt)}
	if c.byKey == nil {
		c.byKey = map[string]*list.Element{}
	}
	c.byKey[key] = c.lru.PushFront(cl)
	if c.lru.Len() > maxCallers {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.byKey, old.Value.(*caller).key)
	}
	return cl.client, nil
}
