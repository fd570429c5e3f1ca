package upstream

import (
	"context"
	"errors"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTarget is the caller a call to an upstream is made for: its request
// context (requests sent with it travel on the caller's call) and session.
type callTarget struct {
	ctx     context.Context
	session *sdk.ServerSession
	// upstream is the upstream session the call went to.
	upstream *sdk.ClientSession
	// direct marks a call served without Portcullis's SDK server (see
	// directTool): it has no session, and its caller takes
	// input-required results itself.
	direct bool
}

type targetKey struct{}

// lateGrace is how long after a call ends a log message of its upstream
// session may still be handled for it (see relay.go).
const lateGrace = time.Second

// inflight tracks the calls in flight on each upstream session, and those
// that ended within lateGrace.
type inflight struct {
	mu    sync.Mutex
	calls map[*sdk.ClientSession]map[*callTarget]struct{}
	ended map[*sdk.ClientSession]map[*callTarget]time.Time
	now   func() time.Time // nil means time.Now
	// pruned is when ended was last pruned. A call's end prunes at most
	// every prunePeriod, not each time: ended holds every call of the last
	// second, and going through them all at each call's end costs more
	// than the call itself at a few thousand calls a second.
	pruned time.Time
}

// prunePeriod is how often the end of a call prunes the calls ended.
const prunePeriod = lateGrace / 4

func (f *inflight) clock() time.Time {
	if f.now != nil {
		return f.now()
	}
	return time.Now()
}

// add records t as in flight on cs until the returned function is called.
func (f *inflight) add(cs *sdk.ClientSession, t *callTarget) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[*sdk.ClientSession]map[*callTarget]struct{}{}
	}
	if f.calls[cs] == nil {
		f.calls[cs] = map[*callTarget]struct{}{}
	}
	f.calls[cs][t] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.calls[cs], t)
		if len(f.calls[cs]) == 0 {
			delete(f.calls, cs)
		}
		if f.ended == nil {
			f.ended = map[*sdk.ClientSession]map[*callTarget]time.Time{}
		}
		if f.ended[cs] == nil {
			f.ended[cs] = map[*callTarget]time.Time{}
		}
		now := f.clock()
		f.ended[cs][t] = now
		if now.Sub(f.pruned) >= prunePeriod {
			f.pruneLocked()
		}
	}
}

// pruneLocked forgets the calls that ended more than lateGrace ago.
func (f *inflight) pruneLocked() {
	now := f.clock()
	f.pruned = now
	cutoff := now.Add(-lateGrace)
	for cs, ended := range f.ended {
		for t, at := range ended {
			if at.Before(cutoff) {
				delete(ended, t)
			}
		}
		if len(ended) == 0 {
			delete(f.ended, cs)
		}
	}
}

// logTarget returns the caller a log message of an upstream belongs to:
// the one named by ctx, the caller of the only call in flight on cs, or,
// with none in flight, the caller of the only call that ended within
// lateGrace. With several, the message is not passed on.
func (f *inflight) logTarget(ctx context.Context, cs *sdk.ClientSession) (*callTarget, error) {
	if t, err := f.target(ctx, cs); !errors.Is(err, errNoCaller) {
		return t, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pruneLocked()
	var only *callTarget
	n := 0
	for t := range f.ended[cs] {
		only, n = t, n+1
	}
	switch n {
	case 0:
		return nil, errNoCaller
	case 1:
		return only, nil
	}
	return nil, errAmbiguousCaller
}

// errNoCaller and errAmbiguousCaller are why a request of an upstream is
// not passed to a caller.
var (
	errNoCaller        = errors.New("no call of Portcullis's is in flight on this session")
	errAmbiguousCaller = errors.New("several calls are in flight on this session and the request does not say which one it belongs to")
)

// target returns the caller a request or notification of an upstream
// belongs to: the one named by ctx (a request made within a call), or the
// caller of the only call in flight on cs.
func (f *inflight) target(ctx context.Context, cs *sdk.ClientSession) (*callTarget, error) {
	if t, ok := ctx.Value(targetKey{}).(*callTarget); ok {
		return t, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch calls := f.calls[cs]; len(calls) {
	case 0:
		return nil, errNoCaller
	case 1:
		for t := range calls {
			return t, nil
		}
	}
	return nil, errAmbiguousCaller
}
