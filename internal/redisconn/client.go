package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// universalOptions returns the go-redis options for the deployment o
// names, in the one form go-redis converts to each client's
// (Simple, Failover, Cluster).
func universalOptions(o Options) (*redis.UniversalOptions, error) {
	o, err := checked(o)
	if err != nil {
		return nil, err
	}
	uo := &redis.UniversalOptions{
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
		// Set no client name and no library identity: CLIENT SETINFO
		// fails on Redis before 7.2 and on some managed services.
		DisableIdentity: true,
	}
	tlsOn, tlsHost := o.TLS.Enabled, ""
	switch o.Mode() {
	case ModeSingle:
		ep, _ := parseURL(o.URL) // Validate checked it
		uo.Addrs, uo.DB = []string{ep.addr}, ep.db
		if uo.Username == "" {
			uo.Username = ep.user
		}
		uo.MaxRetries, uo.MinRetryBackoff, uo.MaxRetryBackoff = singleMaxRetries, 0, 0
		tlsOn, tlsHost = ep.tls, ep.host
	case ModeSentinel:
		uo.MasterName = o.Sentinel.MasterName
		uo.Addrs = addresses(o.Sentinel.Addresses, DefaultSentinelPort)
		uo.SentinelUsername, uo.SentinelPassword = o.Sentinel.Username, o.Sentinel.Password
		uo.DB = o.Sentinel.Database
	case ModeCluster:
		uo.Addrs = addresses(o.Cluster.Addresses, DefaultPort)
	}
	if uo.TLSConfig, err = tlsConfig(o, tlsOn, tlsHost); err != nil {
		return nil, err
	}
	return uo, nil
}

// clientOptions returns the go-redis options for one server (url).
func clientOptions(o Options) (*redis.Options, error) {
	uo, err := universalOptions(o)
	if err != nil {
		return nil, err
	}
	if o.Mode() != ModeSingle {
		return nil, fmt.Errorf("redisconn: clientOptions for a %s deployment", o.Mode())
	}
	return uo.Simple(), nil
}

// failoverOptions returns the go-redis options for Sentinel.
func failoverOptions(o Options) (*redis.FailoverOptions, error) {
	uo, err := universalOptions(o)
	if err != nil {
		return nil, err
	}
	return uo.Failover(), nil
}

// clusterOptions returns the go-redis options for Cluster.
func clusterOptions(o Options) (*redis.ClusterOptions, error) {
	uo, err := universalOptions(o)
	if err != nil {
		return nil, err
	}
	return uo.Cluster(), nil
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
		fo.Dialer = sentinelDialer(fo.DialTimeout, fo.TLSConfig)
		fc := redis.NewFailoverClient(fo)
		fc.AddHook(sentinelHook{check: primaryCheck{
			username: fo.Username,
			password: fo.Password,
			timeout:  fo.ReadTimeout,
			dial:     serverDialer(fo.DialTimeout, fo.TLSConfig),
		}})
		return fc, nil
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
