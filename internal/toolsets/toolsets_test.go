package toolsets

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/outbound"
	"go.yaml.in/yaml/v3"
)

func TestOptionsDefaults(t *testing.T) {
	var o Options
	o.Defaults()
	want := Options{
		Toolsets: []string{"core"},
		Weather:  WeatherOptions{BaseURL: "https://api.open-meteo.com", GeocodingURL: "https://geocoding-api.open-meteo.com", Timeout: 10 * time.Second},
	}
	if !slices.Equal(o.Toolsets, want.Toolsets) || o.Weather != want.Weather {
		t.Errorf("Defaults() = %+v, want %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate() after Defaults() = %v", err)
	}
}

// TestEmptyToolsetsServeNone: an empty list is not the absent one.
func TestEmptyToolsetsServeNone(t *testing.T) {
	var o Options
	if err := yaml.Unmarshal([]byte("toolsets: []\n"), &o); err != nil {
		t.Fatal(err)
	}
	c := newCatalog(t, o, Deps{})
	if names := c.ToolNames(); len(names) != 0 {
		t.Errorf("toolsets: [] serves %v, want no tool", names)
	}
}

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	okFile := filepath.Join(dir, "ok.md")
	if err := os.WriteFile(okFile, []byte("hello {{who}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.md")

	tests := []struct {
		name string
		edit func(o *Options)
		want []string // each must start one line of the error; nil means valid
	}{
		{name: "defaults are valid", edit: func(*Options) {}},
		{
			name: "every problem at once",
			edit: func(o *Options) {
				o.Toolsets = []string{"core", "workshop", "foo", "core"}
				o.Weather = WeatherOptions{BaseURL: "api.open-meteo.com", GeocodingURL: "ftp://x", Timeout: -time.Second}
				o.Resources = []ResourceSpec{{URI: "docs://a", Name: "a", File: missing}}
			},
			want: []string{
				`toolsets[2]: unknown toolset "foo" (known: core, conformance, workshop)`,
				`toolsets[3]: toolset "core" is listed twice`,
				"weather.base_url: must be an absolute http or https URL",
				"weather.geocoding_url: must be an absolute http or https URL",
				"weather.timeout: must be positive",
				"resources[0].file: open " + missing + ": no such file",
			},
		},
		{
			name: "weather URL with credentials",
			edit: func(o *Options) { o.Weather.BaseURL = "https://user:pw@example.com" },
			want: []string{"weather.base_url: must not contain credentials"},
		},
		{
			name: "resources",
			edit: func(o *Options) {
				o.Resources = []ResourceSpec{
					{URI: "docs://a", Text: "x"},
					{URI: "docs://b", URITemplate: "docs://{x}", Name: "b", Text: "x"},
					{URI: "relative/path", Name: "c", Text: "x"},
					{URITemplate: "docs://{id}", Name: "d", Text: "{{id}} {{other}}", Completions: []CompletionSpec{{Variable: "nope", Values: []string{"1"}}}},
					{URI: "docs://a", Name: "e", Text: "x", File: okFile},
					{URI: "docs://f", Name: "f", Text: "x", MIMEType: "text/"},
					{URI: "docs://g", Name: "g", Text: "x", Completions: []CompletionSpec{{Variable: "x", Values: []string{"1"}}}},
					{URITemplate: "docs://{unclosed", Name: "h", Text: "x"},
				}
			},
			want: []string{
				"resources[0].name: required",
				"resources[1]: set uri or uri_template, not both",
				"resources[2].uri: must be an absolute URI",
				"resources[3].text: placeholder {{other}} is not a variable",
				`resources[3].completions[0].variable: "nope" is not a variable`,
				"resources[4]: same uri as resources[0]",
				"resources[4].file: set text or file, not both",
				"resources[5].mime_type:",
				"resources[6].completions: only a uri_template resource",
				"resources[7].uri_template:",
			},
		},
		{
			name: "prompts",
			edit: func(o *Options) {
				o.Prompts = []PromptSpec{
					{Name: "ok", Text: "hello {{who}}", Arguments: []PromptArgumentSpec{{Name: "who"}}},
					{Name: "ok", File: okFile, Arguments: []PromptArgumentSpec{{Name: "who"}}},
					{Name: "bad name!", Text: "x", Role: "system"},
					{Text: "{{a}}", Arguments: []PromptArgumentSpec{{Name: "1a"}, {Name: "b"}, {Name: "b"}}},
					{Name: "none"},
				}
			},
			want: []string{
				`prompts[1].name: "ok" is also the name of prompts[0]`,
				`prompts[2].name: "bad name!"`,
				`prompts[2].role: "system": must be user or assistant`,
				"prompts[3].name: required",
				`prompts[3].arguments[0].name: "1a"`,
				`prompts[3].arguments[2].name: "b" is declared twice`,
				"prompts[3].text: placeholder {{a}} is not a declared argument",
				"prompts[4].text: set text or file",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o Options
			o.Defaults()
			tt.edit(&o)
			err := o.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want errors")
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
					t.Errorf("no error line starts with %q; got:\n%v", w, err)
				}
			}
			if len(lines) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(lines), len(tt.want), err)
			}
		})
	}
}

