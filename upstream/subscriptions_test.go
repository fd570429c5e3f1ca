package upstream

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

func TestSubscriptionsForwarded(t *testing.T) {
	f := newFrontWith(t, func(c *catalog.Catalog) { c.ForwardToSources() })
	be := backend()
	var dials atomic.Int32
	m := startManager(t, f.cat, []Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true}},
		map[string]func() (sdk.Transport, func(), error){"be": memDial(t, be, &dials)}, Hooks{})
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	if err := f.session.Subscribe(callCtx(t), &sdk.SubscribeParams{URI: "mem://readme"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the upstream subscription", func() bool {
		m.ups[0].sup.subsMu.Lock()
		defer m.ups[0].sup.subsMu.Unlock()
		return m.ups[0].sup.subs["mem://readme"] == 1
	})
	// The front server records the caller's subscription after passing
	// it on, so the upstream reports updates until one arrives.
	ctx := callCtx(t)
	waitFor(t, "the update at the caller", func() bool {
		if err := be.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "mem://readme"}); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Contains(f.updated, "mem://readme")
	})
	if err := f.session.Unsubscribe(callCtx(t), &sdk.UnsubscribeParams{URI: "mem://readme"}); err != nil {
		t.Fatal(err)
	}
	// Under 2026-07-28 the subscription ends with its listen stream, a
	// little after Unsubscribe returns.
	u := m.ups[0]
	waitFor(t, "the upstream unsubscribed", func() bool {
		u.sup.subsMu.Lock()
		defer u.sup.subsMu.Unlock()
		return len(u.sup.subs) == 0
	})
}
