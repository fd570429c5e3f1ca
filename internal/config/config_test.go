package config

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

type serverConfig struct {
	Listen            string        `yaml:"listen"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`
	Debug             bool          `yaml:"debug"`
	AllowedOrigins    []string      `yaml:"allowed_origins"`
}

type authConfig struct {
	Issuer   string   `yaml:"issuer"`
	Audience []string `yaml:"audience"`
	Leeway   *time.Duration
}

type resource struct {
	URI  string `yaml:"uri"`
	Size int    `yaml:"size"`
}

type toolsConfig struct {
	Workers   int         `yaml:"workers"`
	Resources []resource  `yaml:"resources"`
	Extra     []*resource `yaml:"extra"`
}

type testConfig struct {
	Server  serverConfig `yaml:"server"`
	Auth    *authConfig  `yaml:"auth"`
	Tools   toolsConfig  `yaml:"tools"`
	Ratio   float64      `yaml:"ratio"`
	Name    *string      `yaml:"name"`
	Level   slog.Level   `yaml:"level"`
	Port    uint16       `yaml:"port"`
	Ignored string       `yaml:"-"`
	//lint:ignore U1000 an unexported field, which decoding must skip
	secret string
}

// defaults returns the config every test starts from.
func defaults() testConfig {
	return testConfig{
		Server: serverConfig{
			Listen:            ":8080",
			ReadHeaderTimeout: 5 * time.Second,
			MaxBodyBytes:      1 << 20,
			AllowedOrigins:    []string{"https://default.example"},
		},
		Tools: toolsConfig{Workers: 4},
		Ratio: 0.5,
		Port:  8080,
	}
}

