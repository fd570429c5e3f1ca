package redisconn

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	var o Options
	o.Defaults()
	want := Options{KeyPrefix: "portcullis:", DialTimeout: 2 * time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("Defaults() = %+v, want %+v", o, want)
	}
	set := Options{KeyPrefix: "x:", DialTimeout: time.Minute, ReadTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second, PoolSize: 7}
	o = set
	o.Defaults()
	if !reflect.DeepEqual(o, set) {
		t.Fatalf("Defaults() changed set values: %+v, want %+v", o, set)
	}
}

func ptr[T any](v T) *T { return &v }

// TestWait: what each write a client is told of waits for, by default
// per deployment and as set.
func TestWait(t *testing.T) {
	sentinel := SentinelOptions{MasterName: "m", Addresses: []string{"s"}}
	cluster := ClusterOptions{Addresses: []string{"n"}}
	for _, tt := range []struct {
		name     string
		o        Options
		replicas int
		timeout  time.Duration
	}{
		{name: "no redis", o: Options{}, timeout: DefaultWaitTimeout},
		{name: "one server: none", o: Options{URL: "redis://h"}, timeout: DefaultWaitTimeout},
		{name: "one server with replicas, as set", o: Options{URL: "redis://h", Wait: WaitOptions{Replicas: ptr(2), Timeout: time.Second}}, replicas: 2, timeout: time.Second},
		{name: "sentinel: one", o: Options{Sentinel: sentinel}, replicas: 1, timeout: DefaultWaitTimeout},
		{name: "sentinel, set to none", o: Options{Sentinel: sentinel, Wait: WaitOptions{Replicas: ptr(0)}}, timeout: DefaultWaitTimeout},
		{name: "sentinel, two", o: Options{Sentinel: sentinel, Wait: WaitOptions{Replicas: ptr(2)}}, replicas: 2, timeout: DefaultWaitTimeout},
		{name: "cluster: none", o: Options{Cluster: cluster}, timeout: DefaultWaitTimeout},
		{name: "cluster with replicas, as set", o: Options{Cluster: cluster, Wait: WaitOptions{Replicas: ptr(1), Timeout: 100 * time.Millisecond}}, replicas: 1, timeout: 100 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.WaitReplicas(); got != tt.replicas {
				t.Errorf("WaitReplicas() = %d, want %d", got, tt.replicas)
			}
			if got := tt.o.WaitTimeout(); got != tt.timeout {
				t.Errorf("WaitTimeout() = %v, want %v", got, tt.timeout)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	const secret = "s3cr3t-pa55"
	tests := []struct {
		name string
		o    Options
		want []string // substrings, one per expected problem; none means valid
	}{
		{name: "empty url: redis not used", o: Options{}},
		{name: "plain url", o: Options{URL: "redis://redis.internal:6379/2"}},
		{name: "tls url with tls keys", o: Options{URL: "rediss://redis.internal", TLS: TLSOptions{CAFile: "ca.pem", ServerName: "r"}}},
		{name: "user in url", o: Options{URL: "redis://app@redis.internal"}},
		{name: "same user twice", o: Options{URL: "redis://app@redis.internal", Username: "app"}},
		{name: "ipv6 host", o: Options{URL: "redis://[::1]:6380"}},
		{
			name: "password in url",
			o:    Options{URL: "redis://app:" + secret + "@redis.internal:6379"},
			want: []string{"url: must not carry a password; set redis.password (or the environment variable PORTCULLIS_REDIS_PASSWORD)"},
		},
		{
			name: "empty password in url",
			o:    Options{URL: "redis://:@redis.internal"},
			want: []string{"url: must not carry a password"},
		},
		{name: "http scheme", o: Options{URL: "http://redis.internal"}, want: []string{"url: must be a redis:// or rediss:// URL"}},
		{name: "no scheme", o: Options{URL: "redis.internal:6379"}, want: []string{"url: must be a redis:// or rediss:// URL"}},
		{name: "unparsable url with a password", o: Options{URL: "redis://u:" + secret + "@host:port%zz"}, want: []string{"url: not a valid URL"}},
		{name: "no host", o: Options{URL: "redis:///0"}, want: []string{"url: has no host"}},
		{name: "bad port", o: Options{URL: "redis://h:70000"}, want: []string{"url: port \"70000\""}},
		{name: "bad db", o: Options{URL: "redis://h/abc"}, want: []string{"url: path \"/abc\" is not a database number"}},
		{name: "query", o: Options{URL: "redis://h/0?dial_timeout=1s"}, want: []string{"url: must not have query parameters"}},
		{name: "tls keys without tls", o: Options{URL: "redis://h", TLS: TLSOptions{InsecureSkipVerify: true}}, want: []string{"tls: set, but url is redis://"}},
		{name: "two users", o: Options{URL: "redis://a@h", Username: "b"}, want: []string{"username: differs"}},
		{name: "sentinel", o: Options{Sentinel: SentinelOptions{MasterName: "m", Addresses: []string{"s1:26379", "s2", "[::1]:26380"}, Password: secret, Database: 2}}},
		{name: "sentinel over tls", o: Options{Sentinel: SentinelOptions{MasterName: "m", Addresses: []string{"s1"}}, TLS: TLSOptions{Enabled: true, CAFile: "ca.pem"}}},
		{name: "cluster", o: Options{Cluster: ClusterOptions{Addresses: []string{"n1:7000", "n2:7001", "n3"}}}},
		{
			name: "url, sentinel and cluster at once",
			o:    Options{URL: "redis://h", Sentinel: SentinelOptions{MasterName: "m", Addresses: []string{"s"}}, Cluster: ClusterOptions{Addresses: []string{"n"}}},
			want: []string{"url, sentinel.master_name, cluster.addresses: set together"},
		},
		{name: "sentinel without addresses", o: Options{Sentinel: SentinelOptions{MasterName: "m"}}, want: []string{"sentinel.addresses: empty"}},
		{name: "sentinel keys without a master", o: Options{Sentinel: SentinelOptions{Addresses: []string{"s"}}}, want: []string{"sentinel.master_name: empty"}},
		{name: "negative database", o: Options{Sentinel: SentinelOptions{MasterName: "m", Addresses: []string{"s"}, Database: -1}}, want: []string{"sentinel.database: must not be negative"}},
		{
			name: "bad addresses, each named",
			o:    Options{Cluster: ClusterOptions{Addresses: []string{"redis://n1:7000", "n2:port", "n3:7002", "n3:7002", "", "::1", "u:" + secret + "@n4"}}},
			want: []string{"cluster.addresses[0]: \"redis://n1:7000\" is not host:port", "cluster.addresses[1]: \"n2:port\": port", "cluster.addresses[3]: n3:7002 is listed twice", "cluster.addresses[4]: empty", "cluster.addresses[5]: \"::1\" is not host:port", "cluster.addresses[6]: names a user or password"},
		},
		{name: "tls keys without tls.enabled", o: Options{Cluster: ClusterOptions{Addresses: []string{"n"}}, TLS: TLSOptions{CAFile: "ca.pem"}}, want: []string{"tls: set, but tls.enabled is off"}},
		{name: "tls.enabled with a redis:// url", o: Options{URL: "redis://h", TLS: TLSOptions{Enabled: true}}, want: []string{"tls: set, but url is redis://"}},
		{name: "tls.enabled with a rediss:// url", o: Options{URL: "rediss://h", TLS: TLSOptions{Enabled: true}}},
		{
			name: "every number wrong at once",
			o:    Options{DialTimeout: -1, ReadTimeout: -1, WriteTimeout: -1, PoolSize: -1, KeyPrefix: "a b", Wait: WaitOptions{Replicas: ptr(-1), Timeout: -1}},
			want: []string{"dial_timeout: must not be negative", "read_timeout: must not be negative", "write_timeout: must not be negative", "pool_size: must not be negative", "key_prefix: must not contain spaces", "wait.replicas: must not be negative", "wait.timeout: must not be negative"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Password = secret
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("Validate() reported %d problems, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Validate() error carries the password: %q", err)
			}
		})
	}
}

func TestClientOptions(t *testing.T) {
	ro, err := clientOptions(Options{URL: "redis://app@redis.internal/3", Password: "pw", PoolSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Addr != "redis.internal:6379" || ro.DB != 3 || ro.Username != "app" || ro.Password != "pw" || ro.PoolSize != 5 ||
		ro.DialTimeout != DefaultDialTimeout || ro.ReadTimeout != DefaultReadTimeout || ro.WriteTimeout != DefaultWriteTimeout || ro.TLSConfig != nil ||
		ro.DialerRetries != 1 || ro.MaxRetries != 1 {
		t.Fatalf("clientOptions = %+v", ro)
	}

	ro, err = clientOptions(Options{URL: "rediss://redis.internal:6380", Username: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Addr != "redis.internal:6380" || ro.Username != "svc" || ro.TLSConfig == nil ||
		ro.TLSConfig.ServerName != "redis.internal" || ro.TLSConfig.InsecureSkipVerify || ro.TLSConfig.RootCAs != nil {
		t.Fatalf("rediss clientOptions = %+v, tls %+v", ro, ro.TLSConfig)
	}

	// A CA file and a server name override.
	srv := httptest.NewTLSServer(nil)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err = clientOptions(Options{URL: "rediss://10.0.0.1", TLS: TLSOptions{CAFile: ca, ServerName: "redis.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	if ro.TLSConfig.ServerName != "redis.internal" || ro.TLSConfig.RootCAs == nil {
		t.Fatalf("tls config = %+v", ro.TLSConfig)
	}

	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{name: "not configured", o: Options{}, want: "no Redis is configured"},
		{name: "invalid", o: Options{URL: "http://h"}, want: "redisconn: url: must be a redis:// or rediss:// URL"},
		{name: "missing ca file", o: Options{URL: "rediss://h", TLS: TLSOptions{CAFile: filepath.Join(t.TempDir(), "none.pem")}}, want: "redisconn: tls.ca_file:"},
		{name: "ca file without pem", o: Options{URL: "rediss://h", TLS: TLSOptions{CAFile: "redisconn.go"}}, want: "holds no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := clientOptions(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("clientOptions() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestOpenUnreachable(t *testing.T) {
	// A port nothing listens on: take one, then free it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	const secret = "hunter2-but-longer"
	start := time.Now()
	client, err := Open(context.Background(), Options{URL: "redis://" + addr, Password: secret, DialTimeout: 500 * time.Millisecond})
	if err == nil {
		client.Close()
		t.Fatal("Open succeeded with nothing listening")
	}
	if !strings.Contains(err.Error(), "cannot reach Redis at "+addr) {
		t.Errorf("Open() = %q, want it to name %s", err, addr)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("Open() error carries the password: %q", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Open took %v with a 500ms dial timeout", d)
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	const secret = "pa55word"
	_, err := Open(context.Background(), Options{URL: "redis://u:" + secret + "@h"})
	if err == nil || !strings.Contains(err.Error(), "must not carry a password") || strings.Contains(err.Error(), secret) {
		t.Fatalf("Open() = %v, want the URL-with-password refusal without the password", err)
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	const secret = "do-not-print-me"
	o := Options{URL: "redis://h", Password: secret, Sentinel: SentinelOptions{Password: secret + "-sentinel"}}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("redis", "options", o)
	for name, out := range map[string]string{
		"%v":   fmt.Sprintf("%v", o),
		"%+v":  fmt.Sprintf("%+v", o),
		"%s":   fmt.Sprintf("%s", o), //lint:ignore S1025 the %s verb is what is tested
		"&%v":  fmt.Sprintf("%v", &o),
		"slog": buf.String(),
		"nested": fmt.Sprintf("%+v", struct {
			Redis Options
		}{o}),
	} {
		if strings.Contains(out, secret) {
			t.Errorf("%s prints the password: %s", name, out)
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%s does not show that a password is set: %s", name, out)
		}
	}
}

func TestWarnings(t *testing.T) {
	if w := (&Options{URL: "rediss://h"}).Warnings(); len(w) != 0 {
		t.Fatalf("Warnings() = %q, want none", w)
	}
	w := (&Options{URL: "rediss://h", TLS: TLSOptions{InsecureSkipVerify: true}}).Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "insecure_skip_verify") {
		t.Fatalf("Warnings() = %q", w)
	}
}

func TestParseURLErrorsNeverQuoteTheURL(t *testing.T) {
	// url.Parse's own error quotes the whole URL; parseURL must not.
	_, err := parseURL("redis://user:topsecret@host:port%zz")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("parseURL() = %v", err)
	}
}

func TestModeAndGroupPrefix(t *testing.T) {
	tests := []struct {
		name      string
		o         Options
		mode      string
		tasksKeys string // GroupPrefix("tasks")
	}{
		{name: "none", o: Options{KeyPrefix: "p:"}, mode: ModeNone, tasksKeys: "p:"},
		{name: "one server keeps its keys", o: Options{URL: "redis://h", KeyPrefix: "p:"}, mode: ModeSingle, tasksKeys: "p:"},
		{name: "sentinel keeps its keys", o: Options{Sentinel: SentinelOptions{MasterName: "m"}, KeyPrefix: "p:"}, mode: ModeSentinel, tasksKeys: "p:"},
		{name: "cluster gives the group a slot", o: Options{Cluster: ClusterOptions{Addresses: []string{"n"}}, KeyPrefix: "p:"}, mode: ModeCluster, tasksKeys: "p:{tasks}:"},
		{name: "cluster, prefix with a hash tag", o: Options{Cluster: ClusterOptions{Addresses: []string{"n"}}, KeyPrefix: "{p}:"}, mode: ModeCluster, tasksKeys: "{p}:"},
		{name: "cluster, empty braces are no tag", o: Options{Cluster: ClusterOptions{Addresses: []string{"n"}}, KeyPrefix: "{}p:"}, mode: ModeCluster, tasksKeys: "{}p:{tasks}:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.Mode(); got != tt.mode {
				t.Errorf("Mode() = %q, want %q", got, tt.mode)
			}
			if got := tt.o.GroupPrefix("tasks"); got != tt.tasksKeys {
				t.Errorf("GroupPrefix(tasks) = %q, want %q", got, tt.tasksKeys)
			}
		})
	}
}

// New builds the client each deployment needs, with its options mapped.
func TestNewClients(t *testing.T) {
	sentinel := Options{
		Sentinel: SentinelOptions{MasterName: "mymaster", Addresses: []string{"s1", "s2:26380"}, Username: "su", Password: "sp", Database: 3},
		Username: "u", Password: "p", ReadTimeout: 3 * time.Second, PoolSize: 4,
	}
	fo, err := failoverOptions(sentinel)
	if err != nil {
		t.Fatal(err)
	}
	if fo.MasterName != "mymaster" || !reflect.DeepEqual(fo.SentinelAddrs, []string{"s1:26379", "s2:26380"}) ||
		fo.SentinelUsername != "su" || fo.SentinelPassword != "sp" || fo.DB != 3 || fo.Username != "u" || fo.Password != "p" ||
		fo.ReadTimeout != 3*time.Second || fo.DialTimeout != DefaultDialTimeout || fo.PoolSize != 4 ||
		fo.MaxRetries != haMaxRetries || fo.MinRetryBackoff != haMinBackoff || fo.TLSConfig != nil || !fo.DisableIdentity {
		t.Errorf("failoverOptions = %+v", fo)
	}

	cluster := Options{Cluster: ClusterOptions{Addresses: []string{"n1", "n2:7001"}}, TLS: TLSOptions{Enabled: true, ServerName: "redis.internal"}}
	co, err := clusterOptions(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(co.Addrs, []string{"n1:6379", "n2:7001"}) || co.MaxRetries != haMaxRetries ||
		co.TLSConfig == nil || co.TLSConfig.ServerName != "redis.internal" || !co.DisableIdentity {
		t.Errorf("clusterOptions = %+v", co)
	}

	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{name: "one server", o: Options{URL: "redis://h"}, want: "*redis.Client"},
		{name: "sentinel", o: sentinel, want: "*redis.Client"},
		{name: "cluster", o: cluster, want: "*redis.ClusterClient"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := fmt.Sprintf("%T", c); got != tt.want {
				t.Errorf("New() is a %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "no Redis is configured") {
		t.Errorf("New(empty) = %v", err)
	}
}

// An unreachable Sentinel or Cluster is named by its addresses, never by a
// password.
func TestPingNamesTheDeployment(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const secret = "sentinel-secret-value"
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{name: "sentinel", o: Options{Sentinel: SentinelOptions{MasterName: "m", Addresses: []string{addr}, Password: secret}, Password: secret, DialTimeout: 300 * time.Millisecond}, want: `the primary "m" of the sentinels ` + addr},
		{name: "cluster", o: Options{Cluster: ClusterOptions{Addresses: []string{addr}}, Password: secret, DialTimeout: 300 * time.Millisecond}, want: "the cluster of " + addr},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(context.Background(), tt.o)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded with nothing listening")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), secret) {
				t.Errorf("Open() = %q, want it to name %s and no password", err, tt.want)
			}
		})
	}
}
