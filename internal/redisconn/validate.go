package redisconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

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
	if o.Wait.Replicas != nil && *o.Wait.Replicas < 0 {
		errs = append(errs, fmt.Errorf("wait.replicas: must not be negative, got %d", *o.Wait.Replicas))
	}
	if o.Wait.Timeout < 0 {
		errs = append(errs, fmt.Errorf("wait.timeout: must not be negative, got %v", o.Wait.Timeout))
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
