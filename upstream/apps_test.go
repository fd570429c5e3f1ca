package upstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

const appURI = "ui://get-time/mcp-app.html"

// appMeta is the _meta of appBackend's App, on the resource and its
// contents, as a client decodes it.
var appMeta = sdk.Meta{"ui": map[string]any{"csp": map[string]any{"connectDomains": []any{"https://api.example"}}, "domain": "a.example", "prefersBorder": true}}

// appBackend is an App server called name, as the published ext-apps
// examples are: its tool get-time names the App (in both _meta keys), poll
// is for the App alone, link returns a link to the App and the App
// embedded; gated is listed only to a client that declares the MCP Apps
// extension, and caps answers with the extensions its client declared.
// Its App reads "<html>name</html>", its file:///shared "name".
// subscribed records the URIs it was subscribed to.
type appBackend struct {
	*sdk.Server
	mu         sync.Mutex
	subscribed []string
}

func newAppBackend(name string) *appBackend {
	b := &appBackend{}
	b.Server = sdk.NewServer(&sdk.Implementation{Name: name}, &sdk.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *sdk.SubscribeRequest) error {
			b.mu.Lock()
			b.subscribed = append(b.subscribed, req.Params.URI)
			b.mu.Unlock()
			return nil
		},
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	obj := map[string]any{"type": "object"}
	tool := func(name string, meta sdk.Meta, h sdk.ToolHandler) {
		b.AddTool(&sdk.Tool{Name: name, InputSchema: obj, Meta: meta}, h)
	}
	textResult := func(s string) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}, nil
	}
	tool("get-time", sdk.Meta{"ui": map[string]any{"resourceUri": appURI, "prefersBorder": true}, "ui/resourceUri": appURI},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult(name + " time")
		})
	tool("poll", sdk.Meta{"ui": map[string]any{"visibility": []any{"app"}}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult(name + " poll")
		})
	tool("link", nil, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.ResourceLink{URI: appURI, Name: "app"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: appURI, MIMEType: mcpapps.MIMEType, Text: "<html>" + name + "</html>"}},
			&sdk.ResourceLink{URI: "file:///shared", Name: "shared"},
		}}, nil
	})
	tool("gated", nil, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return textResult("gated") })
	tool("caps", nil, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var ext map[string]any
		if c := req.ClientCapabilities(); c != nil {
			ext = c.Extensions
		}
		out, _ := json.Marshal(ext)
		return textResult(string(out))
	})
	b.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			list, ok := res.(*sdk.ListToolsResult)
			if !ok || err != nil {
				return res, err
			}
			var caps *sdk.ClientCapabilities
			if r, ok := req.(*sdk.ListToolsRequest); ok {
				caps = r.ClientCapabilities()
			}
			if caps != nil && caps.Extensions[mcpapps.ExtensionID] != nil {
				return res, nil
			}
			out := *list
			out.Tools = slices.DeleteFunc(slices.Clone(list.Tools), func(t *sdk.Tool) bool { return t.Name == "gated" })
			return &out, nil
		}
	})
	read := func(text string, meta sdk.Meta) sdk.ResourceHandler {
		return func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: mcpapps.MIMEType, Text: text, Meta: meta}}}, nil
		}
	}
	csp := appMeta
	b.AddResource(&sdk.Resource{URI: appURI, Name: "app", MIMEType: mcpapps.MIMEType, Meta: csp}, read("<html>"+name+"</html>", csp))
	b.AddResource(&sdk.Resource{URI: "file:///shared", Name: "shared"}, read(name, nil))
	b.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "ui://views/{id}", Name: "view"}, read(name+" view", nil))
	return b
}

