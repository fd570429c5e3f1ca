// Package redisconn holds the connection settings for the Redis that
// replicas share (the task store of package tasks, the shared rate limits
// of internal/limits/redisrate and the authorization server's state), and
// opens a client from them.
//
// [Options] is the `redis:` section of the configuration. It names one of
// three deployments, or none (Redis is not used):
//
//   - one server, by url (redis:// or rediss://);
//   - Redis Sentinel: sentinel.master_name and the sentinels'
//     sentinel.addresses; the client asks the sentinels for the primary
//     and follows a failover, and asks each server it connects to its
//     ROLE, so that a sentinel that still names the old primary, now a
//     replica, does not send it there;
//   - Redis Cluster: cluster.addresses, some of the cluster's nodes; the
//     client learns the rest and follows slot moves and failovers.
//
// [New] checks the options and builds a github.com/redis/go-redis/v9
// client for any of them ([redis.UniversalClient]); [Open] also pings it
// once:
//
//	o := redisconn.Options{URL: "rediss://redis.internal:6380/0"}
//	o.Password = os.Getenv("PORTCULLIS_REDIS_PASSWORD") // or the loader does it
//	client, err := redisconn.Open(ctx, o)
//	if err != nil {
//		return err // names the hosts, never the password
//	}
//	defer client.Close()
//
// On Cluster, keys that one script or transaction touches together must
// share a hash slot: [Options.GroupPrefix] gives such a group its prefix.
//
// The passwords are secrets: they are never part of an error, and Options
// prints them as "[redacted]" (fmt and log/slog). A URL that carries a
// password is refused, so that the secret cannot end up in a config file
// printed for support or in a process listing.
package redisconn

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Options is the `redis:` section of the configuration. Zero values mean
// the documented defaults.
type Options struct {
	// URL is one Redis server: redis://host[:port][/db] in clear text or
	// rediss://host[:port][/db] over TLS; the port defaults to 6379 and
	// the database to 0. It must not carry a password (use Password) nor
	// query parameters (use the keys below). Set url, sentinel.master_name
	// or cluster.addresses, never two of them; none (the default) means
	// Redis is not used: tasks and rate limits stay in each replica.
	URL string `yaml:"url"`
	// Sentinel selects Redis Sentinel: the client asks the sentinels which
	// server is the primary, and follows a failover to the new one.
	Sentinel SentinelOptions `yaml:"sentinel"`
	// Cluster selects Redis Cluster.
	Cluster ClusterOptions `yaml:"cluster"`
	// Username is the ACL user (Redis 6+) of the data servers. Empty means
	// the default user, or the user named in URL.
	Username string `yaml:"username"`
	// Password authenticates to the data servers. It is a secret: set it
	// with the environment variable PORTCULLIS_REDIS_PASSWORD rather than
	// in a file. It is never logged and never part of an error. Empty
	// means no AUTH.
	Password string `yaml:"password"`
	// TLS tunes TLS to Redis: for url, a rediss:// URL turns it on; for
	// Sentinel and Cluster, tls.enabled does (for the sentinels and the
	// data servers alike).
	TLS TLSOptions `yaml:"tls"`
	// KeyPrefix starts every key Portcullis writes, so that one Redis can
	// serve several deployments (give each its own prefix) or other
	// applications. Default "portcullis:". On Cluster, the keys that must
	// share a slot (the task store's) get a hash tag of their own after
	// it; a prefix that holds a hash tag itself, such as "{portcullis}:",
	// puts every key in one slot instead.
	KeyPrefix string `yaml:"key_prefix"`
	// DialTimeout bounds connecting to Redis, and the ping that checks it
	// at start.
	// Default 2s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// ReadTimeout bounds waiting for one reply. A command is tried twice
	// at most (one server) or four times (Sentinel, Cluster, so that a
	// command finds the new primary after a failover), so a request waits
	// at most about 2 × (DialTimeout + ReadTimeout), or 4 × and the
	// pauses between tries, when Redis stops answering. Default 1s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing one command. Default 1s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// PoolSize is the most connections kept open to each Redis server per
	// replica. Zero (the default) means go-redis's default, 10 per CPU the
	// Go runtime may use.
	PoolSize int `yaml:"pool_size" schema:"min=0"`
	// Wait makes each write a client is told of (a legacy session or a
	// task created, a task's update, a grant, a consent, a registration,
	// a refresh-token rotation) wait until replicas hold it, so that a
	// failover does not lose it: Redis copies writes to its replicas after
	// answering them.
	Wait WaitOptions `yaml:"wait"`
}

