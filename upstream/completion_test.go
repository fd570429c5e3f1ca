package upstream

import (
	"context"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

func TestCompletionsForwarded(t *testing.T) {
	f := newFrontWith(t, func(c *catalog.Catalog) { c.ForwardToSources() })
	var dials atomic.Int32
	m := startManager(t, f.cat, []Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true}},
		map[string]func() (sdk.Transport, func(), error){"be": memDial(t, backend(), &dials)}, Hooks{})
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	for _, tt := range []struct {
		name string
		ref  *sdk.CompleteReference
		want string
	}{
		{name: "prompt, named as served", ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "be_greet"}, want: "ref/prompt:greet:an"},
		{name: "resource template", ref: &sdk.CompleteReference{Type: "ref/resource", URI: "mem://items/{id}"}, want: "ref/resource:mem://items/{id}:an"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.session.Complete(callCtx(t), &sdk.CompleteParams{Ref: tt.ref, Argument: sdk.CompleteParamsArgument{Name: "who", Value: "an"}})
			if err != nil || len(res.Completion.Values) != 1 || res.Completion.Values[0] != tt.want {
				t.Errorf("complete = %+v, %v; want [%s]", res, err, tt.want)
			}
		})
	}
	// A reference no one offers gets no values, not an error.
	res, err := f.session.Complete(callCtx(t), &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "nope"}, Argument: sdk.CompleteParamsArgument{Name: "x"}})
	if err != nil || len(res.Completion.Values) != 0 {
		t.Errorf("unknown reference: %+v, %v", res, err)
	}
}
