package httptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// Catalog is where the APIs' tools are served: [catalog.Catalog].
type Catalog interface {
	SetSource(name string, set catalog.Set) (skipped []string, err error)
}

// Register builds each API of list (after Defaults and Validate) and
// serves its tools in cat as the source "http_api <name>": selected by
// servers[].tools[].source <name>, named "<prefix>_<tool>". A credential
// file that cannot be read, an OpenAPI document that cannot be read,
// fetched or used, or a tool name another source holds, fails the whole.
// The documents read from a URL are checked for changes every
// openapi.reload until ctx ends.
func Register(ctx context.Context, list []Options, cat Catalog, deps Deps) error {
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var docs []func()
	for i := range list {
		o := &list[i]
		a, err := newAPI(o, deps)
		if err != nil {
			return err
		}
		if o.AllowPrivateAddresses {
			logger.Warn("httptools: allow_private_addresses is on: the API's tools may reach loopback and private networks", "api", o.Name)
		}
		if o.TLS.InsecureSkipVerify {
			logger.Warn("httptools: tls.insecure_skip_verify is on: the API's certificate is not verified; never use this in production", "api", o.Name)
		}
		var data []byte
		var doc *document
		switch p := o.OpenAPI; {
		case p != nil && p.URL != "":
			if doc, err = newDocument(o, deps.Transport); err != nil {
				return err
			}
			data, err = doc.fetch(ctx)
		case p != nil:
			data, err = p.readFile()
		}
		if err != nil {
			return fmt.Errorf("httptools: %s: openapi: %w", o.Name, err)
		}
		serve := a.serve(cat, logger)
		if err := serve(data); err != nil {
			return err
		}
		if doc != nil {
			every := o.OpenAPI.reload()
			docs = append(docs, func() {
				t := time.NewTicker(every)
				defer t.Stop()
				doc.watch(ctx, t.C, o.Name, serve, logger)
			})
		}
	}
	// Watched once every API is served: a failure above serves none.
	for _, watch := range docs {
		go watch()
	}
	return nil
}

// serve returns what serves in cat the API's tools with those data, its
// OpenAPI document (nil for none), selects, as the source
// "http_api <name>", in place of those it served.
func (a *api) serve(cat Catalog, logger *slog.Logger) func(data []byte) error {
	return func(data []byte) error {
		set, err := a.set(data, logger)
		if err != nil {
			return err
		}
		if _, err := cat.SetSource("http_api "+a.opts.Name, set); err != nil {
			return fmt.Errorf("httptools: %s: %w", a.opts.Name, err)
		}
		return nil
	}
}

// set is what the API serves: its declared tools and those data, its
// OpenAPI document (nil for none), selects. The operations left out or
// renamed are logged.
func (a *api) set(data []byte, logger *slog.Logger) (catalog.Set, error) {
	o := a.opts
	var imported []spec.Tool
	if data != nil {
		tools, notes, errs := o.imported(data)
		for _, n := range notes {
			logger.Warn("httptools: an operation of the OpenAPI document is left out or changed", "api", o.Name, "note", n)
		}
		if len(errs) > 0 {
			return catalog.Set{}, fmt.Errorf("httptools: %s: %w", o.Name, errors.Join(errs...))
		}
		imported = tools
	}
	set := catalog.Set{Origin: o.Name, Prefix: o.namespace(), Fixed: true}
	for _, s := range slices.Concat(o.Tools, imported) {
		t, err := a.newTool(s)
		if err != nil {
			return catalog.Set{}, err
		}
		// A call of the 2026-07-28 era is served without the SDK
		// server's session per request (catalog.DirectHandler): the
		// handler needs only the arguments and the caller's token info.
		set.Tools = append(set.Tools, catalog.SetTool{Tool: t.sdkTool(o.ServedName(t.spec.Name)), Handler: t.handle, Direct: t.direct})
	}
	return set, nil
}

func newAPI(o *Options, deps Deps) (*api, error) {
	base, err := url.Parse(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("httptools: %s: base_url: %w", o.Name, err)
	}
	a := &api{opts: o, base: base, basePath: strings.TrimSuffix(base.EscapedPath(), "/")}
	for _, h := range o.Headers {
		if h.Value != "" {
			a.secrets = append(a.secrets, h.Value)
		}
	}
	wrap := func(rt http.RoundTripper) http.RoundTripper {
		if deps.Transport != nil {
			rt = deps.Transport(rt)
		}
		return &recorder{next: rt, names: credentialHeaders(o)}
	}
	below, err := newTransport(o, wrap)
	if err != nil {
		return nil, err
	}
	if o.OAuth.PerCaller() {
		a.callers = &callers{o: o, base: below, deps: deps}
		return a, nil
	}
	rt, err := upstream.CredentialTransport(o.Name, o.Headers, o.OAuth, tokenClient, below)
	if err != nil {
		return nil, fmt.Errorf("httptools: %w", err)
	}
	a.client = newClient(o, rt)
	if o.OAuth.ConnectedAccount() {
		if deps.Accounts == nil {
			return nil, fmt.Errorf("httptools: %s: oauth.grant authorization_code needs the connected accounts", o.Name)
		}
		a.accounts = deps.Accounts
	}
	return a, nil
}

