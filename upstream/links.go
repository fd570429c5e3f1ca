package upstream

import (
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// link is one open session of an upstream, with its senders (sender.go).
type link struct {
	client *clientSender
	// hop is the session's direct hop, nil when every request on it
	// takes the SDK client (see newHop).
	hop *hop
}

// links are the open sessions of an upstream: each is linked as it opens
// and unlinked when it ends.
type links struct {
	m sync.Map // *sdk.ClientSession → *link
	// inflight is where the SDK client senders record their calls.
	inflight *inflight
}

// add links sess, whose awaited notifications n counts, with its hop h
// (nil: none).
func (l *links) add(sess *sdk.ClientSession, n *notes, h *hop) {
	l.m.Store(sess, &link{client: &clientSender{sess: sess, notes: n, inflight: l.inflight}, hop: h})
}

// remove unlinks sess.
func (l *links) remove(sess *sdk.ClientSession) { l.m.Delete(sess) }

func (l *links) get(sess *sdk.ClientSession) *link {
	v, ok := l.m.Load(sess)
	if !ok {
		return nil
	}
	return v.(*link)
}

// notesOf returns the count of sess's awaited notifications, or nil when
// sess is not linked.
func (l *links) notesOf(sess *sdk.ClientSession) *notes {
	if k := l.get(sess); k != nil {
		return k.client.notes
	}
	return nil
}

// senderFor returns the sender of a request on sess: its direct hop when
// useHop is true and sess has one, its SDK client sender otherwise. A
// session no longer linked (it ended while the request was on its way)
// gets an SDK client sender that waits for no notifications.
func (l *links) senderFor(sess *sdk.ClientSession, useHop bool) sender {
	k := l.get(sess)
	switch {
	case k == nil:
		return &clientSender{sess: sess, inflight: l.inflight}
	case useHop && k.hop != nil:
		return k.hop
	}
	return k.client
}
