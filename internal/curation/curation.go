// Package curation describes what one MCP server of a Portcullis exposes
// of the catalog, and how: an [Exposure] selects tools, resources and
// prompts by source and name, and may curate a single one (a new name,
// title, description, annotations, argument descriptions and defaults,
// fixed arguments).
//
// Its types are what the configuration decodes each `servers:` entry's
// tools, resources and prompts into, and what the configuration
// reference describes them from. It holds the checks that need nothing
// but the exposure and the sources it may name ([Exposure.Check]) or one
// tool's input schema ([ToolSelection.CheckSchema]), and the pure
// transforms the server applies: the input schema a caller sees
// ([Schema], [Tool]) and the arguments a call reaches the tool with
// ([Call.Arguments]). Matching an exposure against what the catalog holds
// is package catalog's (Catalog.RegisterView, Catalog.CheckExposure);
// serving it is package mcp's (Deps.Exposure).
package curation

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Sources that are not a built-in toolset or an upstream.
const (
	// SourceProgram is the source of what a Go program built on
	// Portcullis adds through the library (the root package's Tool,
	// Resource, Prompt and Toolset options, tools.AddTool).
	SourceProgram = "program"
	// SourceDeclared is the source of the resources and prompts the
	// configuration's tools section declares.
	SourceDeclared = "declared"
)

// Exposure is what one server exposes of the catalog. An empty list
// exposes nothing of its kind. A tool, resource or prompt matched by
// several selections is exposed once for each single-item selection (see
// [ToolSelection.Single]) naming it, else once as it is.
type Exposure struct {
	// Tools selects the tools the server exposes, and how each is shown.
	// Empty means none.
	Tools []ToolSelection `yaml:"tools"`
	// Resources selects the resources and resource templates the server
	// exposes. Empty means none.
	Resources []ResourceSelection `yaml:"resources"`
	// Prompts selects the prompts the server exposes. Empty means none.
	Prompts []PromptSelection `yaml:"prompts"`
}

// Defaults sets the name of each tool and prompt selection that has none
// to "*", every item of its source, which is what an empty name selects.
func (e *Exposure) Defaults() {
	for i := range e.Tools {
		if e.Tools[i].Name == "" {
			e.Tools[i].Name = "*"
		}
	}
	for i := range e.Prompts {
		if e.Prompts[i].Name == "" {
			e.Prompts[i].Name = "*"
		}
	}
}

// ToolSelection chooses tools of one source for a virtual server and,
// for a single tool, how the server shows it. Every key of the curation
// (all but Source and Name) is optional: zero keeps the tool's own.
type ToolSelection struct {
	// Source is where the tools come from: a built-in toolset enabled in
	// tools.toolsets (core, workshop, conformance), "program" for the tools
	// a Go program adds with the library, or the name of an upstream.
	Source string `yaml:"source" schema:"required"`
	// Name is the tool's name in its source, or a pattern ("*" any run of
	// characters, "?" one character, [a-z] one of a class, as path.Match):
	// an upstream's tool is named without its prefix ("search", not
	// "github_search"). Unset means "*", every tool of the source. The keys
	// below apply only when Name names one tool (holds no *, ?, [ or \).
	Name string `yaml:"name"`
	// ExposeAs is the name the server lists the tool under and callers
	// call it by. Unset means its name on /mcp (an upstream's tool with its
	// prefix). Letters, digits, '_', '-' and '.'; one tool per name in a
	// server.
	ExposeAs string `yaml:"expose_as"`
	// Title replaces the tool's title. Empty keeps it.
	Title string `yaml:"title"`
	// Description replaces the tool's description. Empty keeps it.
	Description string `yaml:"description"`
	// Annotations replace the tool's hints; a hint left unset keeps the
	// tool's own.
	Annotations Annotations `yaml:"annotations"`
	// Arguments change how arguments of the tool's input schema are
	// described, by argument name. Each must be an argument of the tool.
	Arguments map[string]Argument `yaml:"arguments"`
	// FixedArguments sets arguments on every call, by name, to a JSON value
	// the argument's schema accepts. A fixed argument is removed from the
	// input schema callers see (and from its required list), and a call
	// that names it (in any case) is refused with invalid params: never
	// merged.
	FixedArguments map[string]json.RawMessage `yaml:"fixed_arguments"`
}

// Annotations replace a tool's hints (MCP tool annotations); a hint left
// nil keeps the tool's own.
type Annotations struct {
	// ReadOnlyHint says the tool does not change its environment.
	ReadOnlyHint *bool `yaml:"read_only_hint"`
	// DestructiveHint says the tool may destroy or overwrite.
	DestructiveHint *bool `yaml:"destructive_hint"`
	// IdempotentHint says calling it again with the same arguments does
	// nothing more.
	IdempotentHint *bool `yaml:"idempotent_hint"`
	// OpenWorldHint says the tool reaches outside systems.
	OpenWorldHint *bool `yaml:"open_world_hint"`
}

// Set reports whether a sets any hint.
func (a *Annotations) Set() bool {
	return a.ReadOnlyHint != nil || a.DestructiveHint != nil || a.IdempotentHint != nil || a.OpenWorldHint != nil
}

