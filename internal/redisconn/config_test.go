package redisconn

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// section is how the root package composes the options: the redis: section.
type section struct {
	Redis Options `yaml:"redis"`
}

// The section loads with the project's config loader, from a file and
// from PORTCULLIS_REDIS_* variables, under the documented key names.
func TestConfigSection(t *testing.T) {
	var cfg section
	cfg.Redis.Defaults()
	file := []byte(`
redis:
  url: rediss://redis.internal:6380/1
  username: portcullis
  tls:
    ca_file: /etc/portcullis/redis-ca.pem
    server_name: redis.internal
  key_prefix: "{prod}:"
  dial_timeout: 3s
  pool_size: 20
  wait:
    replicas: 0
    timeout: 200ms
`)
	env := []string{"PORTCULLIS_REDIS_PASSWORD=from-the-env", "PORTCULLIS_REDIS_READ_TIMEOUT=500ms"}
	if err := config.Load(&cfg, file, env, "PORTCULLIS_"); err != nil {
		t.Fatal(err)
	}
	none := 0
	want := Options{
		URL: "rediss://redis.internal:6380/1", Username: "portcullis", Password: "from-the-env",
		TLS:       TLSOptions{CAFile: "/etc/portcullis/redis-ca.pem", ServerName: "redis.internal"},
		KeyPrefix: "{prod}:", DialTimeout: 3 * time.Second, ReadTimeout: 500 * time.Millisecond,
		WriteTimeout: DefaultWriteTimeout, PoolSize: 20,
		Wait: WaitOptions{Replicas: &none, Timeout: 200 * time.Millisecond},
	}
	if !reflect.DeepEqual(cfg.Redis, want) {
		t.Fatalf("loaded %+v, want %+v", cfg.Redis, want)
	}
	if err := cfg.Redis.Validate(); err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, k := range config.Keys(&cfg, "PORTCULLIS_") {
		names = append(names, k.Path)
	}
	wantNames := "redis.url redis.sentinel.master_name redis.sentinel.addresses redis.sentinel.username redis.sentinel.password redis.sentinel.database " +
		"redis.cluster.addresses redis.username redis.password redis.tls.enabled redis.tls.ca_file redis.tls.server_name redis.tls.insecure_skip_verify " +
		"redis.key_prefix redis.dial_timeout redis.read_timeout redis.write_timeout redis.pool_size redis.wait.replicas redis.wait.timeout"
	if got := strings.Join(names, " "); got != wantNames {
		t.Fatalf("keys\n%s\nwant\n%s", got, wantNames)
	}

	schema, err := config.JSONSchema(&cfg, nil)
	if err != nil {
		t.Fatalf("JSONSchema: %v", err)
	}
	if b, _ := json.Marshal(schema); !strings.Contains(string(b), `"insecure_skip_verify"`) {
		t.Fatalf("schema lacks the tls keys: %s", b)
	}
}
