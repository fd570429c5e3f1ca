package upstream

import (
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// URL-mode elicitation completes out of band: the upstream later sends
// notifications/elicitation/complete naming the elicitation's id, outside
// any call. An id passed to a caller is kept (at most elicitationKept ids,
// for at most elicitationTTL each), so that its completion goes to that
// caller and no one else; a completion of an id not kept is dropped. A
// caller on 2026-07-28 has no stream outside its calls, so only callers of
// older eras are kept.

// elicitationTTL is how long the completion of a URL-mode elicitation is
// passed on after the elicitation reached its caller.
const elicitationTTL = 30 * time.Minute

// elicitationKept bounds the URL-mode elicitations awaiting completion.
const elicitationKept = 10_000

type elicitationTarget struct {
	session *sdk.ServerSession
	until   time.Time
}

// elicitationKey names a URL-mode elicitation: its id, as the upstream
// session that asked for it chose it (each caller of a per_principal
// upstream has a session, and its ids, of its own).
type elicitationKey struct {
	upstream *sdk.ClientSession
	id       string
}

// elicitations are the URL-mode elicitations of an upstream awaiting
// completion.
type elicitations struct {
	mu  sync.Mutex
	ids map[elicitationKey]elicitationTarget
	now func() time.Time // nil means time.Now
}

func (e *elicitations) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// remember keeps the id of a URL-mode elicitation passed to the caller of
// t.
func (e *elicitations) remember(t *callTarget, p *sdk.ElicitParams) {
	if p == nil || p.Mode != "url" || p.ElicitationID == "" || t.session == nil || t.upstream == nil || passesInput(t.session) {
		return
	}
	e.put(elicitationKey{t.upstream, p.ElicitationID}, t.session)
}

// keep keeps the id of a URL-mode elicitation Portcullis itself sent the
// caller ss (to connect an account), under no upstream session.
func (e *elicitations) keep(id string, ss *sdk.ServerSession) {
	if ss != nil && id != "" {
		e.put(elicitationKey{nil, id}, ss)
	}
}

func (e *elicitations) put(k elicitationKey, ss *sdk.ServerSession) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock()
	if e.ids == nil {
		e.ids = map[elicitationKey]elicitationTarget{}
	}
	for k, et := range e.ids {
		if now.After(et.until) {
			delete(e.ids, k)
		}
	}
	if len(e.ids) >= elicitationKept {
		return
	}
	e.ids[k] = elicitationTarget{session: ss, until: now.Add(elicitationTTL)}
}

// take returns the caller the URL-mode elicitation id, asked for by the
// upstream session cs, went to, and forgets it; false when the id is not
// kept (any more).
func (e *elicitations) take(cs *sdk.ClientSession, id string) (*sdk.ServerSession, bool) {
	k := elicitationKey{cs, id}
	e.mu.Lock()
	et, ok := e.ids[k]
	delete(e.ids, k)
	e.mu.Unlock()
	if !ok || e.clock().After(et.until) {
		return nil, false
	}
	return et.session, true
}