// Argument changes how one argument of a tool's input schema is
// described.
type Argument struct {
	// Description replaces the argument's description. Empty keeps it.
	Description string `yaml:"description"`
	// Default is the argument's default, a JSON value the argument's
	// schema accepts: shown as its default in the input schema, and set
	// on every call that leaves the argument out (a call that names it in
	// another letter case is refused). Unset keeps the schema's, and sets
	// nothing.
	Default json.RawMessage `yaml:"default"`
}

// ResourceSelection chooses resources and resource templates of one
// source for a virtual server and, for a single one, how the server
// shows it. A resource keeps its URI.
type ResourceSelection struct {
	// Source is where the resources come from: a built-in toolset enabled
	// in tools.toolsets, "declared" for tools.resources, "program" for the
	// resources a Go program adds with the library, or the name of an
	// upstream.
	Source string `yaml:"source" schema:"required"`
	// URI is the resource's URI (a template's URI template), or a pattern
	// as in path.Match, where "*" does not match "/": docs://* matches
	// docs://a but not docs://a/b. Unset means every resource and template
	// of the source. The keys below apply only when URI names one (holds
	// no *, ?, [ or \).
	URI string `yaml:"uri"`
	// ExposeAs replaces the resource's name; its URI never changes.
	ExposeAs string `yaml:"expose_as"`
	// Title replaces the resource's title. Empty keeps it.
	Title string `yaml:"title"`
	// Description replaces the resource's description. Empty keeps it.
	Description string `yaml:"description"`
}

// PromptSelection chooses prompts of one source for a virtual server and,
// for a single prompt, how the server shows it.
type PromptSelection struct {
	// Source is where the prompts come from: a built-in toolset enabled in
	// tools.toolsets, "declared" for tools.prompts, "program" for the
	// prompts a Go program adds with the library, or the name of an
	// upstream.
	Source string `yaml:"source" schema:"required"`
	// Name is the prompt's name in its source (an upstream's without its
	// prefix), or a pattern as for tools. Unset means "*". The keys below
	// apply only when Name names one prompt.
	Name string `yaml:"name"`
	// ExposeAs is the name the server lists the prompt under and callers
	// get it by. Unset means its name on /mcp. One prompt per name in a
	// server.
	ExposeAs string `yaml:"expose_as"`
	// Title replaces the prompt's title. Empty keeps it.
	Title string `yaml:"title"`
	// Description replaces the prompt's description. Empty keeps it.
	Description string `yaml:"description"`
}

// Single reports whether s names one tool: a name without glob
// metacharacters.
func (s *ToolSelection) Single() bool { return single(s.Name) }

// Curated reports whether s changes anything of the tool it selects.
func (s *ToolSelection) Curated() bool {
	return s.ExposeAs != "" || s.Title != "" || s.Description != "" || s.Annotations.Set() ||
		len(s.Arguments) > 0 || len(s.FixedArguments) > 0
}

// curated returns the curation keys s sets, in the order of the keys.
func (s *ToolSelection) curated() []string {
	keys := curated(s.ExposeAs, s.Title, s.Description)
	for _, k := range []struct {
		key string
		set bool
	}{
		{"annotations", s.Annotations.Set()},
		{"arguments", len(s.Arguments) > 0},
		{"fixed_arguments", len(s.FixedArguments) > 0},
	} {
		if k.set {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// Single reports whether s names one resource or template.
func (s *ResourceSelection) Single() bool { return single(s.URI) }

// Curated reports whether s changes anything of what it selects.
func (s *ResourceSelection) Curated() bool {
	return s.ExposeAs != "" || s.Title != "" || s.Description != ""
}

// Single reports whether s names one prompt.
func (s *PromptSelection) Single() bool { return single(s.Name) }

// Curated reports whether s changes anything of what it selects.
func (s *PromptSelection) Curated() bool {
	return s.ExposeAs != "" || s.Title != "" || s.Description != ""
}

// curated returns the keys among expose_as, title and description that a
// selection sets.
func curated(exposeAs, title, description string) []string {
	var keys []string
	for _, k := range []struct{ key, v string }{{"expose_as", exposeAs}, {"title", title}, {"description", description}} {
		if k.v != "" {
			keys = append(keys, k.key)
		}
	}
	return keys
}

func single(pattern string) bool {
	return pattern != "" && !strings.ContainsAny(pattern, `*?[\`)
}

// Match reports whether name matches pattern, as a selection's Name or
// URI: an empty pattern matches every name; a malformed one none
// ([Exposure.Check] reports it).
func Match(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return ok && err == nil
}

// Problem is one problem of an exposure, at the key it concerns relative
// to the exposure, such as "tools[0].fixed_arguments.region".
type Problem struct {
	Key     string
	Message string
	// Warning marks a problem that does not stop the server: a selection
	// of an upstream's tool that the upstream has not listed (yet).
	Warning bool
}

// Error returns the key and the message.
func (p Problem) Error() string { return p.Key + ": " + p.Message }

// problemf returns the problem at key.
func problemf(key, format string, args ...any) Problem {
	return Problem{Key: key, Message: fmt.Sprintf(format, args...)}
}