func ptr[T any](v T) *T { return &v }

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		environ []string
		want    func(c *testConfig) // changes to defaults()
	}{
		{
			name: "nil data leaves defaults untouched",
			want: func(c *testConfig) {},
		},
		{
			name: "comments only leave defaults untouched",
			yaml: "# nothing here\n",
			want: func(c *testConfig) {},
		},
		{
			name: "empty sections leave defaults untouched",
			yaml: "server:\ntools:\n",
			want: func(c *testConfig) {},
		},
		{
			name: "every scalar type",
			yaml: `
server:
  listen: ":9090"
  read_header_timeout: 10s
  max_body_bytes: 0x100
  debug: true
ratio: 1.25
level: WARN
port: 443
`,
			want: func(c *testConfig) {
				c.Server.Listen = ":9090"
				c.Server.ReadHeaderTimeout = 10 * time.Second
				c.Server.MaxBodyBytes = 256
				c.Server.Debug = true
				c.Ratio = 1.25
				c.Level = slog.LevelWarn
				c.Port = 443
			},
		},
		{
			name: "a quoted number and a number for a string",
			yaml: "server:\n  listen: 8443\n  max_body_bytes: \"42\"\n",
			want: func(c *testConfig) {
				c.Server.Listen = "8443"
				c.Server.MaxBodyBytes = 42
			},
		},
		{
			name: "decimal integer with a leading zero is not octal",
			yaml: "tools:\n  workers: 010\n",
			want: func(c *testConfig) { c.Tools.Workers = 10 },
		},
		{
			name: "list replaces the default",
			yaml: "server:\n  allowed_origins: [https://a.example, https://b.example]\n",
			want: func(c *testConfig) { c.Server.AllowedOrigins = []string{"https://a.example", "https://b.example"} },
		},
		{
			name: "empty list clears the default",
			yaml: "server:\n  allowed_origins: []\n",
			want: func(c *testConfig) { c.Server.AllowedOrigins = []string{} },
		},
		{
			name: "slices of structs and of pointers to structs",
			yaml: `
tools:
  resources:
    - uri: file:///a
      size: 1
    - uri: file:///b
  extra:
    - uri: file:///c
`,
			want: func(c *testConfig) {
				c.Tools.Resources = []resource{{URI: "file:///a", Size: 1}, {URI: "file:///b"}}
				c.Tools.Extra = []*resource{{URI: "file:///c"}}
			},
		},
		{
			name: "pointer fields are allocated",
			yaml: "name: portcullis\nauth:\n  issuer: https://issuer.example\n  leeway: 30s\n",
			want: func(c *testConfig) {
				c.Name = ptr("portcullis")
				c.Auth = &authConfig{Issuer: "https://issuer.example", Leeway: ptr(30 * time.Second)}
			},
		},
		{
			name: "anchors and aliases",
			yaml: "server:\n  listen: &addr \":7070\"\nauth:\n  issuer: *addr\n",
			want: func(c *testConfig) {
				c.Server.Listen = ":7070"
				c.Auth = &authConfig{Issuer: ":7070"}
			},
		},
		{
			name:    "env overrides every kind of field",
			environ: []string{"PATH=/bin", "PORTCULLIS_SERVER_LISTEN=:9999", "PORTCULLIS_SERVER_MAX_BODY_BYTES=2048", "PORTCULLIS_SERVER_DEBUG=1", "PORTCULLIS_SERVER_READ_HEADER_TIMEOUT=1m30s", "PORTCULLIS_SERVER_ALLOWED_ORIGINS= https://a.example, ,https://b.example ,", "PORTCULLIS_AUTH_ISSUER=https://env.example", "PORTCULLIS_AUTH_LEEWAY=2s", "PORTCULLIS_NAME=env-name", "PORTCULLIS_RATIO=0.75", "PORTCULLIS_LEVEL=debug", "PORTCULLIS_TOOLS_WORKERS=8"},
			want: func(c *testConfig) {
				c.Server.Listen = ":9999"
				c.Server.MaxBodyBytes = 2048
				c.Server.Debug = true
				c.Server.ReadHeaderTimeout = 90 * time.Second
				c.Server.AllowedOrigins = []string{"https://a.example", "https://b.example"}
				c.Auth = &authConfig{Issuer: "https://env.example", Leeway: ptr(2 * time.Second)}
				c.Name = ptr("env-name")
				c.Ratio = 0.75
				c.Level = slog.LevelDebug
				c.Tools.Workers = 8
			},
		},
		{
			name:    "env bool accepts false in any case",
			yaml:    "server:\n  debug: true\n",
			environ: []string{"PORTCULLIS_SERVER_DEBUG=FALSE"},
			want:    func(c *testConfig) {},
		},
		{
			name:    "empty env value sets an empty string and an empty list",
			environ: []string{"PORTCULLIS_SERVER_LISTEN=", "PORTCULLIS_SERVER_ALLOWED_ORIGINS="},
			want: func(c *testConfig) {
				c.Server.Listen = ""
				c.Server.AllowedOrigins = []string{}
			},
		},
		{
			name:    "the last of a repeated variable wins",
			environ: []string{"PORTCULLIS_TOOLS_WORKERS=1", "PORTCULLIS_TOOLS_WORKERS=2"},
			want:    func(c *testConfig) { c.Tools.Workers = 2 },
		},
		{
			name:    "env wins over the file, the file over defaults",
			yaml:    "server:\n  listen: \":1111\"\n  debug: true\nauth:\n  issuer: file\n  audience: [a, b]\n",
			environ: []string{"PORTCULLIS_SERVER_LISTEN=:2222", "PORTCULLIS_AUTH_AUDIENCE=c"},
			want: func(c *testConfig) {
				c.Server.Listen = ":2222"
				c.Server.Debug = true
				c.Auth = &authConfig{Issuer: "file", Audience: []string{"c"}}
			},
		},
		{
			name:    "variables without the prefix are ignored",
			environ: []string{"SERVER_LISTEN=:1", "portcullis_server_listen=:2", "NOEQUALS"},
			want:    func(c *testConfig) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := defaults()
			var data []byte
			if tt.yaml != "" {
				data = []byte(tt.yaml)
			}
			if err := Load(&got, data, tt.environ, "PORTCULLIS_"); err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := defaults()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Load:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

type wantProblem struct {
	key, source, err string // err is a substring of Problem.Err
}

func TestLoadProblems(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		environ []string
		want    []wantProblem
	}{
		{
			name: "unknown top-level key with a suggestion",
			yaml: "servr:\n  listen: x\n",
			want: []wantProblem{{"servr", "file:1", "unknown key; did you mean server?"}},
		},
		{
			name: "unknown nested key",
			yaml: "server:\n  listen: x\n  listn: y\n",
			want: []wantProblem{{"server.listn", "file:3", "unknown key; did you mean server.listen?"}},
		},
		{
			name: "unknown key far from any other has no suggestion",
			yaml: "completely_different: 1\n",
			want: []wantProblem{{"completely_different", "file:1", "unknown key"}},
		},
		{
			name: "unknown key in a slice element",
			yaml: "tools:\n  resources:\n    - uri: a\n    - uri: b\n      sise: 3\n",
			want: []wantProblem{{"tools.resources[1].sise", "file:5", "did you mean tools.resources[1].size?"}},
		},
		{
			name: "string where an int is wanted",
			yaml: "tools:\n  workers: many\n",
			want: []wantProblem{{"tools.workers", "file:2", `invalid integer "many"`}},
		},
		{
			name: "integer out of range",
			yaml: "port: 70000\n",
			want: []wantProblem{{"port", "file:1", "integer 70000 is out of range for uint16"}},
		},
		{
			name: "negative for unsigned",
			yaml: "port: -1\n",
			want: []wantProblem{{"port", "file:1", `invalid non-negative integer "-1"`}},
		},
		{
			name: "bad bool",
			yaml: "server:\n  debug: yes\n",
			want: []wantProblem{{"server.debug", "file:2", `invalid boolean "yes"`}},
		},
		{
			name: "bad float",
			yaml: "ratio: half\n",
			want: []wantProblem{{"ratio", "file:1", `invalid number "half"`}},
		},
		{
			name: "bad duration",
			yaml: "server:\n  read_header_timeout: ten\n",
			want: []wantProblem{{"server.read_header_timeout", "file:2", `time: invalid duration "ten"`}},
		},
		{
			name: "duration without a unit",
			yaml: "server:\n  read_header_timeout: 10\n",
			want: []wantProblem{{"server.read_header_timeout", "file:2", `missing unit`}},
		},
		{
			name: "text unmarshaler error",
			yaml: "level: loud\n",
			want: []wantProblem{{"level", "file:1", "loud"}},
		},
		{
			name: "mapping where a scalar is wanted",
			yaml: "server:\n  listen:\n    host: x\n",
			want: []wantProblem{{"server.listen", "file:3", "expected a string, got a mapping"}},
		},
		{
			name: "scalar where a list is wanted",
			yaml: "server:\n  allowed_origins: https://a.example\n",
			want: []wantProblem{{"server.allowed_origins", "file:2", `expected a list of strings, got "https://a.example"`}},
		},
		{
			name: "wrong node kinds name what was wanted",
			yaml: "server:\n  read_header_timeout: [1s]\n  debug: {a: 1}\n  max_body_bytes: []\nratio: [1]\nlevel: [info]\n",
			want: []wantProblem{
				{"server.read_header_timeout", "file:2", `expected a duration such as "10s", got a list`},
				{"server.debug", "file:3", "expected a boolean, got a mapping"},
				{"server.max_body_bytes", "file:4", "expected an integer, got a list"},
				{"ratio", "file:5", "expected a number, got a list"},
				{"level", "file:6", "expected a slog.Level, got a list"},
			},
		},
		{
			name: "key that is not a string",
			yaml: "? [a]\n: 1\nport: 1\n",
			want: []wantProblem{{"", "file:1", "a key must be a string, not a list"}},
		},
		{
			name: "list where a section is wanted",
			yaml: "server:\n  - listen\n",
			want: []wantProblem{{"server", "file:2", "expected a mapping, got a list"}},
		},
		{
			name: "scalar where a list of mappings is wanted",
			yaml: "tools:\n  resources: x\n",
			want: []wantProblem{{"tools.resources", "file:2", "expected a list of mappings"}},
		},
		{
			name: "duplicate key",
			yaml: "server:\n  listen: a\n  debug: true\n  listen: b\n",
			want: []wantProblem{{"server.listen", "file:4", "duplicate key; first set on line 2"}},
		},
		{
			name: "merge keys are refused",
			yaml: "base: &b\n  listen: x\nserver:\n  <<: *b\n",
			want: []wantProblem{
				{"base", "file:1", "unknown key"},
				{"server", "file:4", "merge keys"},
			},
		},
		{
			name: "top level is not a mapping",
			yaml: "- a\n- b\n",
			want: []wantProblem{{"", "file:1", "must hold a mapping of keys, not a list"}},
		},
		{
			name: "syntax error",
			yaml: "server:\n  listen: [a,\n",
			want: []wantProblem{{"", "file:2", "invalid YAML: did not find expected node content"}},
		},
		{
			name: "two documents",
			yaml: "port: 1\n---\nport: 2\n",
			want: []wantProblem{{"", "file:2", "more than one YAML document"}},
		},
		{
			name: "several problems reported together, file then env",
			yaml: `
server:
  listen: ":1"
  read_header_timeout: ten
  debug: maybe
  debug: true
tools:
  workers: many
  resources:
    - uri: a
      bogus: 1
    - size: big
ratio: 2
unknown: 1
`,
			environ: []string{"PORTCULLIS_SERVER_LISTN=:2", "PORTCULLIS_TOOLS_WORKERS=x", "PORTCULLIS_RATIO=3"},
			want: []wantProblem{
				{"server.read_header_timeout", "file:4", "invalid duration"},
				{"server.debug", "file:5", "invalid boolean"},
				{"server.debug", "file:6", "duplicate key"},
				{"tools.workers", "file:8", "invalid integer"},
				{"tools.resources[0].bogus", "file:11", "unknown key"},
				{"tools.resources[1].size", "file:12", "invalid integer"},
				{"unknown", "file:14", "unknown key"},
				{"", "env PORTCULLIS_SERVER_LISTN", "did you mean PORTCULLIS_SERVER_LISTEN?"},
				{"tools.workers", "env PORTCULLIS_TOOLS_WORKERS", `invalid integer "x"`},
			},
		},
		{
			name:    "env unknown variable with a suggestion",
			environ: []string{"PORTCULLIS_SERVER_READ_HEADER_TIMOUT=1s"},
			want:    []wantProblem{{"", "env PORTCULLIS_SERVER_READ_HEADER_TIMOUT", "unknown environment variable; did you mean PORTCULLIS_SERVER_READ_HEADER_TIMEOUT?"}},
		},
		{
			name:    "env name in the wrong case is suggested",
			environ: []string{"PORTCULLIS_server_listen=x"},
			want:    []wantProblem{{"", "env PORTCULLIS_server_listen", "did you mean PORTCULLIS_SERVER_LISTEN?"}},
		},
		{
			name:    "env unknown variable without a suggestion",
			environ: []string{"PORTCULLIS_SOMETHING_ELSE_ENTIRELY=1"},
			want:    []wantProblem{{"", "env PORTCULLIS_SOMETHING_ELSE_ENTIRELY", "unknown environment variable"}},
		},
		{
			name:    "env bad values",
			environ: []string{"PORTCULLIS_SERVER_DEBUG=yes", "PORTCULLIS_SERVER_READ_HEADER_TIMEOUT=ten", "PORTCULLIS_PORT=", "PORTCULLIS_AUTH_LEEWAY=soon"},
			want: []wantProblem{
				{"auth.leeway", "env PORTCULLIS_AUTH_LEEWAY", `invalid duration "soon"`},
				{"port", "env PORTCULLIS_PORT", `invalid non-negative integer ""`},
				{"server.debug", "env PORTCULLIS_SERVER_DEBUG", `invalid boolean "yes"`},
				{"server.read_header_timeout", "env PORTCULLIS_SERVER_READ_HEADER_TIMEOUT", `invalid duration "ten"`},
			},
		},
		{
			name:    "env cannot set a list of mappings",
			environ: []string{"PORTCULLIS_TOOLS_RESOURCES=a"},
			want:    []wantProblem{{"tools.resources", "env PORTCULLIS_TOOLS_RESOURCES", "only in the config file"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaults()
			err := Load(&cfg, []byte(tt.yaml), tt.environ, "PORTCULLIS_")
			checkProblems(t, err, tt.want)
		})
	}
}

func checkProblems(t *testing.T, err error, want []wantProblem) {
	t.Helper()
	got := Problems(err)
	if (err == nil) != (len(want) == 0) {
		t.Fatalf("error = %v, want %d problems", err, len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(want), err)
	}
	for i, p := range got {
		w := want[i]
		if p.Key != w.key || p.Source != w.source || p.Err == nil || !strings.Contains(p.Err.Error(), w.err) {
			t.Errorf("problem %d = {Key: %q, Source: %q, Err: %v}, want {%q, %q, containing %q}", i, p.Key, p.Source, p.Err, w.key, w.source, w.err)
		}
	}
}

func TestLoadEnvListItems(t *testing.T) {
	type cfg struct {
		Ports []int `yaml:"ports"`
	}
	tests := []struct {
		name    string
		value   string
		want    []int
		wantErr string
	}{
		{name: "items", value: "1, 2,3", want: []int{1, 2, 3}},
		{name: "bad items are all named", value: "1,x,3,y", want: []int{9}, wantErr: `ports (env APP_PORTS): item 2: invalid integer "x"` + "\n" + `item 4: invalid integer "y"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg{Ports: []int{9}}
			err := Load(&c, nil, []string{"APP_PORTS=" + tt.value}, "APP_")
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("Load error = %v, want %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(c.Ports, tt.want) {
				t.Errorf("Ports = %v, want %v", c.Ports, tt.want)
			}
		})
	}
}

func TestLoadDoesNotChangeSharedDefaults(t *testing.T) {
	shared := &authConfig{Issuer: "default", Audience: []string{"x"}}
	tests := []struct {
		name    string
		yaml    string
		environ []string
	}{
		{name: "file", yaml: "auth:\n  issuer: file\n"},
		{name: "env", environ: []string{"P_AUTH_ISSUER=env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig{Auth: shared}
			if err := Load(&c, []byte(tt.yaml), tt.environ, "P_"); err != nil {
				t.Fatal(err)
			}
			if c.Auth == shared || c.Auth.Issuer != tt.name || !reflect.DeepEqual(c.Auth.Audience, []string{"x"}) {
				t.Errorf("Auth = %+v, want a copy of the default with issuer %q", c.Auth, tt.name)
			}
			if shared.Issuer != "default" {
				t.Errorf("shared default changed to %q", shared.Issuer)
			}
		})
	}
}

func TestLoadNullClearsPointer(t *testing.T) {
	c := testConfig{Name: ptr("x"), Auth: &authConfig{}, Ratio: 3}
	if err := Load(&c, []byte("name: null\nauth: ~\nratio:\n"), nil, ""); err != nil {
		t.Fatal(err)
	}
	if c.Name != nil || c.Auth != nil || c.Ratio != 3 {
		t.Errorf("got Name=%v Auth=%v Ratio=%v, want nil, nil, 3", c.Name, c.Auth, c.Ratio)
	}
}

func TestLoadEmptyPrefixSkipsEnv(t *testing.T) {
	c := defaults()
	if err := Load(&c, nil, []string{"SERVER_LISTEN=:1", "PATH=/bin"}, ""); err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != ":8080" {
		t.Errorf("Listen = %q, want the default", c.Server.Listen)
	}
}

func TestLoadAliasExpansionIsBounded(t *testing.T) {
	type item struct {
		V []string `yaml:"v"`
	}
	type wide struct {
		L []item `yaml:"l"`
	}
	// One anchored element of 1,000 values, aliased 200 times: 200,000
	// values from a small file.
	var b strings.Builder
	b.WriteString("l:\n  - &i {v: [x" + strings.Repeat(", x", 999) + "]}\n")
	b.WriteString(strings.Repeat("  - *i\n", 200))
	var c wide
	err := Load(&c, []byte(b.String()), nil, "")
	ps := Problems(err)
	if len(ps) != 1 || !strings.Contains(ps[0].Err.Error(), "too many values") {
		t.Fatalf("Load = %v, want one problem about too many values", err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "config.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("server:\n  listen: \":1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("server:\n  listen: \":1\"\n  read_header_timeout: ten\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	tests := []struct {
		name       string
		path       string
		environ    []string
		wantListen string
		want       []wantProblem
	}{
		{name: "no file", path: "", wantListen: ":8080"},
		{name: "file", path: good, wantListen: ":1"},
		{name: "file and env", path: good, environ: []string{"PORTCULLIS_SERVER_LISTEN=:2"}, wantListen: ":2"},
		{
			name: "problems name the file", path: bad, wantListen: ":1",
			want: []wantProblem{{"server.read_header_timeout", bad + ":3", "invalid duration"}},
		},
		{
			name: "missing file is a problem and env still applies", path: missing, wantListen: ":2",
			environ: []string{"PORTCULLIS_SERVER_LISTEN=:2", "PORTCULLIS_NOPE=1"},
			want: []wantProblem{
				{"", missing, "no such file"},
				{"", "env PORTCULLIS_NOPE", "unknown environment variable"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults()
			err := LoadFile(&c, tt.path, tt.environ, "PORTCULLIS_")
			checkProblems(t, err, tt.want)
			if c.Server.Listen != tt.wantListen {
				t.Errorf("Listen = %q, want %q", c.Server.Listen, tt.wantListen)
			}
		})
	}
	c := defaults()
	if err := LoadFile(&c, missing, nil, "PORTCULLIS_"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadFile(missing) = %v, want an error that is fs.ErrNotExist", err)
	}
}

func TestProblemError(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{name: "file line", p: Problem{Key: "server.read_header_timeout", Source: "config.yaml:4", Err: errors.New(`time: invalid duration "ten"`)}, want: `server.read_header_timeout (config.yaml line 4): time: invalid duration "ten"`},
		{name: "windows path", p: Problem{Key: "a", Source: `C:\etc\config.yaml:12`, Err: errors.New("bad")}, want: `a (C:\etc\config.yaml line 12): bad`},
		{name: "env", p: Problem{Key: "server.listen", Source: "env PORTCULLIS_SERVER_LISTEN", Err: errors.New("bad")}, want: "server.listen (env PORTCULLIS_SERVER_LISTEN): bad"},
		{name: "no key", p: Problem{Source: "env PORTCULLIS_X", Err: errors.New("unknown environment variable")}, want: "env PORTCULLIS_X: unknown environment variable"},
		{name: "no source", p: Problem{Key: "a.b", Err: errors.New("config: unsupported")}, want: "a.b: config: unsupported"},
		{name: "nothing but the error", p: Problem{Err: errors.New("oops")}, want: "oops"},
		{name: "nil error", p: Problem{Key: "a"}, want: "a: invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	p1 := &Problem{Key: "a", Err: errors.New("x")}
	p2 := &Problem{Key: "b", Err: errors.New("y")}
	tests := []struct {
		name string
		err  error
		want []*Problem
	}{
		{name: "nil", err: nil, want: nil},
		{name: "one", err: p1, want: []*Problem{p1}},
		{name: "joined", err: errors.Join(p1, p2), want: []*Problem{p1, p2}},
		{name: "wrapped join", err: errors.Join(errors.New("other"), wrap(errors.Join(p2, p1))), want: []*Problem{p2, p1}},
		{name: "not a problem", err: errors.New("other"), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Problems(tt.err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Problems = %v, want %v", got, tt.want)
			}
		})
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func wrap(err error) error { return wrapped{err} }
