package portcullis

import (
	"slices"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/upstream"
)

func TestConnectionsNeeded(t *testing.T) {
	acct := func(name string) upstream.Options {
		return upstream.Options{Name: name, Transport: upstream.TransportHTTP, OAuth: upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode}}
	}
	cfg := &configFile{
		Upstreams: []upstream.Options{acct("github"), acct("jira"), {Name: "static", Transport: upstream.TransportHTTP}},
		Servers: []virtualServer{
			{Name: "dev", Resource: "https://p.example/dev/mcp", Exposure: curation.Exposure{Tools: []curation.ToolSelection{{Source: "github"}, {Source: "static"}}}},
			{Name: "pm", Resource: "https://p.example/pm/mcp", Exposure: curation.Exposure{Prompts: []curation.PromptSelection{{Source: "jira"}}}},
			{Name: "core", Resource: "https://p.example/core/mcp", Exposure: curation.Exposure{Tools: []curation.ToolSelection{{Source: "core"}}}},
		},
	}
	cfg.Auth.Resource = "https://p.example/mcp"
	for resource, want := range map[string][]string{
		"https://p.example/mcp":      {"github", "jira"},
		"https://p.example/dev/mcp":  {"github"},
		"https://p.example/pm/mcp":   {"jira"},
		"https://p.example/core/mcp": nil,
		"https://p.example/unknown":  nil,
	} {
		if got := connectionsNeeded(cfg, resource); !slices.Equal(got, want) {
			t.Errorf("connectionsNeeded(%s) = %v, want %v", resource, got, want)
		}
	}
}
