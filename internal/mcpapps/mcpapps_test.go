package mcpapps

import (
	"encoding/json"
	"reflect"
	"testing"
)

func meta(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToolMeta(t *testing.T) {
	tests := []struct {
		name     string
		meta     string
		hasUI    bool
		uri      string
		appOnly  bool
		servedAs string // ResourceURI of ServedMeta("p", meta)
	}{
		{name: "none", meta: `{}`},
		{name: "other keys", meta: `{"x":1}`},
		{name: "nested", meta: `{"ui":{"resourceUri":"ui://a/b.html"}}`, hasUI: true, uri: "ui://a/b.html", servedAs: "ui://p/a/b.html"},
		{name: "legacy", meta: `{"ui/resourceUri":"ui://a/b.html"}`, hasUI: true, uri: "ui://a/b.html", servedAs: "ui://p/a/b.html"},
		{name: "nested wins", meta: `{"ui":{"resourceUri":"ui://n"},"ui/resourceUri":"ui://l"}`, hasUI: true, uri: "ui://n", servedAs: "ui://p/n"},
		{name: "app only", meta: `{"ui":{"visibility":["app"]}}`, hasUI: true, appOnly: true},
		{name: "app and model", meta: `{"ui":{"visibility":["model","app"]}}`, hasUI: true},
		{name: "model only", meta: `{"ui":{"visibility":["model"]}}`, hasUI: true},
		{name: "not ui scheme", meta: `{"ui":{"resourceUri":"https://x"}}`, hasUI: true, uri: "https://x", servedAs: "https://x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := meta(t, tt.meta)
			if got := HasUI(m); got != tt.hasUI {
				t.Errorf("HasUI = %v, want %v", got, tt.hasUI)
			}
			if got := ResourceURI(m); got != tt.uri {
				t.Errorf("ResourceURI = %q, want %q", got, tt.uri)
			}
			if got := AppOnly(m); got != tt.appOnly {
				t.Errorf("AppOnly = %v, want %v", got, tt.appOnly)
			}
			before := meta(t, tt.meta)
			if got := ResourceURI(ServedMeta("p", m)); got != tt.servedAs {
				t.Errorf("ServedMeta's resource = %q, want %q", got, tt.servedAs)
			}
			if !reflect.DeepEqual(m, before) {
				t.Errorf("ServedMeta changed its argument: %v", m)
			}
		})
	}
}

func TestServedMetaBothKeys(t *testing.T) {
	m := meta(t, `{"ui":{"resourceUri":"ui://a/x.html","csp":{"connectDomains":["https://api"]},"prefersBorder":true},"ui/resourceUri":"ui://a/x.html","other":1}`)
	got := ServedMeta("clock", m)
	want := meta(t, `{"ui":{"resourceUri":"ui://clock/a/x.html","csp":{"connectDomains":["https://api"]},"prefersBorder":true},"ui/resourceUri":"ui://clock/a/x.html","other":1}`)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ServedMeta = %v, want %v", got, want)
	}
	if ServedMeta("", m)["ui/resourceUri"] != "ui://a/x.html" {
		t.Error("an empty prefix changed the URI")
	}
}

func TestServedAndUpstream(t *testing.T) {
	tests := []struct {
		name, prefix, uri, served string
	}{
		{name: "ui", prefix: "basic", uri: "ui://get-time/mcp-app.html", served: "ui://basic/get-time/mcp-app.html"},
		{name: "ui with the prefix already", prefix: "basic", uri: "ui://basic/x", served: "ui://basic/basic/x"},
		{name: "no prefix", prefix: "", uri: "ui://get-time/mcp-app.html", served: "ui://get-time/mcp-app.html"},
		{name: "other scheme", prefix: "basic", uri: "file:///a.txt", served: "file:///a.txt"},
		{name: "template", prefix: "p", uri: "ui://app/{id}", served: "ui://p/app/{id}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Served(tt.prefix, tt.uri); got != tt.served {
				t.Fatalf("Served = %q, want %q", got, tt.served)
			}
			back, ok := Upstream(tt.prefix, tt.served)
			if !ok || back != tt.uri {
				t.Fatalf("Upstream(%q) = %q, %v; want %q", tt.served, back, ok, tt.uri)
			}
		})
	}
	if _, ok := Upstream("basic", "ui://other/get-time/mcp-app.html"); ok {
		t.Error("a ui:// URI under another prefix maps back")
	}
	if _, ok := Upstream("basic", "ui://basicx/y"); ok {
		t.Error("a ui:// URI under a longer prefix maps back")
	}
}