// TestAppsServedUnderPrefix puts two instances of one App server behind
// one catalog: each App is served under its upstream's prefix, in the
// tools' _meta, the resource lists, reads, call results, subscriptions
// and updates; other URIs both offer are served by the first upstream
// in the configuration, though it connects last.
func TestAppsServedUnderPrefix(t *testing.T) {
	f := newFrontWith(t, (*catalog.Catalog).ForwardToSources)
	one, two := newAppBackend("one"), newAppBackend("two")
	var dials atomic.Int32
	twoReady := make(chan struct{})
	oneDial := memDial(t, one.Server, &dials)
	m := startManager(t, f.cat, []Options{
		{Name: "one", Transport: TransportHTTP, URL: "http://unused"},
		{Name: "two", Transport: TransportHTTP, URL: "http://unused"},
	}, map[string]func() (sdk.Transport, func(), error){
		"one": func() (sdk.Transport, func(), error) { <-twoReady; return oneDial() },
		"two": memDial(t, two.Server, &dials),
	}, Hooks{})
	waitFor(t, "two listed", func() bool { return f.cat.HasTool("two_get-time") })
	close(twoReady)
	waitFor(t, "one listed", func() bool { return f.cat.HasTool("one_get-time") })
	_ = m

	for tool, err := range f.session.Tools(callCtx(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		p, local, _ := strings.Cut(tool.Name, "_")
		want := sdk.Meta(nil)
		switch local {
		case "get-time":
			served := "ui://" + p + "/get-time/mcp-app.html"
			want = sdk.Meta{"ui": map[string]any{"resourceUri": served, "prefersBorder": true}, "ui/resourceUri": served}
		case "poll":
			want = sdk.Meta{"ui": map[string]any{"visibility": []any{"app"}}}
		}
		if !reflect.DeepEqual(tool.Meta, want) {
			t.Errorf("%s: _meta %v, want %v", tool.Name, tool.Meta, want)
		}
	}
	var uris []string
	for r, err := range f.session.Resources(callCtx(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
		if mcpapps.IsURI(r.URI) && !reflect.DeepEqual(r.Meta, appMeta) {
			t.Errorf("%s: _meta %v, want the App's as it is", r.URI, r.Meta)
		}
	}
	slices.Sort(uris)
	if want := []string{"file:///shared", "ui://one/get-time/mcp-app.html", "ui://two/get-time/mcp-app.html"}; !slices.Equal(uris, want) {
		t.Errorf("resources = %v, want %v", uris, want)
	}
	var templates []string
	for r, err := range f.session.ResourceTemplates(callCtx(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, r.URITemplate)
	}
	slices.Sort(templates)
	if want := []string{"ui://one/views/{id}", "ui://two/views/{id}"}; !slices.Equal(templates, want) {
		t.Errorf("templates = %v, want %v", templates, want)
	}
	for _, c := range []struct{ uri, text string }{
		{"ui://one/get-time/mcp-app.html", "<html>one</html>"},
		{"ui://two/get-time/mcp-app.html", "<html>two</html>"},
		{"ui://two/views/7", "two view"},
		{"file:///shared", "one"}, // one is first in the configuration
	} {
		res, err := f.session.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: c.uri})
		if err != nil {
			t.Fatalf("reading %s: %v", c.uri, err)
		}
		if got := res.Contents[0]; got.Text != c.text || got.URI != c.uri {
			t.Errorf("reading %s: %q at %s, want %q at the URI read", c.uri, got.Text, got.URI, c.text)
		}
		if mcpapps.IsURI(c.uri) && !strings.Contains(c.uri, "views") && !reflect.DeepEqual(res.Contents[0].Meta, appMeta) {
			t.Errorf("reading %s: _meta %v, want the App's as it is", c.uri, res.Contents[0].Meta)
		}
	}
	if _, err := f.session.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: appURI}); err == nil {
		t.Error("the upstreams' own App URI reads; want it served under the prefixes alone")
	}

	res := f.call(t, "two_link", "")
	var got []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.ResourceLink:
			got = append(got, c.URI)
		case *sdk.EmbeddedResource:
			got = append(got, c.Resource.URI)
		}
	}
	if want := []string{"ui://two/get-time/mcp-app.html", "ui://two/get-time/mcp-app.html", "file:///shared"}; !slices.Equal(got, want) {
		t.Errorf("two_link's resources = %v, want %v", got, want)
	}

	if err := f.session.Subscribe(callCtx(t), &sdk.SubscribeParams{URI: "ui://two/get-time/mcp-app.html"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two subscribed to its own App URI", func() bool {
		two.mu.Lock()
		defer two.mu.Unlock()
		return slices.Equal(two.subscribed, []string{appURI})
	})
	// The front server records the caller's subscription after passing
	// it on, so the upstream reports updates until one arrives.
	ctx := callCtx(t)
	waitFor(t, "the update under the served URI", func() bool {
		if err := two.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: appURI}); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Contains(f.updated, "ui://two/get-time/mcp-app.html")
	})
}

