package redisconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// On Sentinel, go-redis's failover client dials the server that one
// sentinel names, the one it asked last, and keeps asking that one while
// it answers. A sentinel that lags (it has not heard of the last failover,
// or a partition cuts it off from the others) names the old primary; once
// that server is back, as a replica of the new primary, the client would
// connect to a replica: each write fails with READONLY, a MULTI/EXEC with
// EXECABORT, and the client dials the same replica again for as long as
// that sentinel lags. So each connection the failover client dials to a
// data server is checked before go-redis uses it: checkPrimary asks the
// server its ROLE, and a replica's answer names its primary, which is
// dialed (and checked) instead. Every command path (single commands,
// pipelines, MULTI/EXEC, scripts, connections held for WAIT) runs on
// connections dialed so; a connection to a replica is never handed to
// the pool. A connection already pooled whose server the sentinels turn
// into a replica is closed by the sentinels themselves (they send CLIENT
// KILL TYPE normal with the REPLICAOF), and go-redis drops a connection
// that answers READONLY.

// maxPrimaryHops is how many replicas in a row a dial follows to the
// primary they name before it gives up (a replica of a replica, during a
// reconfiguration).
const maxPrimaryHops = 3

// maxReplyBytes bounds what the check reads of one reply: ROLE's answer
// is a few hundred bytes per replica.
const maxReplyBytes = 1 << 20

// primaryCheck makes sure a connection is to the primary.
type primaryCheck struct {
	// username and password authenticate the check's AUTH, as the
	// client's own handshake does after it; an empty password sends none.
	username, password string
	// timeout bounds the check's round trip on one connection.
	timeout time.Duration
	// dial dials a data server, as the failover client's dialer does.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// notPrimary is the error of a dial that found replicas only.
type notPrimary struct {
	path []string // the servers tried, each a replica of the next
}

func (e *notPrimary) Error() string {
	return "redis: no primary within " + strconv.Itoa(maxPrimaryHops) + " hops: " + strings.Join(e.path, " is a replica of ")
}

// checkPrimary returns conn if its server is the primary, or a
// connection to the primary its server replicates, following up to
// maxPrimaryHops replicas. A server that does not let the check ask (ROLE
// refused by an ACL, renamed away, or any other error reply, such as a
// failed AUTH, which the client's own handshake reports next) is taken as
// it is: the check is a guard, not a requirement. A failure is a dial
// error, which go-redis retries, and conn is closed.
func (p primaryCheck) checkPrimary(ctx context.Context, network string, conn net.Conn) (net.Conn, error) {
	path := []string{conn.RemoteAddr().String()}
	for {
		primary, err := p.role(ctx, conn)
		if err != nil || primary == "" {
			if err != nil {
				conn.Close()
				return nil, &net.OpError{Op: "dial", Net: network, Addr: conn.RemoteAddr(), Err: fmt.Errorf("redis: asking %s its ROLE: %w", conn.RemoteAddr(), err)}
			}
			return conn, nil
		}
		conn.Close()
		path = append(path, primary)
		if len(path) > maxPrimaryHops {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &notPrimary{path: path}}
		}
		if conn, err = p.dial(ctx, network, primary); err != nil {
			return nil, err
		}
	}
}

// role asks conn's server its ROLE and returns the primary it replicates
// (host:port), or "" when it is a primary or did not say (an error reply,
// an answer of another shape). It reads exactly the replies to what it
// sends, so the client's handshake follows on a clean stream. err is a
// failure of the connection itself.
func (p primaryCheck) role(ctx context.Context, conn net.Conn) (primary string, err error) {
	deadline := time.Now().Add(p.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	defer conn.SetDeadline(time.Time{})
	var req []byte
	if p.password != "" {
		if p.username != "" {
			req = appendCommand(req, "AUTH", p.username, p.password)
		} else {
			req = appendCommand(req, "AUTH", p.password)
		}
	}
	req = appendCommand(req, "ROLE")
	if _, err := conn.Write(req); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	if p.password != "" {
		if _, err := readReply(r, 0); err != nil && !isReplyError(err) {
			return "", err
		}
	}
	v, err := readReply(r, 0)
	if isReplyError(err) {
		return "", nil // NOPERM, unknown command, NOAUTH: no check
	}
	if err != nil {
		return "", err
	}
	if r.Buffered() > 0 {
		return "", errors.New("the server sent more than the replies to AUTH and ROLE")
	}
	a, _ := v.([]any)
	if len(a) < 3 {
		return "", nil
	}
	if kind, _ := a[0].(string); kind != "slave" && kind != "replica" {
		return "", nil
	}
	host, _ := a[1].(string)
	port, ok := a[2].(int64)
	if host == "" || !ok {
		return "", nil
	}
	return net.JoinHostPort(host, strconv.FormatInt(port, 10)), nil
}

// appendCommand appends args as a command in the Redis protocol (an
// array of bulk strings).
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// replyError is an error reply of the server (-ERR …, -NOPERM …).
type replyError string

func (e replyError) Error() string { return string(e) }

func isReplyError(err error) bool {
	var re replyError
	return errors.As(err, &re)
}

// readReply reads one RESP2 reply: a string, an int64, nil, or a []any of
// them; an error reply is returned as a replyError. depth counts the
// arrays it is in.
func readReply(r *bufio.Reader, depth int) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			err = errors.New("reply line too long")
		}
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], string(line[1:len(line)-2])
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, replyError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$', '*':
		n, err := strconv.Atoi(body)
		switch {
		case err != nil:
			return nil, fmt.Errorf("malformed length %q", body)
		case n < 0:
			return nil, nil
		case n > maxReplyBytes:
			return nil, fmt.Errorf("reply of %d, more than %d", n, maxReplyBytes)
		}
		if kind == '$' {
			b := make([]byte, n+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, err
			}
			return string(b[:n]), nil
		}
		if depth >= 3 {
			return nil, errors.New("reply nested too deep")
		}
		a := make([]any, 0, min(n, 16))
		for range n {
			v, err := readReply(r, depth+1)
			if err != nil && !isReplyError(err) {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", kind)
}
