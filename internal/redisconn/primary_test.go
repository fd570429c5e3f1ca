package redisconn

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeServer is a data server on the far end of a net.Pipe: it answers
// AUTH and ROLE with the replies it is given and records the commands it
// got.
type fakeServer struct {
	addr string
	auth string // the reply to AUTH, in the protocol; "+OK" when empty
	role string // the reply to ROLE, in the protocol; "" closes instead
	// extra is written after the reply to ROLE.
	extra string

	mu   sync.Mutex
	got  [][]string
	done chan struct{}
}

// addrConn is one end of a net.Pipe that names addr as its remote
// address and records whether it was closed.
type addrConn struct {
	net.Conn
	addr   string
	closed atomic.Bool
}

func (c *addrConn) RemoteAddr() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", c.addr)
	return a
}

func (c *addrConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// connect returns the client's end of a connection to s, served until
// the client closes it.
func (s *fakeServer) connect() *addrConn {
	client, server := net.Pipe()
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		defer server.Close()
		r := bufio.NewReader(server)
		for {
			v, err := readReply(r, 0)
			if err != nil {
				return
			}
			var cmd []string
			for _, a := range v.([]any) {
				cmd = append(cmd, a.(string))
			}
			s.mu.Lock()
			s.got = append(s.got, cmd)
			s.mu.Unlock()
			reply := "+OK"
			switch strings.ToUpper(cmd[0]) {
			case "AUTH":
				if s.auth != "" {
					reply = s.auth
				}
			case "ROLE":
				if s.role == "" {
					return
				}
				reply = s.role + s.extra
			}
			if _, err := server.Write([]byte(reply + "\r\n")); err != nil {
				return
			}
		}
	}()
	return &addrConn{Conn: client, addr: s.addr}
}

func (s *fakeServer) commands() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// RESP2 replies of ROLE.
const (
	rolePrimary = "*3\r\n$6\r\nmaster\r\n:3129\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n7002\r\n$4\r\n3129"
	noPerm      = "-NOPERM User portcullis has no permissions to run the 'role' command"
	unknownCmd  = "-ERR unknown command 'ROLE', with args beginning with: "
)

// roleReplica is ROLE's reply on a replica of addr.
func roleReplica(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "*5\r\n$5\r\nslave\r\n$" + strconv.Itoa(len(host)) + "\r\n" + host + "\r\n:" + port + "\r\n$9\r\nconnected\r\n:3129"
}

// TestCheckPrimary: a connection to the primary is handed over as it is;
// one to a replica is closed, and the primary it names is dialed and
// checked instead; a server that does not let the check ask is taken as
// it is; a failure is a dial error, which go-redis retries.
func TestCheckPrimary(t *testing.T) {
	const a, b, c, d = "10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379"
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tt := range []struct {
		name               string
		username, password string
		servers            []*fakeServer // the first is dialed by go-redis
		down               string        // an address whose dial is refused
		want               string        // the address of the connection returned; empty: an error
		wantErr            string
		wantCommands       [][]string // what the first server got
	}{
		{name: "primary, no password", servers: []*fakeServer{{addr: a, role: rolePrimary}}, want: a,
			wantCommands: [][]string{{"ROLE"}}},
		{name: "primary, password", password: "pw", servers: []*fakeServer{{addr: a, role: rolePrimary}}, want: a,
			wantCommands: [][]string{{"AUTH", "pw"}, {"ROLE"}}},
		{name: "primary, ACL user", username: "portcullis", password: "pw", servers: []*fakeServer{{addr: a, role: rolePrimary}}, want: a,
			wantCommands: [][]string{{"AUTH", "portcullis", "pw"}, {"ROLE"}}},
		{name: "replica: its primary instead", password: "pw",
			servers: []*fakeServer{{addr: a, role: roleReplica(b)}, {addr: b, role: rolePrimary}}, want: b,
			wantCommands: [][]string{{"AUTH", "pw"}, {"ROLE"}}},
		{name: "replica of a replica", servers: []*fakeServer{{addr: a, role: roleReplica(b)}, {addr: b, role: roleReplica(c)}, {addr: c, role: rolePrimary}}, want: c},
		{name: "ROLE refused by the ACL", username: "portcullis", password: "pw", servers: []*fakeServer{{addr: a, role: noPerm}}, want: a},
		{name: "ROLE unknown (renamed away)", servers: []*fakeServer{{addr: a, role: unknownCmd}}, want: a},
		{name: "wrong password: the handshake reports it", password: "wrong",
			servers: []*fakeServer{{addr: a, auth: "-WRONGPASS invalid username-password pair or user is disabled.", role: "-NOAUTH Authentication required."}}, want: a},
		{name: "an answer of another shape", servers: []*fakeServer{{addr: a, role: "+OK"}}, want: a},
		{name: "replicas only", servers: []*fakeServer{{addr: a, role: roleReplica(b)}, {addr: b, role: roleReplica(c)}, {addr: c, role: roleReplica(d)}, {addr: d, role: rolePrimary}},
			wantErr: "redis: no primary within 3 hops: " + a + " is a replica of " + b + " is a replica of " + c + " is a replica of " + d},
		{name: "the named primary is down", servers: []*fakeServer{{addr: a, role: roleReplica(b)}}, down: b, wantErr: "connect: connection refused"},
		{name: "the server closes without answering", servers: []*fakeServer{{addr: a}}, wantErr: "redis: asking " + a + " its ROLE: "},
		{name: "more than was asked", servers: []*fakeServer{{addr: a, role: rolePrimary, extra: "\r\n+OK"}}, wantErr: "the server sent more than the replies to AUTH and ROLE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			servers := map[string]*fakeServer{}
			for _, s := range tt.servers {
				servers[s.addr] = s
			}
			var conns []*addrConn
			p := primaryCheck{
				username: tt.username, password: tt.password, timeout: 5 * time.Second,
				dial: func(_ context.Context, _, addr string) (net.Conn, error) {
					s, ok := servers[addr]
					if addr == tt.down || !ok {
						return nil, refused
					}
					c := s.connect()
					conns = append(conns, c)
					return c, nil
				},
			}
			first, _ := p.dial(context.Background(), "tcp", tt.servers[0].addr)
			got, err := p.checkPrimary(context.Background(), "tcp", first)
			if tt.wantErr != "" {
				var op *net.OpError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &op) || op.Op != "dial" {
					t.Fatalf("checkPrimary() = %v, %v; want a dial error containing %q", got, err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("checkPrimary(): %v", err)
				}
				if got.RemoteAddr().String() != tt.want {
					t.Fatalf("checkPrimary() is to %s, want %s", got.RemoteAddr(), tt.want)
				}
				// The connection is usable: nothing of the check is left
				// unread, and the deadline is cleared.
				go func() { _, _ = got.Write([]byte("*1\r\n$4\r\nPING\r\n")) }()
				if v, err := readReply(bufio.NewReader(got), 0); err != nil || v != "OK" {
					t.Fatalf("a command after the check = %v, %v; want OK", v, err)
				}
			}
			for _, c := range conns {
				if c.closed.Load() == (got == net.Conn(c)) {
					t.Errorf("connection to %s: closed %v, want it closed unless returned", c.addr, c.closed.Load())
				}
				c.Close()
				<-servers[c.addr].done
			}
			if got := tt.servers[0].commands(); tt.wantCommands != nil && (len(got) < len(tt.wantCommands) || !reflect.DeepEqual(got[:len(tt.wantCommands)], tt.wantCommands)) {
				t.Errorf("%s got %q, want %q first", tt.servers[0].addr, got, tt.wantCommands)
			}
		})
	}
}