// TestAppsExtensionDeclared checks that Portcullis's sessions declare the
// MCP Apps extension unless the upstream's apps_extension is false, so
// that an upstream that offers a tool only to such clients lists it; and
// that on 2026-07-28 each call carries its caller's declaration.
func TestAppsExtensionDeclared(t *testing.T) {
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		for _, declare := range []*bool{nil, ptr(true), ptr(false)} {
			name := era + " apps_extension unset"
			if declare != nil {
				name = era + " apps_extension " + map[bool]string{true: "true", false: "false"}[*declare]
			}
			t.Run(name, func(t *testing.T) {
				f := newFront(t)
				m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true, AppsExtension: declare}}, f.cat, Deps{Backoff: fastBackoff})
				if err != nil {
					t.Fatal(err)
				}
				var dials atomic.Int32
				m.ups[0].conn.dialFn = memDial(t, newAppBackend("be").Server, &dials)
				m.ups[0].conn.sessionOpts = &sdk.ClientSessionOptions{ProtocolVersion: era}
				m.Start(context.Background())
				t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
				waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
				want := declare == nil || *declare
				if got := f.cat.HasTool("be_gated"); got != want {
					t.Errorf("be_gated listed: %v, want %v", got, want)
				}
				if era < statelessEra {
					return
				}
				for _, caller := range []bool{false, true} {
					caps := &sdk.ClientCapabilities{}
					if caller {
						caps.AddExtension(mcpapps.ExtensionID, mcpapps.Capability())
					}
					cs := f.caller(t, &sdk.ClientOptions{Capabilities: caps}, era)
					res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_caps", Arguments: map[string]any{}})
					if err != nil {
						t.Fatal(err)
					}
					var ext map[string]any
					_ = json.Unmarshal([]byte(text(res)), &ext)
					if _, ok := ext[mcpapps.ExtensionID]; ok != caller || len(ext) > 1 {
						t.Errorf("caller declaring the extension %v: the upstream saw extensions %v", caller, ext)
					}
				}
			})
		}
	}
}

// TestServedResultOfADirectCall checks that a result passed on as it came
// is rewritten only when it names an App resource, and only for an
// upstream that serves Apps.
func TestServedResultOfADirectCall(t *testing.T) {
	p := newProxy(Options{Name: "up", Prefix: ptr("up"), Transport: TransportHTTP, URL: "http://unused"}, 0, catalog.New(nil), Deps{Logger: slog.New(slog.DiscardHandler)})
	plain := &catalog.RawToolResult{JSON: json.RawMessage(`{"content":[{"type":"text","text":"x"}],"x-kept":1}`)}
	app := &catalog.RawToolResult{JSON: json.RawMessage(`{"content":[{"type":"resource_link","uri":"ui://a/b.html","name":"a"}]}`)}
	if got := p.servedResult(app); got != sdk.Result(app) {
		t.Errorf("an upstream that serves no App: %#v, want the result as it came", got)
	}
	p.sup.apps.Store(true)
	if got := p.servedResult(plain); got != sdk.Result(plain) {
		t.Errorf("a result without ui:// URIs: %#v, want it as it came", got)
	}
	c, ok := p.servedResult(app).(*sdk.CallToolResult)
	if !ok || c.Content[0].(*sdk.ResourceLink).URI != "ui://up/a/b.html" {
		t.Errorf("a result with a ui:// link: %#v, want it served under the prefix", c)
	}
}
