package config

import (
	"strings"
	"testing"
)

// FuzzLoad decodes arbitrary YAML and one arbitrary environment variable
// into a struct with every kind of field. Invariants: no panic, and every
// problem says where it is: a key, or the file (with a line when known),
// or the variable.
func FuzzLoad(f *testing.F) {
	for _, seed := range []struct{ yaml, env string }{
		{"server:\n  listen: 127.0.0.1:9000\n  read_header_timeout: 5s\n  debug: true\n", ""},
		{"server:\n  lisen: x\n  read_header_timeout: ten\n", "PORTCULLIS_SERVER_LISTN=1"},
		{"tools:\n  resources:\n    - uri: a\n      size: -1\n    - {uri: b, size: x}\n  extra: [null, {uri: c}]\n", ""},
		{"auth:\n  issuer: https://idp\n  audience: [a, b]\n  leeway: 1m\n", "PORTCULLIS_AUTH_AUDIENCE=a,b"},
		{"ratio: .inf\nport: 70000\nlevel: loud\nname: ~\n", "PORTCULLIS_PORT=-1"},
		{"a: &x [*x]\n", ""},
		{"- just\n- a list\n", ""},
		{"---\na: 1\n---\nb: 2\n", ""},
		{"server: {listen: [1, 2]}\n", "PORTCULLIS_TOOLS_RESOURCES_0_URI=x"},
		{"\t:", "PORTCULLIS_=x"},
		{"a: !!binary AAAA\nb: !!timestamp 2001-12-14\n<<: {c: 1}\n", ""},
	} {
		f.Add([]byte(seed.yaml), seed.env)
	}
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		c := defaults()
		err := Load(&c, data, []string{env}, "PORTCULLIS_")
		problems := Problems(err)
		if err != nil && len(problems) == 0 {
			t.Fatalf("an error that is not a Problem: %v", err)
		}
		for _, p := range problems {
			switch {
			case p.Source == "":
				t.Fatalf("problem without a source: %v", p)
			case !strings.HasPrefix(p.Source, "file") && !strings.HasPrefix(p.Source, "env "):
				t.Fatalf("problem with source %q: %v", p.Source, p)
			case strings.HasPrefix(p.Source, "env ") && !strings.HasPrefix(p.Source, "env PORTCULLIS_"):
				t.Fatalf("a problem with a variable outside the prefix: %v", p)
			case p.Key != "" && !strings.HasPrefix(p.Error(), p.Key):
				t.Fatalf("problem %q does not start with its key %q", p.Error(), p.Key)
			case p.Err == nil:
				t.Fatalf("problem without an error: %#v", p)
			}
		}
	})
}
