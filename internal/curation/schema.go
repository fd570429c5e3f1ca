package curation

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool returns t as a caller sees it curated by s: its name, title,
// description and the annotations s sets replaced, and its input schema
// curated by [Schema]. Its output schema and _meta are t's. t is not
// changed.
func Tool(t *sdk.Tool, s *ToolSelection) (*sdk.Tool, error) {
	out := *t
	if s.ExposeAs != "" {
		out.Name = s.ExposeAs
	}
	if s.Title != "" {
		out.Title = s.Title
	}
	if s.Description != "" {
		out.Description = s.Description
	}
	if s.Annotations.Set() || (s.Title != "" && t.Annotations != nil && t.Annotations.Title != "") {
		var a sdk.ToolAnnotations
		if t.Annotations != nil {
			a = *t.Annotations
		}
		if s.Title != "" && a.Title != "" {
			a.Title = s.Title
		}
		if h := s.Annotations; h.Set() {
			if h.ReadOnlyHint != nil {
				a.ReadOnlyHint = *h.ReadOnlyHint
			}
			if h.DestructiveHint != nil {
				a.DestructiveHint = new(*h.DestructiveHint)
			}
			if h.IdempotentHint != nil {
				a.IdempotentHint = *h.IdempotentHint
			}
			if h.OpenWorldHint != nil {
				a.OpenWorldHint = new(*h.OpenWorldHint)
			}
		}
		out.Annotations = &a
	}
	if len(s.Arguments) > 0 || len(s.FixedArguments) > 0 {
		in, err := Schema(t.InputSchema, s)
		if err != nil {
			return nil, err
		}
		out.InputSchema = in
	}
	return &out, nil
}

// Resource returns r as a caller sees it curated by s: renamed, titled
// and described, with its URI. r is not changed.
func Resource(r *sdk.Resource, s *ResourceSelection) *sdk.Resource {
	out := *r
	out.Name = cmp.Or(s.ExposeAs, r.Name)
	out.Title = cmp.Or(s.Title, r.Title)
	out.Description = cmp.Or(s.Description, r.Description)
	return &out
}

// Template returns t as a caller sees it curated by s, as [Resource].
func Template(t *sdk.ResourceTemplate, s *ResourceSelection) *sdk.ResourceTemplate {
	out := *t
	out.Name = cmp.Or(s.ExposeAs, t.Name)
	out.Title = cmp.Or(s.Title, t.Title)
	out.Description = cmp.Or(s.Description, t.Description)
	return &out
}

// Prompt returns p as a caller sees it curated by s. p is not changed.
func Prompt(p *sdk.Prompt, s *PromptSelection) *sdk.Prompt {
	out := *p
	out.Name = cmp.Or(s.ExposeAs, p.Name)
	out.Title = cmp.Or(s.Title, p.Title)
	out.Description = cmp.Or(s.Description, p.Description)
	return &out
}

// Schema returns the input schema schema (JSON, or a value that encodes
// to it) as callers of the tool curated by s see it: its fixed arguments
// removed from properties, required and dependentRequired, and the
// descriptions and defaults s gives its arguments set. Everything else,
// and the order of members, is kept (the JSON compacted), so that a
// valid JSON Schema 2020-12 stays one.
func Schema(schema any, s *ToolSelection) (json.RawMessage, error) {
	raw, ok := schema.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(schema); err != nil {
			return nil, fmt.Errorf("curation: input schema: %w", err)
		}
	}
	top, err := parseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("curation: input schema: %w", err)
	}
	if praw, ok := top.get("properties"); ok {
		props, err := parseObject(praw)
		if err != nil {
			return nil, fmt.Errorf("curation: input schema: properties: %w", err)
		}
		for name := range s.FixedArguments {
			props.remove(name)
		}
		for _, name := range sortedKeys(s.Arguments) {
			a := s.Arguments[name]
			p, ok := props.get(name)
			if !ok {
				continue
			}
			if p, err = describe(p, a); err != nil {
				return nil, fmt.Errorf("curation: input schema: properties.%s: %w", name, err)
			}
			props.set(name, p)
		}
		top.set("properties", props.encode())
	}
	if rraw, ok := top.get("required"); ok && len(s.FixedArguments) > 0 {
		var req []string
		if json.Unmarshal(rraw, &req) == nil {
			req = withoutFixed(req, s)
			if len(req) == 0 {
				top.remove("required")
			} else {
				top.set("required", mustJSON(req))
			}
		}
	}
	if draw, ok := top.get("dependentRequired"); ok && len(s.FixedArguments) > 0 {
		// An argument the caller cannot send neither needs others nor is
		// needed: Portcullis sends it.
		var deps map[string][]string
		if json.Unmarshal(draw, &deps) == nil {
			dr, err := parseObject(draw)
			if err != nil {
				return nil, fmt.Errorf("curation: input schema: dependentRequired: %w", err)
			}
			for k := range s.FixedArguments {
				dr.remove(k)
			}
			for i := range dr {
				dr[i].value = mustJSON(withoutFixed(deps[dr[i].key], s))
			}
			top.set("dependentRequired", dr.encode())
		}
	}
	var out bytes.Buffer
	if err := json.Compact(&out, top.encode()); err != nil {
		return nil, fmt.Errorf("curation: input schema: %w", err)
	}
	return out.Bytes(), nil
}

// describe returns the property schema p with a's description and
// default set. A boolean schema becomes the object schema that means the
// same.
func describe(p json.RawMessage, a Argument) (json.RawMessage, error) {
	var o object
	switch string(bytes.TrimSpace(p)) {
	case "true":
	case "false":
		o = object{{key: "not", value: json.RawMessage(`{}`)}}
	default:
		var err error
		if o, err = parseObject(p); err != nil {
			return nil, err
		}
	}
	if a.Description != "" {
		o.set("description", mustJSON(a.Description))
	}
	if a.Default != nil {
		d, err := jsonValue(a.Default)
		if err != nil {
			return nil, err
		}
		o.set("default", d)
	}
	return o.encode(), nil
}

func withoutFixed(names []string, s *ToolSelection) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		_, fixed := s.FixedArguments[n]
		return fixed
	})
}
