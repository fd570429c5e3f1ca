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
//     and follows a failover;
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
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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

// Validate reports every problem with o, each prefixed with its key
// relative to the redis section. No message carries a password. Options
// that name no Redis are valid (Redis is not used) and the other keys are
// then checked only for their own sake.
func (o *Options) Validate() error {
	var errs []error
	var set []string
	if o.URL != "" {
		set = append(set, "url")
	}
	if o.Sentinel.MasterName != "" {
		set = append(set, "sentinel.master_name")
	}
	if len(o.Cluster.Addresses) > 0 {
		set = append(set, "cluster.addresses")
	}
	if len(set) > 1 {
		errs = append(errs, fmt.Errorf("%s: set together; name one server (url), a Sentinel deployment (sentinel.master_name) or a Cluster (cluster.addresses)", strings.Join(set, ", ")))
	}
	if o.URL != "" {
		ep, err := parseURL(o.URL)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !ep.tls && o.TLS != (TLSOptions{}):
			errs = append(errs, errors.New("tls: set, but url is redis:// (clear text); use a rediss:// URL for TLS or remove the tls keys"))
		}
		if err == nil && ep.user != "" && o.Username != "" && ep.user != o.Username {
			errs = append(errs, errors.New("username: differs from the user named in url; name the user in one place"))
		}
	} else if !o.TLS.Enabled && o.TLS != (TLSOptions{}) {
		errs = append(errs, errors.New("tls: set, but tls.enabled is off; turn it on for TLS to Sentinel or Cluster, or remove the tls keys"))
	}
	s := o.Sentinel
	switch {
	case s.MasterName == "" && (len(s.Addresses) > 0 || s.Username != "" || s.Password != "" || s.Database != 0):
		errs = append(errs, errors.New("sentinel.master_name: empty, but other sentinel keys are set; name the primary the sentinels monitor"))
	case s.MasterName != "" && len(s.Addresses) == 0:
		errs = append(errs, errors.New("sentinel.addresses: empty; list the sentinels as host:port"))
	}
	if s.Database < 0 {
		errs = append(errs, fmt.Errorf("sentinel.database: must not be negative, got %d", s.Database))
	}
	errs = append(errs, checkAddresses("sentinel.addresses", s.Addresses)...)
	errs = append(errs, checkAddresses("cluster.addresses", o.Cluster.Addresses)...)
	for key, d := range map[string]time.Duration{
		"dial_timeout":  o.DialTimeout,
		"read_timeout":  o.ReadTimeout,
		"write_timeout": o.WriteTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %v", key, d))
		}
	}
	if o.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("pool_size: must not be negative, got %d", o.PoolSize))
	}
	if strings.ContainsFunc(o.KeyPrefix, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		errs = append(errs, fmt.Errorf("key_prefix: must not contain spaces or control characters, got %q", o.KeyPrefix))
	}
	return errors.Join(errs...)
}

// checkAddresses reports every address of the list under key that is not
// host[:port] (a URL, a path, a bad port), and duplicates.
func checkAddresses(key string, addrs []string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, a := range addrs {
		if _, err := hostPort(a, DefaultPort); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", key, i, err))
			continue
		}
		if seen[a] {
			errs = append(errs, fmt.Errorf("%s[%d]: %s is listed twice", key, i, a))
		}
		seen[a] = true
	}
	return errs
}

// hostPort returns addr as host:port, with defaultPort when addr has no
// port. Its errors do not quote more than the address.
func hostPort(addr, defaultPort string) (string, error) {
	if addr == "" {
		return "", errors.New("empty; want host:port")
	}
	if strings.Contains(addr, "@") {
		// Never quoted: what is before the @ may be a password.
		return "", errors.New("names a user or password; write host:port and set the username and password keys")
	}
	if strings.Contains(addr, "://") || strings.ContainsAny(addr, "/?# ") {
		return "", fmt.Errorf("%q is not host:port (no scheme or path: TLS is tls.enabled)", addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// No port: a host name, an IPv4 address or a bracketed IPv6 one.
		host, port = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), defaultPort
		if strings.Contains(host, ":") && !strings.HasPrefix(addr, "[") {
			return "", fmt.Errorf("%q is not host:port (write an IPv6 address as [addr]:port)", addr)
		}
	}
	if host == "" {
		return "", fmt.Errorf("%q has no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: port %q is not a port number", addr, port)
	}
	return net.JoinHostPort(host, port), nil
}

// Warnings returns what the caller should log as warnings about o: today
// only tls.insecure_skip_verify being on.
func (o *Options) Warnings() []string {
	if o.Enabled() && o.TLS.InsecureSkipVerify {
		return []string{"redis.tls.insecure_skip_verify is on: the Redis server's certificate is not checked, so anyone on the network path can read and change tasks and rate limits"}
	}
	return nil
}

// endpoint is what a valid URL says.
type endpoint struct {
	tls  bool
	addr string // host:port
	host string // for ServerName
	user string
	db   int
}

