// Package curation describes what one MCP server of a Portcullis exposes
// of the catalog, and how: a [View] selects tools, resources and prompts
// by source and name, and may curate a single one (a new name, title,
// description, annotations, argument descriptions and defaults, fixed
// arguments).
//
// It holds the types the configuration decodes (the `servers:` entries'
// tools, resources and prompts), the checks that need nothing but the
// view ([View.Check]) or one tool's input schema ([CheckTool]), and the
// pure transforms the server applies: the input schema a caller sees
// ([Schema], [Tool]) and the arguments a call reaches the tool with
// ([Call.Arguments]). Matching a view against what the catalog holds is
// package catalog's (Catalog.RegisterView, Catalog.ValidateView); serving
// it is package mcp's (Deps.View).
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

// View is what one server exposes. An empty list exposes nothing of its
// kind. A tool, resource or prompt matched by several selections is
// exposed once for each single-item selection (see [ToolSelection.Single])
// naming it, else once as it is.
type View struct {
	Tools     []ToolSelection     `yaml:"tools"`
	Resources []ResourceSelection `yaml:"resources"`
	Prompts   []PromptSelection   `yaml:"prompts"`
}

// ToolSelection selects tools of one source by name and, when it names a
// single tool, curates it.
type ToolSelection struct {
	// Source is a built-in toolset's name (core, workshop, conformance),
	// [SourceProgram], or an upstream's name.
	Source string `yaml:"source"`
	// Name is a pattern (path.Match syntax) over the tool's name in its
	// source: an upstream's tool without the upstream's prefix. Empty
	// means every tool of the source.
	Name string `yaml:"name"`

	// The curation, allowed only when Name names one tool (no glob
	// metacharacter). Every field is optional; zero keeps the tool's own.

	// ExposeAs is the name callers see and call the tool by. Empty keeps
	// the name the root server lists it under (an upstream's tool with
	// its prefix).
	ExposeAs    string `yaml:"expose_as"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	// Annotations replaces the hints it sets, and only those.
	Annotations *Annotations `yaml:"annotations"`
	// Arguments describes arguments of the input schema, or gives them a
	// default: a call that leaves the argument out gets the default, and
	// one that names it in another letter case is refused.
	Arguments map[string]Argument `yaml:"arguments"`
	// FixedArguments are set on every call, and removed from the input
	// schema callers see (from its properties and required). A call that
	// names one itself, in any letter case, is refused.
	FixedArguments map[string]any `yaml:"fixed_arguments"`
}

// Annotations are tool hints; nil leaves the tool's own.
type Annotations struct {
	ReadOnlyHint    *bool `yaml:"read_only_hint"`
	DestructiveHint *bool `yaml:"destructive_hint"`
	IdempotentHint  *bool `yaml:"idempotent_hint"`
	OpenWorldHint   *bool `yaml:"open_world_hint"`
}

// Argument curates one argument of a tool's input schema.
type Argument struct {
	// Description replaces the argument's description; empty keeps it.
	Description string `yaml:"description"`
	// Default is shown as the argument's default and set on calls that
	// leave the argument out; nil means none.
	Default any `yaml:"default"`
}

// ResourceSelection selects resources and resource templates of one
// source by URI (or URI template) and, for a single one, renames or
// describes it. A resource keeps its URI.
type ResourceSelection struct {
	Source string `yaml:"source"`
	// URI is a pattern (path.Match syntax: "*" does not cross "/") over
	// the URI or URI template. Empty means every resource of the source.
	URI         string `yaml:"uri"`
	ExposeAs    string `yaml:"expose_as"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
}

// PromptSelection selects prompts of one source by name and, for a
// single one, renames or describes it.
type PromptSelection struct {
	Source string `yaml:"source"`
	// Name is a pattern (path.Match syntax) over the prompt's name in its
	// source, without an upstream's prefix. Empty means every prompt.
	Name        string `yaml:"name"`
	ExposeAs    string `yaml:"expose_as"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
}

// Single reports whether s names one tool: a name without glob
// metacharacters.
func (s *ToolSelection) Single() bool { return single(s.Name) }

// Curated reports whether s changes anything of the tool it selects.
func (s *ToolSelection) Curated() bool {
	return s.ExposeAs != "" || s.Title != "" || s.Description != "" || s.Annotations != nil ||
		len(s.Arguments) > 0 || len(s.FixedArguments) > 0
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

func single(pattern string) bool {
	return pattern != "" && !strings.ContainsAny(pattern, `*?[\`)
}

// Match reports whether name matches pattern, as a selection's Name or
// URI: an empty pattern matches every name; a malformed one none
// ([View.Check] reports it).
func Match(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return ok && err == nil
}

// Problem is one problem of a view, at the key it concerns relative to
// the view, such as "tools[0].fixed_arguments.region".
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

// jsonValue encodes v, a value decoded from YAML or JSON, as JSON.
func jsonValue(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("curation: not a JSON value: %w", err)
	}
	return b, nil
}
