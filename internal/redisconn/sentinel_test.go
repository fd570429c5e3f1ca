package redisconn

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestDialError: a data server's failed dial reaches go-redis as the
// dial error it retries; a failure to ask the sentinels becomes one error
// naming each, which it does not.
func TestDialError(t *testing.T) {
	refused := func(port int) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	data := refused(6379)
	s1, s2 := &dialFailure{err: refused(26379)}, &dialFailure{err: refused(26380)}
	// As go-redis reports that no sentinel answered.
	noneAnswered := fmt.Errorf("redis: all sentinels specified in configuration are unreachable: %w", errors.Join(s1, s2))
	other := errors.New("ERR some server error")
	for _, tt := range []struct {
		name      string
		in        error
		want      string // the message
		same      error  // the error expected as it is, when set
		retryable bool   // a *net.OpError go-redis retries is reachable
	}{
		{name: "no error", in: nil},
		{name: "a data server's dial", in: &dialFailure{err: data}, same: data, retryable: true},
		{name: "another error", in: other, same: other},
		{name: "no sentinel answered", in: noneAnswered,
			want: "redis: sentinels unreachable: dial tcp 127.0.0.1:26379: connect: connection refused; dial tcp 127.0.0.1:26380: connect: connection refused"},
		{name: "one refused, one without the master", in: fmt.Errorf("redis: all sentinels specified in configuration are unreachable: %w", errors.Join(s1, errors.New("redis: nil"))),
			want: "redis: sentinels unreachable: dial tcp 127.0.0.1:26379: connect: connection refused; redis: nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := dialError(tt.in)
			switch {
			case tt.in == nil:
				if got != nil {
					t.Fatalf("dialError(nil) = %v", got)
				}
				return
			case tt.same != nil:
				if got != tt.same {
					t.Fatalf("dialError = %#v, want %#v as it is", got, tt.same)
				}
			default:
				var su *SentinelsUnreachable
				if !errors.As(got, &su) || got.Error() != tt.want {
					t.Fatalf("dialError = %v, want a SentinelsUnreachable %q", got, tt.want)
				}
			}
			var op *net.OpError
			if errors.As(got, &op) != tt.retryable {
				t.Fatalf("a dial error go-redis retries is reachable in %v: %v, want %v", got, !tt.retryable, tt.retryable)
			}
		})
	}
}