// parseURL checks a Redis URL. Its errors start with "url: " and never
// quote the URL (it may carry a password).
func parseURL(raw string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL, password included
		}
		return endpoint{}, fmt.Errorf("url: not a valid URL (%v); want redis://host:port or rediss://host:port", err)
	}
	var ep endpoint
	switch u.Scheme {
	case "redis":
	case "rediss":
		ep.tls = true
	default:
		return endpoint{}, errors.New("url: must be a redis:// or rediss:// URL")
	}
	if _, has := u.User.Password(); has {
		return endpoint{}, errors.New("url: must not carry a password; set redis.password (or the environment variable PORTCULLIS_REDIS_PASSWORD) instead")
	}
	if u.User != nil {
		ep.user = u.User.Username()
	}
	ep.host = u.Hostname()
	if ep.host == "" {
		return endpoint{}, errors.New("url: has no host; want redis://host:port or rediss://host:port")
	}
	port := u.Port()
	if port == "" {
		port = DefaultPort
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return endpoint{}, fmt.Errorf("url: port %q is not a port number", port)
	}
	ep.addr = net.JoinHostPort(ep.host, port)
	if p := strings.Trim(u.Path, "/"); p != "" {
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 {
			return endpoint{}, fmt.Errorf("url: path %q is not a database number; want /0, /1, …", u.Path)
		}
		ep.db = db
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return endpoint{}, errors.New("url: must not have query parameters or a fragment; set redis.dial_timeout, redis.pool_size and the other redis keys instead")
	}
	return ep, nil
}

// Retries: on one server a command is tried twice at most, so that it
// fails within about two dial timeouts plus two read timeouts when Redis
// is gone (callers fall back, for rate limits, or answer "try again", for
// tasks, instead of holding requests). On Sentinel and Cluster a command
// that meets a primary going away is tried up to four times, pausing
// between tries, so that it reaches the new primary once the failover is
// done instead of failing.
const (
	singleMaxRetries = 1
	haMaxRetries     = 3
	haMinBackoff     = 100 * time.Millisecond
	haMaxBackoff     = time.Second
)

// checked returns o with its defaults, once it is valid and names Redis.
func checked(o Options) (Options, error) {
	if !o.Enabled() {
		return o, errors.New("redisconn: no Redis is configured (redis.url, redis.sentinel.master_name or redis.cluster.addresses)")
	}
	o.Defaults()
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("redisconn: %w", err)
	}
	return o, nil
}

// tlsConfig returns the TLS configuration o asks for (nil: clear text).
// host is the server name to check when tls.server_name is empty; empty
// lets crypto/tls take the host each connection dials.
func tlsConfig(o Options, on bool, host string) (*tls.Config, error) {
	if !on {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         host,
		InsecureSkipVerify: o.TLS.InsecureSkipVerify, //nolint:gosec // documented, off by default, warned about
	}
	if o.TLS.ServerName != "" {
		tc.ServerName = o.TLS.ServerName
	}
	if o.TLS.CAFile != "" {
		pem, err := os.ReadFile(o.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redisconn: tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisconn: tls.ca_file: %s holds no PEM certificate", o.TLS.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// addresses returns list as host:port, with defaultPort where left out.
func addresses(list []string, defaultPort string) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i], _ = hostPort(a, defaultPort) // Validate checked them
	}
	return out
}

// clientOptions returns the go-redis options for one server (url).
func clientOptions(o Options) (*redis.Options, error) {
	o, err := checked(o)
	if err != nil {
		return nil, err
	}
	if o.Mode() != ModeSingle {
		return nil, fmt.Errorf("redisconn: clientOptions for a %s deployment", o.Mode())
	}
	ep, _ := parseURL(o.URL) // Validate checked it
	tc, err := tlsConfig(o, ep.tls, ep.host)
	if err != nil {
		return nil, err
	}
	ro := &redis.Options{
		Addr:          ep.addr,
		Username:      ep.user,
		Password:      o.Password,
		DB:            ep.db,
		DialTimeout:   o.DialTimeout,
		ReadTimeout:   o.ReadTimeout,
		WriteTimeout:  o.WriteTimeout,
		PoolSize:      o.PoolSize,
		DialerRetries: 1,
		MaxRetries:    singleMaxRetries,
		// Set no client name and no library identity: CLIENT SETINFO
		// fails on Redis before 7.2 and on some managed services.
		DisableIdentity: true,
		TLSConfig:       tc,
	}
	if o.Username != "" {
		ro.Username = o.Username
	}
	return ro, nil
}

