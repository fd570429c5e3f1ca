package portcullis

import (
	"regexp"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// keyed matches a validation error that starts with its key, e.g.
// "server.listen: …" or "tools.resources[1].uri: …".
var keyed = regexp.MustCompile(`^(server|mcp|tools|auth|log)(\.[a-z_]+|\[\d+\])+: `)

// FuzzConfig loads arbitrary YAML as the server's configuration and
// validates it. Invariants: no panic, no hang, and every problem names its
// key (or, for a document that is not a mapping or not YAML, the file).
func FuzzConfig(f *testing.F) {
	for _, seed := range []string{
		"server:\n  listen: 0.0.0.0:8080\n  lisen: x\n  read_header_timeout: ten\ntools:\n  toolsets: [core, nope]\nlog:\n  level: loud\n",
		"auth:\n  resource: https://mcp.example.com/mcp\n  issuers:\n    - issuer: https://idp.example.com\n      audiences: [api://x]\n  required_scopes: [mcp:tools]\n  policy:\n    - tool: echo\n      scopes: [mcp:admin]\n",
		"auth:\n  resource: http://x/other\n  issuers: [{issuer: ftp://x}, {issuer: ftp://x}]\n  introspection: {url: http://i, client_id: c}\n",
		"mcp:\n  allowed_origins: [https://a.example, 'null', http://x/y]\n  max_body_bytes: -1\n  request_state: {ttl: -1s, keys_file: /nonexistent}\n",
		// A keys file that never ends must be refused, not read forever.
		"mcp:\n  request_state:\n    keys_file: /dev/zero\n",
		"tools:\n  toolsets: [workshop]\n  weather: {base_url: 'not a url', timeout: 0s}\n  resources:\n    - {uri: 'x://{a}', text: hi, file: /etc/hostname}\n  prompts:\n    - {name: p, text: '{{a}}'}\n",
		"server: [1]\n", "[]", "null", ":", "server:\n  max_header_bytes: 99999999999999999999\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c configFile
		loadErr := config.Load(&c, data, nil, envPrefix)
		c.defaults()
		for _, p := range config.Problems(loadErr) {
			if p.Key == "" && p.Source == "" {
				t.Fatalf("a load problem that says nowhere: %v", p)
			}
		}
		for _, e := range unjoin(c.Validate()) {
			if !keyed.MatchString(e.Error()) {
				t.Fatalf("a validation problem that does not start with its key: %q", e)
			}
		}
	})
}
