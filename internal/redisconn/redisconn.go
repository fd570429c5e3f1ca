// Package redisconn holds the connection settings for the Redis that
// replicas share (the task store of package tasks and the shared rate
// limits of internal/limits/redisrate), and opens a client from them.
//
// [Options] is the `redis:` section of the configuration; an empty URL
// means Redis is not used. [Open] checks the options, builds a
// github.com/redis/go-redis/v9 client and pings the server once:
//
//	o := redisconn.Options{URL: "rediss://redis.internal:6380/0"}
//	o.Password = os.Getenv("PORTCULLIS_REDIS_PASSWORD") // or the loader does it
//	client, err := redisconn.Open(ctx, o)
//	if err != nil {
//		return err // names the host, never the password
//	}
//	defer client.Close()
//
// The password is a secret: it is never part of an error, and Options
// prints it as "[redacted]" (fmt and log/slog). A URL that carries a
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
	// URL is the Redis server: redis://host[:port][/db] in clear text or
	// rediss://host[:port][/db] over TLS; the port defaults to 6379 and
	// the database to 0. It must not carry a password (use Password) nor
	// query parameters (use the keys below). Empty (the default) means
	// Redis is not used: tasks and rate limits stay in each replica.
	URL string `yaml:"url"`
	// Username is the ACL user (Redis 6+). Empty means the default user,
	// or the user named in URL.
	Username string `yaml:"username"`
	// Password authenticates to Redis. It is a secret: set it with the
	// environment variable PORTCULLIS_REDIS_PASSWORD rather than in a
	// file. It is never logged and never part of an error. Empty means no
	// AUTH.
	Password string `yaml:"password"`
	// TLS tunes the TLS of a rediss:// URL; it must be empty for redis://.
	TLS TLSOptions `yaml:"tls"`
	// KeyPrefix starts every key Portcullis writes, so that one Redis can
	// serve several deployments (give each its own prefix) or other
	// applications. Default "portcullis:". On Redis Cluster, a prefix with
	// a hash tag such as "{portcullis}:" puts every key in one slot, which
	// the task store's scripts need.
	KeyPrefix string `yaml:"key_prefix"`
	// DialTimeout bounds connecting to Redis, and the ping that checks it
	// at start.
	// Default 2s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// ReadTimeout bounds waiting for one reply. A command is tried twice
	// at most, so a request waits at most about 2 × (DialTimeout +
	// ReadTimeout) when Redis stops answering. Default 1s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing one command. Default 1s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// PoolSize is the most connections kept open to Redis per replica.
	// Zero (the default) means go-redis's default, 10 per CPU the Go
	// runtime may use.
	PoolSize int `yaml:"pool_size" schema:"min=0"`
}

// TLSOptions tunes TLS to Redis (a rediss:// URL).
type TLSOptions struct {
	// CAFile is a PEM file of the certificate authorities that sign the
	// server's certificate. Empty (the default) means the system's roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name the server's certificate must carry. Empty
	// (the default) means the URL's host.
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
	// DefaultPort is the port of a URL without one.
	DefaultPort = "6379"
)

// Enabled reports whether Redis is configured (URL is not empty).
func (o *Options) Enabled() bool { return o.URL != "" }

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
// relative to the redis section. No message carries the password. An empty
// URL is valid (Redis is not used) and the other keys are then checked
// only for their own sake.
func (o *Options) Validate() error {
	var errs []error
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
	}
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

// clientOptions returns the go-redis options for o (defaults applied).
func clientOptions(o Options) (*redis.Options, error) {
	if !o.Enabled() {
		return nil, errors.New("redisconn: redis.url is empty: Redis is not configured")
	}
	o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("redisconn: %w", err)
	}
	ep, _ := parseURL(o.URL) // Validate checked it
	ro := &redis.Options{
		Addr:         ep.addr,
		Username:     ep.user,
		Password:     o.Password,
		DB:           ep.db,
		DialTimeout:  o.DialTimeout,
		ReadTimeout:  o.ReadTimeout,
		WriteTimeout: o.WriteTimeout,
		PoolSize:     o.PoolSize,
		// One dial per attempt and one retry per command (go-redis's
		// defaults are 5 and 3), so that a command fails within about
		// two dial timeouts plus two read timeouts when Redis is gone:
		// callers fall back (rate limits) or answer "try again" (tasks)
		// instead of holding requests.
		DialerRetries: 1,
		MaxRetries:    1,
		// Set no client name and no library identity: CLIENT SETINFO
		// fails on Redis before 7.2 and on some managed services.
		DisableIdentity: true,
	}
	if o.Username != "" {
		ro.Username = o.Username
	}
	if ep.tls {
		tc := &tls.Config{
			MinVersion:         tls.VersionTLS12,
			ServerName:         ep.host,
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
		ro.TLSConfig = tc
	}
	return ro, nil
}

// Open returns a client for the Redis o names, once it answered a PING
// within o.DialTimeout (or ctx's deadline, if sooner). Zero fields of o
// take their defaults. The error names the server's host and port, never
// the password. The caller closes the client.
func Open(ctx context.Context, o Options) (*redis.Client, error) {
	ro, err := clientOptions(o)
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(ro)
	if err := Ping(ctx, client, o); err != nil {
		_ = client.Close()
		return nil, err
	}
	return client, nil
}

// New returns a client for the Redis o names without reaching it: a server
// that is down at start is reached once it is up. The caller closes it.
func New(o Options) (*redis.Client, error) {
	ro, err := clientOptions(o)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(ro), nil
}

// Ping reports whether client's server answers a PING within o.DialTimeout
// (or ctx's deadline, if sooner), with an error that names the server and
// says what to check, never the password.
func Ping(ctx context.Context, client *redis.Client, o Options) error {
	ro := client.Options()
	pctx, cancel := context.WithTimeout(ctx, ro.DialTimeout)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("redisconn: cannot reach Redis at %s: %w (check redis.url, redis.username and redis.password, and that the server runs)", ro.Addr, scrub(err, o.Password))
	}
	return nil
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

// String returns o with the password redacted.
func (o Options) String() string {
	o.Password = redact(o.Password)
	type plain Options // without this method
	return fmt.Sprintf("%+v", plain(o))
}

// LogValue returns o for log/slog, with the password redacted.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", o.URL),
		slog.String("username", o.Username),
		slog.String("password", redact(o.Password)),
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