// WaitOptions is the `redis.wait:` section.
type WaitOptions struct {
	// Replicas is how many replicas must acknowledge each such write
	// (Redis's WAIT, sent on the connection that wrote; on Cluster, to the
	// primary of the key's slot) before the client is told of it. When
	// fewer do within wait.timeout, the request fails as Redis being
	// unavailable (503, or a task tool run without a task), and what the
	// write could take back is taken back. 0 does not wait. Default 1
	// with sentinel, whose deployments have replicas; 0 with url and
	// cluster (set it for a Cluster whose primaries have replicas). With
	// fewer than every replica, a write only a replica that is not
	// promoted holds can be lost: see docs/operations.md.
	Replicas *int `yaml:"replicas" schema:"min=0"`
	// Timeout is how long a write waits for the replicas before it fails.
	// Default 500ms.
	Timeout time.Duration `yaml:"timeout"`
}

// SentinelOptions is the `redis.sentinel:` section.
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor the primary under (the
	// NAME of `sentinel monitor NAME host port quorum`). Setting it
	// selects Sentinel. Empty (the default): no Sentinel.
	MasterName string `yaml:"master_name"`
	// Addresses are the sentinels, as host:port (port 26379 when left
	// out). Give all of them: the client asks the next when one is down.
	Addresses []string `yaml:"addresses"`
	// Username is the sentinels' own ACL user, when they require one.
	// Empty means none.
	Username string `yaml:"username"`
	// Password authenticates to the sentinels (their requirepass), when
	// they require it; a secret, set with PORTCULLIS_REDIS_SENTINEL_PASSWORD.
	// Empty means no AUTH to the sentinels.
	Password string `yaml:"password"`
	// Database is the database number on the primary. Default 0.
	Database int `yaml:"database" schema:"min=0"`
}

// ClusterOptions is the `redis.cluster:` section.
type ClusterOptions struct {
	// Addresses are some of the cluster's nodes, as host:port (port 6379
	// when left out). Setting them selects Cluster. The client learns the
	// others from them; give several, so that it starts when one is down.
	// Cluster has only database 0.
	Addresses []string `yaml:"addresses"`
}

