package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestIsServiceLink(t *testing.T) {
	tests := []struct {
		name string
		env  string
		want bool
	}{
		// The six forms, for the Service "portcullis".
		{name: "service host", env: "PORTCULLIS_SERVICE_HOST", want: true},
		{name: "service port", env: "PORTCULLIS_SERVICE_PORT", want: true},
		{name: "named service port", env: "PORTCULLIS_SERVICE_PORT_HTTP", want: true},
		{name: "port", env: "PORTCULLIS_PORT", want: true},
		{name: "port number and protocol", env: "PORTCULLIS_PORT_8080_TCP", want: true},
		{name: "port proto", env: "PORTCULLIS_PORT_8080_TCP_PROTO", want: true},
		{name: "port port", env: "PORTCULLIS_PORT_8080_TCP_PORT", want: true},
		{name: "port addr", env: "PORTCULLIS_PORT_8080_TCP_ADDR", want: true},
		{name: "udp", env: "PORTCULLIS_PORT_53_UDP_ADDR", want: true},
		{name: "sctp", env: "PORTCULLIS_PORT_9_SCTP", want: true},
		{name: "highest port", env: "PORTCULLIS_PORT_65535_TCP", want: true},

		// Services of several words that start with the prefix.
		{name: "two words", env: "PORTCULLIS_GW_SERVICE_HOST", want: true},
		{name: "three words", env: "PORTCULLIS_MCP_GW_PORT_9090_TCP_PORT", want: true},
		{name: "words that are link words", env: "PORTCULLIS_SERVICE_PORT_SERVICE_PORT", want: true},
		{name: "port word in the service name", env: "PORTCULLIS_PORT_PORT", want: true},
		{name: "digits in the service name", env: "PORTCULLIS_2_SERVICE_HOST", want: true},
		{name: "double dash in the service name", env: "PORTCULLIS__X_PORT", want: true},
		{name: "named port of several words", env: "PORTCULLIS_GW_SERVICE_PORT_GRPC_WEB", want: true},
		{name: "named port with digits", env: "PORTCULLIS_SERVICE_PORT_H2C", want: true},
		{name: "longest service name", env: "PORTCULLIS_" + strings.Repeat("A", 52) + "_PORT", want: true},
		{name: "longest port name", env: "PORTCULLIS_SERVICE_PORT_" + strings.Repeat("A", 15), want: true},

		// Not a Service whose name starts with the prefix.
		{name: "service named after part of the prefix", env: "PORTCULLISX_SERVICE_HOST", want: false},
		{name: "other service", env: "REDIS_SERVICE_HOST", want: false},
		{name: "prefix alone", env: "PORTCULLIS_", want: false},
		{name: "service name too long", env: "PORTCULLIS_" + strings.Repeat("A", 53) + "_PORT", want: false},
		{name: "service name ending in a dash", env: "PORTCULLIS__PORT", want: false},

		// Kubernetes upper-cases every name: other cases are not links.
		{name: "lower-case suffix", env: "PORTCULLIS_service_host", want: false},
		{name: "lower-case service word", env: "PORTCULLIS_gw_SERVICE_HOST", want: false},
		{name: "lower-case protocol", env: "PORTCULLIS_PORT_80_tcp", want: false},
		{name: "lower-case port name", env: "PORTCULLIS_SERVICE_PORT_http", want: false},
		{name: "mixed-case suffix", env: "PORTCULLIS_Service_Host", want: false},

		// Near misses of the forms.
		{name: "unknown protocol", env: "PORTCULLIS_PORT_80_HTTP", want: false},
		{name: "unknown port field", env: "PORTCULLIS_PORT_80_TCP_HOST", want: false},
		{name: "trailing underscore", env: "PORTCULLIS_PORT_80_TCP_", want: false},
		{name: "port without protocol", env: "PORTCULLIS_PORT_80", want: false},
		{name: "port zero", env: "PORTCULLIS_PORT_0_TCP", want: false},
		{name: "port out of range", env: "PORTCULLIS_PORT_65536_TCP", want: false},
		{name: "port with a leading zero", env: "PORTCULLIS_PORT_080_TCP", want: false},
		{name: "port name of digits only", env: "PORTCULLIS_SERVICE_PORT_8080", want: false},
		{name: "port name too long", env: "PORTCULLIS_SERVICE_PORT_" + strings.Repeat("A", 16), want: false},
		{name: "port name with a double dash", env: "PORTCULLIS_SERVICE_PORT_A__B", want: false},
		{name: "service address", env: "PORTCULLIS_SERVICE_ADDR", want: false},
		{name: "host alone", env: "PORTCULLIS_HOST", want: false},
		{name: "suffix as a prefix", env: "PORTCULLIS_SERVICE_HOSTNAME", want: false},
		{name: "config key", env: "PORTCULLIS_SERVER_LISTEN", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isServiceLink("PORTCULLIS_", tt.env); got != tt.want {
				t.Errorf("isServiceLink(%q) = %v, want %v", tt.env, got, tt.want)
			}
		})
	}
}