func (a *api) newTool(s spec.Tool) (*tool, error) {
	t := &tool{api: a, spec: s, params: map[string]spec.Param{}}
	byWire := map[string]string{}
	for _, p := range s.Params {
		t.params[p.Name] = p
		if p.In == spec.InPath {
			byWire[p.Wire()] = p.Name
		}
	}
	t.path = parsePath(s.Path, byWire)
	raw := s.InputSchema
	if len(raw) == 0 {
		raw = defaultSchema(s)
		t.spec.InputSchema = raw
	}
	var err error
	if t.schema, err = resolveSchema(raw); err != nil {
		return nil, fmt.Errorf("httptools: %s: tool %s: input_schema: %w", a.opts.Name, s.Name, err)
	}
	return t, nil
}

// defaultSchema is the input schema of a tool that declares none: an
// object with one property per param, the required ones and the path
// params required.
func defaultSchema(s spec.Tool) json.RawMessage {
	props := map[string]any{}
	var required []string
	for _, p := range s.Params {
		props[p.Name] = map[string]any{}
		if p.Required || p.In == spec.InPath {
			required = append(required, p.Name)
		}
	}
	sch := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sch["required"] = required
	}
	b, _ := json.Marshal(sch)
	return b
}

// sdkTool is the tool as MCP clients list it, under name.
func (t *tool) sdkTool(name string) *sdk.Tool {
	s := t.spec
	out := &sdk.Tool{Name: name, Title: s.Title, Description: s.Description, InputSchema: s.InputSchema}
	if len(s.OutputSchema) > 0 {
		out.OutputSchema = s.OutputSchema
	}
	a := s.Annotations
	if a.ReadOnly != nil || a.Destructive != nil || a.Idempotent != nil || a.OpenWorld != nil {
		out.Annotations = &sdk.ToolAnnotations{DestructiveHint: a.Destructive, OpenWorldHint: a.OpenWorld,
			ReadOnlyHint: a.ReadOnly != nil && *a.ReadOnly, IdempotentHint: a.Idempotent != nil && *a.Idempotent}
	}
	return out
}

// timeout is the tool's, or its API's.
func (t *tool) timeout() time.Duration {
	if t.spec.Timeout > 0 {
		return t.spec.Timeout
	}
	return t.api.opts.Timeout
}

// direct is handle as a [catalog.DirectHandler].
func (t *tool) direct(ctx context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
	return t.handle(ctx, req)
}

// handle serves a call: the arguments checked against the input schema,
// the request made with the API's credential (never the caller's), the
// response mapped to the result. Every failure is a tool error.
func (t *tool) handle(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var args map[string]json.RawMessage
	var instance map[string]any
	raw := req.Params.Arguments
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return toolError("The arguments must be a JSON object."), nil
	}
	if err := json.Unmarshal(raw, &instance); err != nil {
		return toolError("The arguments must be a JSON object."), nil
	}
	if err := t.schema.Validate(instance); err != nil {
		return toolError(fmt.Sprintf("The arguments do not match the tool's input schema: %v.", err)), nil
	}
	d := t.timeout()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	rec := &recorded{}
	hr, err := t.newRequest(context.WithValue(ctx, recordedKey{}, rec), args)
	if err != nil {
		return t.failure(ctx, err, d.String()), nil
	}
	client := t.api.client
	if t.api.callers != nil {
		if client, err = t.api.callers.client(callerOf(req)); err != nil {
			return t.failure(ctx, err, d.String()), nil
		}
	}
	ti := callerOf(req)
	var account string
	if t.api.accounts != nil {
		if account, err = t.api.accounts.Token(ctx, ti, t.api.opts.Name); err != nil {
			return t.accountFailure(err), nil
		}
		hr.Header.Set("Authorization", "Bearer "+account)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return t.failure(ctx, err, d.String()), nil
	}
	defer resp.Body.Close()
	if account != "" && resp.StatusCode == http.StatusUnauthorized {
		// Refreshed before its next use, or the connection dropped.
		t.api.accounts.Rejected(ctx, ti, t.api.opts.Name, account)
	}
	body, err := readBody(resp.Body, t.api.opts.MaxResponseBytes)
	if err != nil {
		return t.failure(ctx, err, d.String()), nil
	}
	return t.result(resp, body, append(rec.values, t.api.secrets...)), nil
}

// callerOf is the token info of the call's caller; nil for none.
func callerOf(req *sdk.CallToolRequest) *sdkauth.TokenInfo {
	if req.Extra == nil {
		return nil
	}
	return req.Extra.TokenInfo
}
