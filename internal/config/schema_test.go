package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	want := []Key{
		{"server.listen", "PORTCULLIS_SERVER_LISTEN"},
		{"server.read_header_timeout", "PORTCULLIS_SERVER_READ_HEADER_TIMEOUT"},
		{"server.max_body_bytes", "PORTCULLIS_SERVER_MAX_BODY_BYTES"},
		{"server.debug", "PORTCULLIS_SERVER_DEBUG"},
		{"server.allowed_origins", "PORTCULLIS_SERVER_ALLOWED_ORIGINS"},
		{"auth.issuer", "PORTCULLIS_AUTH_ISSUER"},
		{"auth.audience", "PORTCULLIS_AUTH_AUDIENCE"},
		{"auth.leeway", "PORTCULLIS_AUTH_LEEWAY"},
		{"tools.workers", "PORTCULLIS_TOOLS_WORKERS"},
		{"tools.resources", ""},
		{"tools.extra", ""},
		{"ratio", "PORTCULLIS_RATIO"},
		{"name", "PORTCULLIS_NAME"},
		{"level", "PORTCULLIS_LEVEL"},
		{"port", "PORTCULLIS_PORT"},
	}
	tests := []struct {
		name string
		dst  any
		want []Key
	}{
		{name: "pointer", dst: &testConfig{}, want: want},
		{name: "value", dst: testConfig{}, want: want},
		{name: "nil", dst: nil, want: nil},
		{name: "not a struct", dst: new(int), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Keys(tt.dst, "PORTCULLIS_"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Keys =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

type Embedded struct {
	Shared string `yaml:"shared"`
}

func TestInlineAndUntagged(t *testing.T) {
	type cfg struct {
		Embedded `yaml:",inline"`
		Plain    string
		Dashed   string `yaml:"dashed-name"`
		Named    string `yaml:",omitempty"`
	}
	wantKeys := []Key{{"shared", "X_SHARED"}, {"plain", "X_PLAIN"}, {"dashed-name", "X_DASHED_NAME"}, {"named", "X_NAMED"}}
	if got := Keys(cfg{}, "X_"); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("Keys = %v, want %v", got, wantKeys)
	}
	var c cfg
	err := Load(&c, []byte("shared: a\nplain: b\ndashed-name: c\n"), []string{"X_NAMED=d", "X_SHARED=e"}, "X_")
	if err != nil {
		t.Fatal(err)
	}
	want := cfg{Embedded: Embedded{Shared: "e"}, Plain: "b", Dashed: "c", Named: "d"}
	if c != want {
		t.Errorf("got %+v, want %+v", c, want)
	}
}

func TestLoadRejectsBadTypes(t *testing.T) {
	type collide struct {
		A struct {
			BC string `yaml:"b_c"`
		} `yaml:"a"`
		AB struct {
			C string `yaml:"c"`
		} `yaml:"a_b"`
	}
	type unsupported struct {
		M  map[int]string       `yaml:"m"`
		MS map[string][]string  `yaml:"ms"`
		L  []struct{ F func() } `yaml:"l"`
		LL [][]string           `yaml:"ll"`
	}
	type dup struct {
		A string `yaml:"a"`
		B string `yaml:"a"`
	}
	type badInline struct {
		S string `yaml:",inline"`
	}
	type self struct {
		Next *self `yaml:"next"`
	}
	type tree struct {
		Name     string `yaml:"name"`
		Children []tree `yaml:"children"`
	}
	tests := []struct {
		name string
		dst  any
		want []wantProblem
	}{
		{name: "nil", dst: nil, want: []wantProblem{{"", "", "non-nil pointer to a struct, got <nil>"}}},
		{name: "not a pointer", dst: collide{}, want: []wantProblem{{"", "", "got config.collide"}}},
		{name: "nil pointer", dst: (*collide)(nil), want: []wantProblem{{"", "", "got *config.collide"}}},
		{name: "pointer to non-struct", dst: new(string), want: []wantProblem{{"", "", "got *string"}}},
		{name: "two keys map to one env name", dst: &collide{}, want: []wantProblem{{"a_b.c", "", "keys a.b_c and a_b.c both map to environment variable P_A_B_C"}}},
		{name: "unsupported field types", dst: &unsupported{}, want: []wantProblem{
			{"m", "", "unsupported field type map[int]string: a mapping's keys must be strings"},
			{"ms", "", "a mapping's values must be scalars, structs or JSON values"},
			{"l[].f", "", "unsupported field type func()"},
			{"ll", "", "list elements must be scalars or structs"},
		}},
		{name: "duplicate tag", dst: &dup{}, want: []wantProblem{{"a", "", `key "a" is defined twice`}}},
		{name: "inline non-struct", dst: &badInline{}, want: []wantProblem{{"S", "", "must be a struct"}}},
		{name: "recursive type", dst: &self{}, want: []wantProblem{{"next", "", "contains itself"}}},
		{name: "recursion through a slice is fine", dst: &tree{}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The file would set a.b_c; nothing is decoded when the type is wrong.
			err := Load(tt.dst, []byte("a:\n  b_c: x\n"), []string{"P_A_B_C=y"}, "P_")
			if tt.want == nil {
				if err == nil || strings.Contains(err.Error(), "config:") {
					t.Fatalf("Load = %v, want only decoding problems", err)
				}
				return
			}
			checkProblems(t, err, tt.want)
			if c, ok := tt.dst.(*collide); ok && c != nil && c.A.BC != "" {
				t.Errorf("a.b_c = %q, want nothing decoded", c.A.BC)
			}
		})
	}
}

func TestTreeDecodes(t *testing.T) {
	type tree struct {
		Name     string `yaml:"name"`
		Children []tree `yaml:"children"`
	}
	var c tree
	if err := Load(&c, []byte("name: a\nchildren:\n  - name: b\n    children:\n      - name: c\n"), nil, ""); err != nil {
		t.Fatal(err)
	}
	want := tree{Name: "a", Children: []tree{{Name: "b", Children: []tree{{Name: "c"}}}}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v, want %+v", c, want)
	}
}

func TestSuggest(t *testing.T) {
	candidates := []string{"PORTCULLIS_SERVER_LISTEN", "PORTCULLIS_SERVER_DEBUG", "PORTCULLIS_AUTH_ISSUER"}
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "one letter missing", in: "PORTCULLIS_SERVER_LISTN", want: "PORTCULLIS_SERVER_LISTEN"},
		{name: "wrong case", in: "PORTCULLIS_auth_issuer", want: "PORTCULLIS_AUTH_ISSUER"},
		{name: "transposed", in: "PORTCULLIS_SERVER_DEUBG", want: "PORTCULLIS_SERVER_DEBUG"},
		{name: "too far", in: "PORTCULLIS_TRACING_ENDPOINT", want: ""},
		{name: "short key", in: "lstn", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := suggest(tt.in, candidates); got != tt.want {
				t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFieldKey(t *testing.T) {
	type fields struct {
		Tagged    string `yaml:"tagged_name"`
		Untagged  string
		EmptyName string `yaml:",omitempty"`
		Skipped   string `yaml:"-"`
		Dash      string `yaml:"-,omitempty"`
		Embedded  `yaml:",inline"`
		//lint:ignore U1000 an unexported field, which has no key
		private string
	}
	want := map[string]string{
		"Tagged":    "tagged_name",
		"Untagged":  "untagged",
		"EmptyName": "emptyname",
		"Skipped":   "",
		"Dash":      "-",
		"Embedded":  "",
		"private":   "",
	}
	typ := reflect.TypeFor[fields]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if got := FieldKey(f); got != want[f.Name] {
			t.Errorf("FieldKey(%s) = %q, want %q", f.Name, got, want[f.Name])
		}
	}
}