func TestIsServiceLinkOtherPrefixes(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		env    string
		want   bool
	}{
		{name: "service named the prefix", prefix: "APP", env: "APP_SERVICE_HOST", want: true},
		{name: "service name that extends the prefix", prefix: "APP", env: "APPS_SERVICE_HOST", want: true},
		{name: "service name shorter than the prefix", prefix: "AP_P", env: "AP_PORT", want: false},
		{name: "empty prefix", prefix: "", env: "REDIS_SERVICE_HOST", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isServiceLink(tt.prefix, tt.env); got != tt.want {
				t.Errorf("isServiceLink(%q, %q) = %v, want %v", tt.prefix, tt.env, got, tt.want)
			}
		})
	}
}

// kubeletEnv is what the kubelet injects for the Services "portcullis"
// (ports http 8080 and metrics 9090) and "portcullis-mcp-gw" (port
// grpc-web 80), and for "kubernetes", which every namespace sees.
var kubeletEnv = []string{
	"PORTCULLIS_SERVICE_HOST=10.96.0.10",
	"PORTCULLIS_SERVICE_PORT=8080",
	"PORTCULLIS_SERVICE_PORT_HTTP=8080",
	"PORTCULLIS_SERVICE_PORT_METRICS=9090",
	"PORTCULLIS_PORT=tcp://10.96.0.10:8080",
	"PORTCULLIS_PORT_8080_TCP=tcp://10.96.0.10:8080",
	"PORTCULLIS_PORT_8080_TCP_PROTO=tcp",
	"PORTCULLIS_PORT_8080_TCP_PORT=8080",
	"PORTCULLIS_PORT_8080_TCP_ADDR=10.96.0.10",
	"PORTCULLIS_PORT_9090_TCP=tcp://10.96.0.10:9090",
	"PORTCULLIS_PORT_9090_TCP_PROTO=tcp",
	"PORTCULLIS_PORT_9090_TCP_PORT=9090",
	"PORTCULLIS_PORT_9090_TCP_ADDR=10.96.0.10",
	"PORTCULLIS_MCP_GW_SERVICE_HOST=10.96.0.11",
	"PORTCULLIS_MCP_GW_SERVICE_PORT=80",
	"PORTCULLIS_MCP_GW_SERVICE_PORT_GRPC_WEB=80",
	"PORTCULLIS_MCP_GW_PORT=tcp://10.96.0.11:80",
	"PORTCULLIS_MCP_GW_PORT_80_TCP=tcp://10.96.0.11:80",
	"PORTCULLIS_MCP_GW_PORT_80_TCP_PROTO=tcp",
	"PORTCULLIS_MCP_GW_PORT_80_TCP_PORT=80",
	"PORTCULLIS_MCP_GW_PORT_80_TCP_ADDR=10.96.0.11",
	"KUBERNETES_SERVICE_HOST=10.96.0.1",
	"KUBERNETES_SERVICE_PORT=443",
	"KUBERNETES_SERVICE_PORT_HTTPS=443",
	"KUBERNETES_PORT=tcp://10.96.0.1:443",
	"KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
	"KUBERNETES_PORT_443_TCP_PROTO=tcp",
	"KUBERNETES_PORT_443_TCP_PORT=443",
	"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
}

func TestLoadIgnoresServiceLinks(t *testing.T) {
	// testConfig without its key "port", whose variable the kubelet sets
	// for the Service "portcullis".
	type config struct {
		Server serverConfig `yaml:"server"`
		Tools  toolsConfig  `yaml:"tools"`
	}
	cfg := config{Server: defaults().Server}
	environ := append([]string{"PORTCULLIS_SERVER_LISTEN=:1"}, kubeletEnv...)
	if err := Load(&cfg, nil, environ, "PORTCULLIS_"); err != nil {
		t.Fatalf("Load with the kubelet's variables: %v", err)
	}
	want := config{Server: defaults().Server}
	want.Server.Listen = ":1"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config = %+v, want %+v", cfg, want)
	}
	var wantIgnored []string
	for _, kv := range kubeletEnv {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PORTCULLIS_") {
			wantIgnored = append(wantIgnored, name)
		}
	}
	slices.Sort(wantIgnored)
	if got := IgnoredEnv(&cfg, environ, "PORTCULLIS_"); !slices.Equal(got, wantIgnored) {
		t.Errorf("IgnoredEnv = %q\nwant %q", got, wantIgnored)
	}
}

// linkedConfig has keys whose variables look like service links.
type linkedConfig struct {
	Port     string `yaml:"port"` // PORTCULLIS_PORT
	Upstream struct {
		Port        int    `yaml:"port"`         // PORTCULLIS_UPSTREAM_PORT
		ServiceHost string `yaml:"service_host"` // PORTCULLIS_UPSTREAM_SERVICE_HOST
	} `yaml:"upstream"`
	Server struct {
		Listen string `yaml:"listen"`
	} `yaml:"server"`
	Hosts []struct {
		Name string `yaml:"name"`
	} `yaml:"service_port"` // PORTCULLIS_SERVICE_PORT, file only
}

