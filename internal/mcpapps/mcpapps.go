// Package mcpapps knows the MCP Apps extension (io.modelcontextprotocol/ui)
// as far as a gateway needs to: which tools and resources belong to an
// App, what a tool's _meta says about it, and how an upstream's ui://
// URIs are served under its prefix.
//
// A tool names the App that shows its result in _meta.ui.resourceUri (or
// the older _meta["ui/resourceUri"]), a ui:// resource of MIME type
// text/html;profile=mcp-app; _meta.ui.visibility says who may call it
// ("model", "app", or both, the default). The App, shown by the host,
// calls its server's tools by the names its server gave them.
package mcpapps

import (
	"strings"
)

// ExtensionID is the extension's identifier in the extensions of client
// and server capabilities.
const ExtensionID = "io.modelcontextprotocol/ui"

// MIMEType is the MIME type of an App's HTML resource.
const MIMEType = "text/html;profile=mcp-app"

// Scheme starts every App resource's URI.
const Scheme = "ui://"

// legacyURIKey is the older, flat _meta key of a tool's App resource.
const legacyURIKey = "ui/resourceUri"

// Capability returns the settings of the extension a client declares
// when it renders Apps: the MIME types it shows.
func Capability() map[string]any {
	return map[string]any{"mimeTypes": []any{MIMEType}}
}

// IsURI reports whether uri is an App resource's URI (ui://).
func IsURI(uri string) bool { return strings.HasPrefix(uri, Scheme) }

// HasUI reports whether a tool's _meta says anything of Apps: a ui
// object, or the older ui/resourceUri key.
func HasUI(meta map[string]any) bool {
	if meta == nil {
		return false
	}
	if _, ok := meta["ui"]; ok {
		return true
	}
	_, ok := meta[legacyURIKey]
	return ok
}

// ResourceURI returns the App resource a tool's _meta names:
// _meta.ui.resourceUri, else _meta["ui/resourceUri"]; "" for none.
func ResourceURI(meta map[string]any) string {
	if ui, ok := meta["ui"].(map[string]any); ok {
		if u, ok := ui["resourceUri"].(string); ok && u != "" {
			return u
		}
	}
	u, _ := meta[legacyURIKey].(string)
	return u
}

// AppOnly reports whether a tool's _meta makes it callable by Apps only:
// _meta.ui.visibility lists "app" and not "model". Hosts keep such a
// tool from the model; it stays listed so that they can.
func AppOnly(meta map[string]any) bool {
	ui, ok := meta["ui"].(map[string]any)
	if !ok {
		return false
	}
	vis, ok := ui["visibility"].([]any)
	if !ok {
		return false
	}
	app, model := false, false
	for _, v := range vis {
		switch v {
		case "app":
			app = true
		case "model":
			model = true
		}
	}
	return app && !model
}

// Served returns the URI under which an upstream whose prefix is prefix
// serves its resource uri: a ui:// URI with the prefix as its first
// segment (ui://get-time/app.html of prefix "clock" is
// ui://clock/get-time/app.html), so that the Apps of two upstreams never
// share a URI; any other URI, or any URI of an upstream without a prefix,
// as it is.
func Served(prefix, uri string) string {
	if prefix == "" || !IsURI(uri) {
		return uri
	}
	return Scheme + prefix + "/" + uri[len(Scheme):]
}

// Upstream returns the URI the upstream whose prefix is prefix has for
// served, which [Served] made: served itself when it is not a ui:// URI
// or the prefix is empty. ok is false for a ui:// URI under another
// prefix, which the upstream does not serve.
func Upstream(prefix, served string) (uri string, ok bool) {
	if prefix == "" || !IsURI(served) {
		return served, true
	}
	rest, ok := strings.CutPrefix(served[len(Scheme):], prefix+"/")
	if !ok {
		return served, false
	}
	return Scheme + rest, true
}

// ServedMeta returns a tool's _meta with the App resource it names
// served under prefix (see [Served]), in both keys; meta itself when it
// names none or nothing changes. meta is not changed.
func ServedMeta(prefix string, meta map[string]any) map[string]any {
	if prefix == "" || !HasUI(meta) {
		return meta
	}
	out := make(map[string]any, len(meta))
	for k, v := range meta {
		out[k] = v
	}
	changed := false
	if ui, ok := meta["ui"].(map[string]any); ok {
		if u, ok := ui["resourceUri"].(string); ok && IsURI(u) {
			cui := make(map[string]any, len(ui))
			for k, v := range ui {
				cui[k] = v
			}
			cui["resourceUri"] = Served(prefix, u)
			out["ui"] = cui
			changed = true
		}
	}
	if u, ok := meta[legacyURIKey].(string); ok && IsURI(u) {
		out[legacyURIKey] = Served(prefix, u)
		changed = true
	}
	if !changed {
		return meta
	}
	return out
}