// TLSOptions tunes TLS to Redis.
type TLSOptions struct {
	// Enabled turns TLS on for Sentinel and Cluster. For url, the scheme
	// decides (rediss://), and enabled must be left out or agree.
	// Default off.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the certificate authorities that sign the
	// servers' certificates. Empty (the default) means the system's roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name the servers' certificates must carry. Empty
	// (the default) means the host each connection dials.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate, so anyone on the path
	// to Redis can read and change every task and rate limit. Off by
	// default; for tests only. A warning is logged at start when it is on.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Defaults for [Options].
const (
	DefaultKeyPrefix    = "portcullis:"
	DefaultDialTimeout  = 2 * time.Second
	DefaultReadTimeout  = time.Second
	DefaultWriteTimeout = time.Second
	// DefaultPort is the port of a URL or a cluster address without one.
	DefaultPort = "6379"
	// DefaultSentinelPort is the port of a sentinel address without one.
	DefaultSentinelPort = "26379"
	// DefaultWaitTimeout is how long a write waits for replicas.
	DefaultWaitTimeout = 500 * time.Millisecond
	// DefaultSentinelWaitReplicas is how many replicas a write waits for
	// on Sentinel; on one server and on Cluster it waits for none.
	DefaultSentinelWaitReplicas = 1
)

// Modes of a deployment, as [Options.Mode] returns them.
const (
	ModeNone     = ""
	ModeSingle   = "single"
	ModeSentinel = "sentinel"
	ModeCluster  = "cluster"
)

// Enabled reports whether Redis is configured: a URL, a Sentinel master
// or Cluster nodes.
func (o *Options) Enabled() bool { return o.Mode() != ModeNone }

// Mode returns the deployment o names: [ModeSingle] for url,
// [ModeSentinel], [ModeCluster], or [ModeNone]. With more than one set
// (which [Options.Validate] refuses) the first of url, sentinel, cluster.
func (o *Options) Mode() string {
	switch {
	case o.URL != "":
		return ModeSingle
	case o.Sentinel.MasterName != "":
		return ModeSentinel
	case len(o.Cluster.Addresses) > 0:
		return ModeCluster
	}
	return ModeNone
}

// GroupPrefix returns the prefix of a group of keys that one script or
// transaction touches together (such as the task store's), so that on
// Cluster they share a hash slot: KeyPrefix followed by {group}:, unless
// KeyPrefix holds a hash tag of its own. On one server and on Sentinel it
// is KeyPrefix, so that keys stay where earlier versions wrote them.
func (o *Options) GroupPrefix(group string) string {
	if o.Mode() != ModeCluster || hasHashTag(o.KeyPrefix) {
		return o.KeyPrefix
	}
	return o.KeyPrefix + "{" + group + "}:"
}

// hasHashTag reports whether a key starting with prefix has its hash slot
// decided by the prefix: Redis Cluster hashes only what is between the
// first { and the next }, when that is not empty.
func hasHashTag(prefix string) bool {
	open := strings.IndexByte(prefix, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(prefix[open+1:], '}')
	return end > 0
}

// WaitReplicas returns how many replicas each write a client is told of
// waits for: wait.replicas, or its default for the deployment's mode.
func (o *Options) WaitReplicas() int {
	switch {
	case o.Wait.Replicas != nil:
		return max(*o.Wait.Replicas, 0)
	case o.Mode() == ModeSentinel:
		return DefaultSentinelWaitReplicas
	}
	return 0
}

// WaitTimeout returns how long a write waits for replicas: wait.timeout,
// or [DefaultWaitTimeout].
func (o *Options) WaitTimeout() time.Duration {
	if o.Wait.Timeout > 0 {
		return o.Wait.Timeout
	}
	return DefaultWaitTimeout
}

// Defaults fills in zero values.
func (o *Options) Defaults() {
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
}

// String returns o with the passwords redacted.
func (o Options) String() string {
	o.Password = redact(o.Password)
	o.Sentinel.Password = redact(o.Sentinel.Password)
	type plain Options // without this method
	return fmt.Sprintf("%+v", plain(o))
}

// LogValue returns o for log/slog, with the passwords redacted.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("mode", o.Mode()),
		slog.String("url", o.URL),
		slog.String("sentinel.master_name", o.Sentinel.MasterName),
		slog.Any("sentinel.addresses", o.Sentinel.Addresses),
		slog.String("sentinel.username", o.Sentinel.Username),
		slog.String("sentinel.password", redact(o.Sentinel.Password)),
		slog.Int("sentinel.database", o.Sentinel.Database),
		slog.Any("cluster.addresses", o.Cluster.Addresses),
		slog.String("username", o.Username),
		slog.String("password", redact(o.Password)),
		slog.Bool("tls.enabled", o.TLS.Enabled),
		slog.String("tls.ca_file", o.TLS.CAFile),
		slog.String("tls.server_name", o.TLS.ServerName),
		slog.Bool("tls.insecure_skip_verify", o.TLS.InsecureSkipVerify),
		slog.String("key_prefix", o.KeyPrefix),
		slog.Duration("dial_timeout", o.DialTimeout),
		slog.Duration("read_timeout", o.ReadTimeout),
		slog.Duration("write_timeout", o.WriteTimeout),
		slog.Int("pool_size", o.PoolSize),
		slog.Int("wait.replicas", o.WaitReplicas()),
		slog.Duration("wait.timeout", o.WaitTimeout()),
	)
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}