func TestLoadKeysWinOverServiceLinks(t *testing.T) {
	tests := []struct {
		name        string
		environ     []string
		want        func(*linkedConfig)
		wantIgnored []string
		wantProblem []wantProblem
	}{
		{
			name:    "a key wins over a service link",
			environ: []string{"PORTCULLIS_PORT=tcp://10.96.0.10:8080", "PORTCULLIS_UPSTREAM_PORT=9000", "PORTCULLIS_UPSTREAM_SERVICE_HOST=up.example"},
			want: func(c *linkedConfig) {
				c.Port = "tcp://10.96.0.10:8080"
				c.Upstream.Port = 9000
				c.Upstream.ServiceHost = "up.example"
			},
		},
		{
			name:        "a key's value is checked even when the kubelet could have set it",
			environ:     []string{"PORTCULLIS_UPSTREAM_PORT=tcp://10.96.0.12:80"},
			wantProblem: []wantProblem{{"upstream.port", "env PORTCULLIS_UPSTREAM_PORT", `invalid integer "tcp://10.96.0.12:80"`}},
		},
		{
			name:        "a link next to a key and a typo",
			environ:     []string{"PORTCULLIS_SERVER_LISTEN=:1", "PORTCULLIS_GW_SERVICE_HOST=10.96.0.13", "PORTCULLIS_SERVER_LISTN=:2"},
			want:        func(c *linkedConfig) { c.Server.Listen = ":1" },
			wantIgnored: []string{"PORTCULLIS_GW_SERVICE_HOST"},
			wantProblem: []wantProblem{{"", "env PORTCULLIS_SERVER_LISTN", "did you mean PORTCULLIS_SERVER_LISTEN?"}},
		},
		{
			name:        "a list of mappings named like a link is still file-only",
			environ:     []string{"PORTCULLIS_SERVICE_PORT=8080"},
			wantProblem: []wantProblem{{"service_port", "env PORTCULLIS_SERVICE_PORT", "only in the config file"}},
		},
		{
			name:        "a typo shaped like a link is ignored, and reported",
			environ:     []string{"PORTCULLIS_UPSTREM_PORT=9000"},
			wantIgnored: []string{"PORTCULLIS_UPSTREM_PORT"},
		},
		{
			name: "typos that are no link still fail",
			environ: []string{
				"PORTCULLIS_SERVICE_HOSTS=x",
				"PORTCULLIS_UPSTREAM_PROT=1",
				"PORTCULLIS_UPSTREAM_SERVICE_HST=x",
				"PORTCULLIS_service_host=x",
				"PORTCULLIS_PORT_80_HTTP=x",
			},
			wantProblem: []wantProblem{
				{"", "env PORTCULLIS_PORT_80_HTTP", "unknown environment variable"},
				{"", "env PORTCULLIS_SERVICE_HOSTS", "unknown environment variable"},
				{"", "env PORTCULLIS_UPSTREAM_PROT", "did you mean PORTCULLIS_UPSTREAM_PORT?"},
				{"", "env PORTCULLIS_UPSTREAM_SERVICE_HST", "did you mean PORTCULLIS_UPSTREAM_SERVICE_HOST?"},
				{"", "env PORTCULLIS_service_host", "unknown environment variable"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got linkedConfig
			err := Load(&got, nil, tt.environ, "PORTCULLIS_")
			checkProblems(t, err, tt.wantProblem)
			var want linkedConfig
			if tt.want != nil {
				tt.want(&want)
			}
			if got.Port != want.Port || got.Upstream != want.Upstream || got.Server != want.Server {
				t.Errorf("config = %+v, want %+v", got, want)
			}
			if ignored := IgnoredEnv(&got, tt.environ, "PORTCULLIS_"); !slices.Equal(ignored, tt.wantIgnored) {
				t.Errorf("IgnoredEnv = %q, want %q", ignored, tt.wantIgnored)
			}
		})
	}
}

func TestIgnoredEnvNeedsAStructAndAPrefix(t *testing.T) {
	environ := []string{"PORTCULLIS_SERVICE_HOST=10.96.0.10"}
	if got := IgnoredEnv(linkedConfig{}, environ, "PORTCULLIS_"); !slices.Equal(got, []string{"PORTCULLIS_SERVICE_HOST"}) {
		t.Errorf("IgnoredEnv(struct) = %q, want the link", got)
	}
	for _, tt := range []struct {
		name   string
		dst    any
		prefix string
	}{
		{name: "nil", dst: nil, prefix: "PORTCULLIS_"},
		{name: "not a struct", dst: new(int), prefix: "PORTCULLIS_"},
		{name: "empty prefix", dst: &linkedConfig{}, prefix: ""},
	} {
		if got := IgnoredEnv(tt.dst, environ, tt.prefix); got != nil {
			t.Errorf("%s: IgnoredEnv = %q, want nil", tt.name, got)
		}
	}
}
