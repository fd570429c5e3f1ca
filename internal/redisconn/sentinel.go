package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// With every sentinel down, go-redis's failover client would spend
// seconds on each command: each of its sentinel clients retries a refused
// connection with pauses (the retries of the options it copies), and the
// command itself retries the dial that found no sentinel, so that a
// request waited 2 to 12 s and then failed with "context deadline
// exceeded" while the sentinels' ports refused at once. So, on Sentinel,
// the client dials through sentinelDialer, whose failures go-redis does
// not retry, and sentinelHook gives the data servers' dials their
// retryable errors back and names the sentinels' failures: a command
// fails as soon as every sentinel has refused (or within dial_timeout
// when they do not answer at all), with an error that says so.

// dialFailure is a failed dial as sentinelDialer reports it: go-redis
// retries a dial error (a *net.OpError) but not this, which hides it.
type dialFailure struct {
	err error // the dial's own error
}

func (e *dialFailure) Error() string { return e.err.Error() }

// keepAlive is go-redis's own TCP keep-alive for the connections it dials.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}

// sentinelDialer dials as go-redis does (TLS when tc is set), and reports
// a failure as a *dialFailure. The failover client uses it for the
// sentinels and for the data servers alike; sentinelHook sees the data
// servers' dials and gives their errors back.
func sentinelDialer(timeout time.Duration, tc *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := serverDialer(timeout, tc)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, &dialFailure{err: err}
		}
		return conn, nil
	}
}

// serverDialer dials as go-redis does: TCP with its keep-alive, and TLS
// when tc is set.
func serverDialer(timeout time.Duration, tc *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nd := &net.Dialer{Timeout: timeout, KeepAliveConfig: keepAlive}
		if tc == nil {
			return nd.DialContext(ctx, network, addr)
		}
		return (&tls.Dialer{NetDialer: nd, Config: tc}).DialContext(ctx, network, addr)
	}
}

// SentinelsUnreachable is the error of a command on Sentinel when no
// sentinel answered which server is the primary. It names each
// sentinel's failure.
type SentinelsUnreachable struct {
	// Causes are the sentinels' failures, one per sentinel tried.
	Causes []string
}

func (e *SentinelsUnreachable) Error() string {
	return "redis: sentinels unreachable: " + strings.Join(e.Causes, "; ")
}

// sentinelHook is the failover client's dial hook (it sees the dials of
// the data servers, not the sentinels' own clients'): it names the
// sentinels' failures, and hands go-redis only connections to the
// primary.
type sentinelHook struct {
	check primaryCheck
}

func (h sentinelHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, dialError(err)
		}
		return h.check.checkPrimary(ctx, network, conn)
	}
}

func (sentinelHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (sentinelHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dialError turns the error of a failover client's dial into what
// go-redis and the caller should see: a data server's own dial error as
// it was (go-redis retries it: the primary may be switching), or, when
// asking the sentinels failed, a [SentinelsUnreachable] naming each
// sentinel's failure, which go-redis does not retry.
func dialError(err error) error {
	var df *dialFailure
	switch {
	case err == nil:
		return nil
	case errors.As(err, &df) && err == error(df):
		return df.err // the data server's dial
	case !errors.As(err, &df):
		return err
	}
	// go-redis joins the failure of each sentinel it asked.
	var causes []string
	var walk func(error)
	walk = func(e error) {
		if d, ok := e.(*dialFailure); ok {
			causes = append(causes, d.err.Error())
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u)
			return
		}
		causes = append(causes, e.Error())
	}
	walk(err)
	return &SentinelsUnreachable{Causes: causes}
}