// failoverOptions returns the go-redis options for Sentinel.
func failoverOptions(o Options) (*redis.FailoverOptions, error) {
	o, err := checked(o)
	if err != nil {
		return nil, err
	}
	tc, err := tlsConfig(o, o.TLS.Enabled, "")
	if err != nil {
		return nil, err
	}
	return &redis.FailoverOptions{
		MasterName:       o.Sentinel.MasterName,
		SentinelAddrs:    addresses(o.Sentinel.Addresses, DefaultSentinelPort),
		SentinelUsername: o.Sentinel.Username,
		SentinelPassword: o.Sentinel.Password,
		Username:         o.Username,
		Password:         o.Password,
		DB:               o.Sentinel.Database,
		DialTimeout:      o.DialTimeout,
		ReadTimeout:      o.ReadTimeout,
		WriteTimeout:     o.WriteTimeout,
		PoolSize:         o.PoolSize,
		DialerRetries:    1,
		MaxRetries:       haMaxRetries,
		MinRetryBackoff:  haMinBackoff,
		MaxRetryBackoff:  haMaxBackoff,
		DisableIdentity:  true,
		TLSConfig:        tc,
	}, nil
}

// clusterOptions returns the go-redis options for Cluster.
func clusterOptions(o Options) (*redis.ClusterOptions, error) {
	o, err := checked(o)
	if err != nil {
		return nil, err
	}
	tc, err := tlsConfig(o, o.TLS.Enabled, "")
	if err != nil {
		return nil, err
	}
	return &redis.ClusterOptions{
		Addrs:           addresses(o.Cluster.Addresses, DefaultPort),
		Username:        o.Username,
		Password:        o.Password,
		DialTimeout:     o.DialTimeout,
		ReadTimeout:     o.ReadTimeout,
		WriteTimeout:    o.WriteTimeout,
		PoolSize:        o.PoolSize,
		DialerRetries:   1,
		MaxRetries:      haMaxRetries,
		MinRetryBackoff: haMinBackoff,
		MaxRetryBackoff: haMaxBackoff,
		DisableIdentity: true,
		TLSConfig:       tc,
	}, nil
}

// New returns a client for the Redis o names without reaching it: a server
// that is down at start is reached once it is up. It is a *redis.Client
// for one server and for Sentinel (a failover client), a
// *redis.ClusterClient for Cluster. The caller closes it.
func New(o Options) (redis.UniversalClient, error) {
	switch o.Mode() {
	case ModeSentinel:
		fo, err := failoverOptions(o)
		if err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(fo), nil
	case ModeCluster:
		co, err := clusterOptions(o)
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(co), nil
	}
	ro, err := clientOptions(o)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(ro), nil
}

// Open returns a client for the Redis o names, once it answered a PING
// within o.DialTimeout (or ctx's deadline, if sooner). Zero fields of o
// take their defaults. The error names the servers, never a password. The
// caller closes the client.
func Open(ctx context.Context, o Options) (redis.UniversalClient, error) {
	client, err := New(o)
	if err != nil {
		return nil, err
	}
	if err := Ping(ctx, client, o); err != nil {
		_ = client.Close()
		return nil, err
	}
	return client, nil
}

// Ping reports whether the Redis client reaches answers a PING within
// o.DialTimeout (or ctx's deadline, if sooner): on Sentinel, the primary
// the sentinels name; on Cluster, every primary. The error names where o
// points and says what to check, never a password.
func Ping(ctx context.Context, client redis.UniversalClient, o Options) error {
	o.Defaults()
	pctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	var err error
	if cc, ok := client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(pctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	} else {
		err = client.Ping(pctx).Err()
	}
	if err != nil {
		return fmt.Errorf("redisconn: cannot reach Redis at %s: %w (%s)", o.where(), scrub(scrub(err, o.Password), o.Sentinel.Password), o.hint())
	}
	return nil
}

// where names the servers o points at, for errors and logs.
func (o *Options) where() string {
	switch o.Mode() {
	case ModeSentinel:
		return fmt.Sprintf("the primary %q of the sentinels %s", o.Sentinel.MasterName, strings.Join(addresses(o.Sentinel.Addresses, DefaultSentinelPort), ", "))
	case ModeCluster:
		return "the cluster of " + strings.Join(addresses(o.Cluster.Addresses, DefaultPort), ", ")
	}
	ep, err := parseURL(o.URL)
	if err != nil {
		return "redis.url"
	}
	return ep.addr
}

// hint says which keys to check when Redis cannot be reached.
func (o *Options) hint() string {
	switch o.Mode() {
	case ModeSentinel:
		return "check redis.sentinel (master_name, addresses, username and password), redis.username and redis.password, and that the sentinels and the primary run"
	case ModeCluster:
		return "check redis.cluster.addresses, redis.username and redis.password, and that the cluster's nodes run"
	}
	return "check redis.url, redis.username and redis.password, and that the server runs"
}

// scrub returns err, or an error with its text if the text contains the
// password (no go-redis error is known to, but a secret must not leak
// through a future one).
func scrub(err error, password string) error {
	if password != "" && strings.Contains(err.Error(), password) {
		return errors.New(strings.ReplaceAll(err.Error(), password, "[redacted]"))
	}
	return err
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
	)
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}
