package docscheck

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

const (
	libraryDocPath = root + "/docs/library.md"
	helloToolsPath = root + "/examples/hello-tools/main.go"
)

// quotedFile returns the first ```go block of a Markdown page after the
// line that links to file (by its path relative to the page).
func quotedFile(md, link string) (string, error) {
	i := strings.Index(md, "("+link+")")
	if i < 0 {
		return "", fmt.Errorf("no link to %s", link)
	}
	rest := md[i:]
	start := strings.Index(rest, "\n```go\n")
	if start < 0 {
		return "", fmt.Errorf("no ```go block after the link to %s", link)
	}
	body := rest[start+len("\n```go\n"):]
	end := strings.Index(body, "\n```\n")
	if end < 0 {
		return "", fmt.Errorf("the ```go block after the link to %s does not end", link)
	}
	return body[:end+1], nil
}

// TestLibraryDocQuotesTheExample checks that docs/library.md quotes
// examples/hello-tools/main.go exactly: the example is built and run by
// make example-test, so the page shows code that works.
func TestLibraryDocQuotesTheExample(t *testing.T) {
	md, err := os.ReadFile(libraryDocPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(helloToolsPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := quotedFile(string(md), "../examples/hello-tools/main.go")
	if err != nil {
		t.Fatalf("%s: %v", libraryDocPath, err)
	}
	if got != string(src) {
		t.Errorf("%s quotes %s, but the two differ: copy the file into the page", libraryDocPath, helloToolsPath)
	}
}

func TestQuotedFile(t *testing.T) {
	const link = "../x/main.go"
	tests := []struct {
		name    string
		md      string
		want    string
		wantErr bool
	}{
		{name: "quoted", md: "See [x](../x/main.go):\n\n```go\npackage main\n```\n", want: "package main\n"},
		{name: "first block after the link", md: "```go\nold\n```\n[x](../x/main.go)\n```go\nnew\n```\n", want: "new\n"},
		{name: "no link", md: "```go\npackage main\n```\n", wantErr: true},
		{name: "no block", md: "[x](../x/main.go)\n", wantErr: true},
		{name: "unterminated", md: "[x](../x/main.go)\n```go\npackage main\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := quotedFile(tt.md, link)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("quotedFile = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
