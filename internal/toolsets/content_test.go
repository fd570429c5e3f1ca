package toolsets

import (
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestDeclaredResources(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "oncall.md")
	bin := filepath.Join(dir, "logo.bin")
	if err := os.WriteFile(md, []byte("# On call\nAsk Ana."), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte{0xff, 0xfe, 0x00}, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := Options{Resources: []ResourceSpec{
		{URI: "docs://inline", Name: "inline", Text: "inline text"},
		{URI: "docs://oncall", Name: "oncall", File: md},
		{URI: "docs://logo", Name: "logo", File: bin},
		{URITemplate: "greeting://{lang}/{name}", Name: "greeting", Text: "Hello {{name}} ({{ lang }})",
			Completions: []CompletionSpec{{Variable: "lang", Values: []string{"en", "fr", "de", "es"}}}},
	}}
	cs, _ := connect(t, newCatalog(t, opts, Deps{}), nil)

	tests := []struct {
		name     string
		uri      string
		wantText string
		wantBlob []byte
		wantMIME string
		wantErr  bool
	}{
		{name: "inline", uri: "docs://inline", wantText: "inline text", wantMIME: "text/plain"},
		{name: "file, type from extension", uri: "docs://oncall", wantText: "# On call\nAsk Ana.", wantMIME: mime.TypeByExtension(".md")},
		{name: "binary file", uri: "docs://logo", wantBlob: []byte{0xff, 0xfe, 0x00}, wantMIME: "application/octet-stream"},
		{name: "template", uri: "greeting://fr/Ana%20Maria", wantText: "Hello Ana Maria (fr)", wantMIME: "text/plain"},
		{name: "unknown", uri: "docs://nope", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: tt.uri})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ReadResource(%s) succeeded, want an error", tt.uri)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := res.Contents[0]
			if c.Text != tt.wantText || string(c.Blob) != string(tt.wantBlob) {
				t.Errorf("contents = %q / %v, want %q / %v", c.Text, c.Blob, tt.wantText, tt.wantBlob)
			}
			if c.MIMEType != tt.wantMIME {
				t.Errorf("mime type = %q, want %q", c.MIMEType, tt.wantMIME)
			}
		})
	}

	got, err := cs.Complete(t.Context(), &sdk.CompleteParams{
		Ref:      &sdk.CompleteReference{Type: "ref/resource", URI: "greeting://{lang}/{name}"},
		Argument: sdk.CompleteParamsArgument{Name: "lang", Value: "E"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"en", "es"}; !slices.Equal(got.Completion.Values, want) {
		t.Errorf("completion values = %v, want %v", got.Completion.Values, want)
	}
}

func TestDeclaredPrompts(t *testing.T) {
	opts := Options{Prompts: []PromptSpec{{
		Name:        "summarize",
		Description: "Summarize text.",
		Arguments: []PromptArgumentSpec{
			{Name: "text", Required: true},
			{Name: "audience", Completions: []string{"engineers", "executives", "everyone"}},
		},
		Text: "Summarize for {{audience}}:\n{{text}}",
	}}}
	cs, _ := connect(t, newCatalog(t, opts, Deps{}), nil)

	tests := []struct {
		name    string
		args    map[string]string
		want    string
		wantErr string
	}{
		{name: "all arguments", args: map[string]string{"text": "abc", "audience": "engineers"}, want: "Summarize for engineers:\nabc"},
		{name: "optional argument absent", args: map[string]string{"text": "abc"}, want: "Summarize for :\nabc"},
		{name: "placeholder syntax in a value is not expanded", args: map[string]string{"text": "{{audience}}", "audience": "x"}, want: "Summarize for x:\n{{audience}}"},
		{name: "required argument missing", args: map[string]string{"audience": "x"}, wantErr: `needs the argument "text"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "summarize", Arguments: tt.args})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("GetPrompt error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) != 1 || res.Messages[0].Role != "user" {
				t.Fatalf("messages = %+v, want one user message", res.Messages)
			}
			if got := res.Messages[0].Content.(*sdk.TextContent).Text; got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
		})
	}

	completions := []struct {
		name string
		ref  *sdk.CompleteReference
		arg  sdk.CompleteParamsArgument
		want []string
	}{
		{name: "prefix", ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "summarize"}, arg: sdk.CompleteParamsArgument{Name: "audience", Value: "ex"}, want: []string{"executives"}},
		{name: "empty prefix", ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "summarize"}, arg: sdk.CompleteParamsArgument{Name: "audience"}, want: []string{"engineers", "executives", "everyone"}},
		{name: "argument without completions", ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "summarize"}, arg: sdk.CompleteParamsArgument{Name: "text", Value: "a"}, want: []string{}},
		{name: "unknown prompt", ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "nope"}, arg: sdk.CompleteParamsArgument{Name: "x"}, want: []string{}},
	}
	for _, tt := range completions {
		t.Run("complete "+tt.name, func(t *testing.T) {
			res, err := cs.Complete(t.Context(), &sdk.CompleteParams{Ref: tt.ref, Argument: tt.arg})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Completion.Values, tt.want) {
				t.Errorf("values = %v, want %v", res.Completion.Values, tt.want)
			}
		})
	}
}
