package httptools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// docServer serves an OpenAPI document that the test changes, with an
// ETag (unless noETag) it answers 304 to, and records what it was sent.
type docServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	doc []byte
	// status, when set, is answered instead of the document.
	status      int
	noETag      bool
	notModified int
	headers     []http.Header
}

func newDocServer(t *testing.T, doc []byte) *docServer {
	t.Helper()
	d := &docServer{doc: doc}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.headers = append(d.headers, r.Header.Clone())
		if d.status != 0 {
			w.WriteHeader(d.status)
			return
		}
		if !d.noETag {
			etag := fmt.Sprintf(`"%x"`, sha256.Sum256(d.doc))
			if r.Header.Get("If-None-Match") == etag {
				d.notModified++
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("ETag", etag)
		}
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(d.doc)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *docServer) set(doc []byte, status int, noETag bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.doc, d.status, d.noETag = doc, status, noETag
}

// chanCatalog records the sets served and signals each on changed.
type chanCatalog struct {
	mu      sync.Mutex
	sets    map[string]catalog.Set
	changed chan string
}

func (c *chanCatalog) SetSource(name string, set catalog.Set) ([]string, error) {
	c.mu.Lock()
	if c.sets == nil {
		c.sets = map[string]catalog.Set{}
	}
	c.sets[name] = set
	c.mu.Unlock()
	if c.changed != nil {
		c.changed <- name
	}
	return nil, nil
}

// names are the tools the source serves, sorted.
func (c *chanCatalog) names(source string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, st := range c.sets[source].Tools {
		out = append(out, st.Tool.Name)
	}
	slices.Sort(out)
	return out
}

func petstore(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(petstore30)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// urlAPI is an API whose tools are petstore's GET operations, its
// document at docURL.
func urlAPI(apiURL, docURL string) Options {
	o := Options{Name: "pets", BaseURL: apiURL + "/v1", AllowPrivateAddresses: true,
		Headers: []upstream.NamedValue{{Name: "X-Api-Key", Value: "s3cret-key"}},
		OpenAPI: &OpenAPIOptions{URL: docURL, Select: SelectOptions{Methods: []string{"GET"}}}}
	o.Defaults()
	return o
}

// TestOpenAPIFromURL: a document at a URL is fetched when the API is
// registered, without the API's credentials, and its operations served as
// a file's are; one that cannot be fetched fails the registration.
func TestOpenAPIFromURL(t *testing.T) {
	api := newTestAPI(t, nil)
	docs := newDocServer(t, petstore(t))
	o := urlAPI(api.srv.URL, docs.srv.URL+"/openapi.yaml")
	if err := Validate([]Options{o}, nil, nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	cat := &chanCatalog{}
	if err := Register(t.Context(), []Options{o}, cat, Deps{}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if got, want := cat.names("http_api pets"), []string{"pets_listPets", "pets_showPetById"}; !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	for _, h := range docs.headers {
		if h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
			t.Errorf("the document was fetched with the API's credentials: %v", h)
		}
	}
	for _, c := range []struct {
		name   string
		status int
		want   string
	}{
		{"an error status", http.StatusNotFound, "404 Not Found"},
		{"not a document", 0, "openapi"},
	} {
		t.Run(c.name, func(t *testing.T) {
			docs.set([]byte("openapi: 3.0.0\ninfo: [\n"), c.status, false)
			err := Register(t.Context(), []Options{o}, &chanCatalog{}, Deps{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Register = %v, want %q", err, c.want)
			}
		})
	}
	t.Run("a redirect to another host", func(t *testing.T) {
		other := newDocServer(t, petstore(t))
		redirect := httptest.NewServer(http.RedirectHandler(other.srv.URL+"/openapi.yaml", http.StatusFound))
		t.Cleanup(redirect.Close)
		o := urlAPI(api.srv.URL, redirect.URL+"/openapi.yaml")
		err := Register(t.Context(), []Options{o}, &chanCatalog{}, Deps{})
		if err == nil || !strings.Contains(err.Error(), "not the document's host") {
			t.Fatalf("Register = %v, want the redirect refused", err)
		}
	})
}

// TestOpenAPIReload: each reload serves the tools of a document that
// changed, in place of the served ones, and leaves them as they are when
// the document is unchanged (answered 304 or the same bytes), cannot be
// fetched or cannot be used, the last logged once per change.
func TestOpenAPIReload(t *testing.T) {
	api := newTestAPI(t, nil)
	docs := newDocServer(t, petstore(t))
	o := urlAPI(api.srv.URL, docs.srv.URL+"/openapi.yaml")
	o.Tools = petsAPI(api.srv.URL).Tools[:1] // get_pet
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	a, err := newAPI(&o, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDocument(&o, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat := &chanCatalog{}
	renamed := bytes.ReplaceAll(petstore(t), []byte("operationId: showPetById"), []byte("operationId: getPet"))
	clash := bytes.ReplaceAll(petstore(t), []byte("operationId: showPetById"), []byte("operationId: get_pet"))
	steps := []struct {
		name     string
		doc      []byte
		status   int
		noETag   bool
		replaced bool
		want     []string
		log      string
	}{
		{name: "the first fetch", doc: petstore(t), replaced: true, want: []string{"pets_get_pet", "pets_listPets", "pets_showPetById"}},
		{name: "unchanged, answered 304", doc: petstore(t), want: []string{"pets_get_pet", "pets_listPets", "pets_showPetById"}},
		{name: "changed", doc: renamed, replaced: true, want: []string{"pets_getPet", "pets_get_pet", "pets_listPets"}, log: "tools are rebuilt"},
		{name: "unchanged without an ETag", doc: renamed, noETag: true, want: []string{"pets_getPet", "pets_get_pet", "pets_listPets"}},
		{name: "became invalid", doc: []byte("openapi: 3.0.0\ninfo: [\n"), want: []string{"pets_getPet", "pets_get_pet", "pets_listPets"}, log: "cannot be served"},
		{name: "still invalid, not logged again", doc: []byte("openapi: 3.0.0\ninfo: [\n"), want: []string{"pets_getPet", "pets_get_pet", "pets_listPets"}},
		{name: "an operation named like a declared tool", doc: clash, want: []string{"pets_getPet", "pets_get_pet", "pets_listPets"}, log: `named like tools[0]`},
		{name: "cannot be fetched", status: http.StatusServiceUnavailable, want: []string{"pets_getPet", "pets_get_pet", "pets_listPets"}, log: "cannot be fetched"},
		{name: "back to the first", doc: petstore(t), replaced: true, want: []string{"pets_get_pet", "pets_listPets", "pets_showPetById"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			docs.set(s.doc, s.status, s.noETag)
			logMu.Lock()
			logs.Reset()
			logMu.Unlock()
			before := docs.notModified
			if got := d.reload(t.Context(), "pets", a.serve(cat, logger), logger); got != s.replaced {
				t.Errorf("reload = %v, want %v", got, s.replaced)
			}
			if got := cat.names("http_api pets"); !slices.Equal(got, s.want) {
				t.Errorf("served %v, want %v", got, s.want)
			}
			logMu.Lock()
			got := logs.String()
			logMu.Unlock()
			if s.log != "" && !strings.Contains(got, s.log) {
				t.Errorf("the log %q lacks %q", got, s.log)
			}
			if s.log == "" && strings.Contains(got, "level=WARN") {
				t.Errorf("logged %q", got)
			}
			if s.name == "unchanged, answered 304" && docs.notModified != before+1 {
				t.Errorf("the document's server answered 304 %d times, want once", docs.notModified-before)
			}
		})
	}
}

// TestOpenAPIWatch: the document is checked at each tick, and no more
// once the context ends.
func TestOpenAPIWatch(t *testing.T) {
	api := newTestAPI(t, nil)
	docs := newDocServer(t, petstore(t))
	o := urlAPI(api.srv.URL, docs.srv.URL+"/openapi.yaml")
	a, err := newAPI(&o, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDocument(&o, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat := &chanCatalog{changed: make(chan string, 1)}
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		d.watch(ctx, tick, "pets", a.serve(cat, slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler))
		close(done)
	}()
	tick <- time.Now()
	if got := <-cat.changed; got != "http_api pets" {
		t.Fatalf("SetSource(%q)", got)
	}
	docs.set(bytes.ReplaceAll(petstore(t), []byte("operationId: listPets"), []byte("operationId: allPets")), 0, false)
	tick <- time.Now()
	<-cat.changed
	if got, want := cat.names("http_api pets"), []string{"pets_allPets", "pets_showPetById"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
	cancel()
	<-done
}

func TestOpenAPIOptionsChecks(t *testing.T) {
	for _, c := range []struct {
		name string
		o    OpenAPIOptions
		want string
	}{
		{"neither file nor url", OpenAPIOptions{Select: SelectOptions{Methods: []string{"GET"}}}, "openapi.file: one of file and url is required"},
		{"both", OpenAPIOptions{File: petstore30, URL: "https://pets.example/openapi.yaml", Select: SelectOptions{Methods: []string{"GET"}}}, "openapi.url: set with file"},
		{"a URL that is not http", OpenAPIOptions{URL: "file:///etc/passwd"}, "openapi.url: \"file:///etc/passwd\" must be an absolute http or https URL"},
		{"a URL with credentials", OpenAPIOptions{URL: "https://u:p@pets.example/openapi.yaml"}, "openapi.url: must not contain credentials"},
		{"reload with a file", OpenAPIOptions{File: petstore30, Reload: time.Minute, Select: SelectOptions{Methods: []string{"GET"}}}, "openapi.reload: is for a document read from url"},
		{"reload too short", OpenAPIOptions{URL: "https://pets.example/openapi.yaml", Reload: time.Millisecond}, "openapi.reload: 1ms is less than 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			list := []Options{{Name: "pets", BaseURL: "https://pets.example/v1", OpenAPI: &c.o}}
			list[0].Defaults()
			err := Validate(list, nil, nil)
			if err == nil || !strings.Contains(err.Error(), "[0]."+c.want) {
				t.Fatalf("Validate = %v, want %q", err, c.want)
			}
		})
	}
	o := OpenAPIOptions{URL: "https://pets.example/openapi.yaml"}
	if got := o.reload(); got != DefaultReload {
		t.Errorf("reload = %v, want the default %v", got, DefaultReload)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