// TestConfigYAML decodes the documented `tools:` section strictly, as the
// server's config loader does.
func TestConfigYAML(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "oncall.md"), []byte("# On call\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := `
tools:
  toolsets: [core, workshop]
  weather:
    base_url: https://api.open-meteo.com
    geocoding_url: https://geocoding-api.open-meteo.com
    timeout: 5s
  resources:
    - uri: docs://handbook/oncall
      name: oncall
      title: On-call handbook
      description: Who is on call and how to page them.
      file: ` + filepath.Join(dir, "oncall.md") + `
    - uri_template: greeting://{lang}/{name}
      name: greeting
      mime_type: text/plain
      text: "Hello {{name}} ({{lang}})"
      completions:
        - variable: lang
          values: [en, fr, de]
  prompts:
    - name: summarize
      title: Summarize a document
      description: Summarize text for a given audience.
      role: user
      arguments:
        - name: text
          description: The text to summarize.
          required: true
        - name: audience
          completions: [engineers, executives]
      text: "Summarize the following for {{audience}}:\n\n{{text}}"
`
	var cfg struct {
		Tools Options `yaml:"tools"`
	}
	dec := yaml.NewDecoder(bytes.NewBufferString(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode: %v", err)
	}
	cfg.Tools.Defaults()
	if err := cfg.Tools.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.Tools.Weather.Timeout != 5*time.Second {
		t.Errorf("timeout = %v, want 5s", cfg.Tools.Weather.Timeout)
	}
	if _, err := New(cfg.Tools, Deps{}); err != nil {
		t.Errorf("New: %v", err)
	}

	bad := "tools:\n  toolset: [core]\n"
	dec = yaml.NewDecoder(bytes.NewBufferString(bad))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err == nil {
		t.Error("decoding an unknown key succeeded, want an error")
	}
}

func TestToolNames(t *testing.T) {
	tests := []struct {
		name     string
		toolsets []string
		want     []string
	}{
		{name: "default", want: []string{"PingME", "calculator", "echo", "time", "whoami"}},
		{name: "workshop", toolsets: []string{"workshop"}, want: []string{"calculator", "country_info", "weather"}},
		{name: "calculator once", toolsets: []string{"core", "workshop"}, want: []string{"PingME", "calculator", "country_info", "echo", "time", "weather", "whoami"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, Options{Toolsets: tt.toolsets}, Deps{})
			if got := c.ToolNames(); !slices.Equal(got, tt.want) {
				t.Errorf("ToolNames() = %v, want %v", got, tt.want)
			}
			// Register must add exactly these, without panicking.
			cs, _ := connect(t, c, nil)
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, tl := range res.Tools {
				listed = append(listed, tl.Name)
			}
			slices.Sort(listed)
			if !slices.Equal(listed, tt.want) {
				t.Errorf("tools/list = %v, want %v", listed, tt.want)
			}
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	_, err := New(Options{Toolsets: []string{"nope"}}, Deps{})
	if err == nil || !strings.Contains(err.Error(), `unknown toolset "nope"`) {
		t.Errorf("New = %v, want the validation error", err)
	}
}

// TestToolMetadata checks what every non-conformance tool must carry for a
// model to use it well.
func TestToolMetadata(t *testing.T) {
	cs, _ := connect(t, newCatalog(t, Options{Toolsets: []string{"core", "workshop"}}, Deps{}), nil)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	structuredTools := map[string]bool{"calculator": true, "time": true, "weather": true, "country_info": true, "whoami": true}
	openWorld := map[string]bool{"weather": true}
	for _, tl := range res.Tools {
		t.Run(tl.Name, func(t *testing.T) {
			if tl.Title == "" || len(tl.Description) < 40 {
				t.Errorf("title %q, description %q: want both, the description a sentence or more", tl.Title, tl.Description)
			}
			a := tl.Annotations
			if a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil {
				t.Fatalf("annotations = %+v, want read-only, idempotent, not destructive, open world set", a)
			}
			if *a.OpenWorldHint != openWorld[tl.Name] {
				t.Errorf("openWorldHint = %v, want %v", *a.OpenWorldHint, openWorld[tl.Name])
			}
			if (tl.OutputSchema != nil) != structuredTools[tl.Name] {
				t.Errorf("output schema present = %v, want %v", tl.OutputSchema != nil, structuredTools[tl.Name])
			}
		})
	}
}

func TestApplyLeavesOthersAlone(t *testing.T) {
	so := &sdk.ServerOptions{Instructions: "keep me"}
	newCatalog(t, Options{}, Deps{}).Apply(so)
	if so.Instructions != "keep me" || so.CompletionHandler != nil || so.SubscribeHandler != nil || so.UnsubscribeHandler != nil {
		t.Errorf("core-only Apply changed the options: %+v", so)
	}
	newCatalog(t, Options{Toolsets: []string{"conformance"}}, Deps{}).Apply(so)
	if so.CompletionHandler == nil || so.SubscribeHandler == nil || so.UnsubscribeHandler == nil {
		t.Error("conformance Apply did not set the completion and subscribe handlers")
	}
}

// TestRegisterConcurrently registers one catalog on many servers at once, as
// a stateless handler that builds a server per request does.
func TestRegisterConcurrently(t *testing.T) {
	c := newCatalog(t, Options{Toolsets: []string{"core", "workshop", "conformance"}}, Deps{})
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			so := &sdk.ServerOptions{}
			c.Apply(so)
			c.Register(sdk.NewServer(&sdk.Implementation{Name: "x", Version: "v0"}, so))
		}()
	}
	for range 4 {
		<-done
	}
	cs, _ := connect(t, c, nil)
	if res := call(t, cs, "calculator", map[string]any{"operation": "add", "a": 1, "b": 2}); res.IsError {
		t.Errorf("calculator after concurrent registration: %s", resultText(res))
	}
}

// TestListedSchemasValidate checks that a tool whose schema reached the SDK
// encoded is listed with that schema and still has its arguments validated
// by it, on both protocol eras.
func TestListedSchemasValidate(t *testing.T) {
	for _, version := range []string{"2025-11-25", ""} {
		t.Run("version "+version, func(t *testing.T) {
			client := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, nil)
			cs, _ := connectClient(t, newCatalog(t, Options{}, Deps{}), client, version)
			b, _ := json.Marshal(listedTool(t, cs, "echo").InputSchema)
			var listed jsonschema.Schema
			if err := json.Unmarshal(b, &listed); err != nil {
				t.Fatalf("listed input schema %s: %v", b, err)
			}
			text := listed.Properties["text"]
			if listed.Type != "object" || !slices.Equal(listed.Required, []string{"text"}) || text == nil ||
				text.Type != "string" || text.MaxLength == nil || *text.MaxLength != maxEchoLen || text.Description == "" {
				t.Errorf("listed input schema %s, want echo's: text, a string of at most %d characters, required", b, maxEchoLen)
			}
			for _, args := range []map[string]any{{}, {"text": 7}, {"text": strings.Repeat("a", maxEchoLen+1)}} {
				if r := call(t, cs, "echo", args); !r.IsError || !strings.Contains(resultText(r), "validating") {
					t.Errorf("echo %v: %q, want a validation error", args, resultText(r))
				}
			}
		})
	}
}

// TestDefaultHTTPClientReusesConnections: bursts of sixteen calls to one
// API go out on the connections the previous burst left idle, rather than
// on new connections (a TLS handshake each) beyond a small pool.
func TestDefaultHTTPClientReusesConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := DefaultHTTPClient()
	defer client.CloseIdleConnections()
	const burst, bursts = 16, 20
	for range bursts {
		var wg sync.WaitGroup
		for range burst {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	// A pool that keeps its connections dials only when none is idle: the
	// connections open at once are at most the calls in flight plus the
	// idle ones it keeps, whatever the timing. A pool that keeps fewer
	// than a burst dials again in every burst.
	if n, most := conns.Load(), int32(burst+outbound.IdleConnsPerHost); n > most {
		t.Errorf("%d bursts of %d calls opened %d connections, want at most %d (the calls in flight and the idle connections kept)", bursts, burst, n, most)
	}
}
