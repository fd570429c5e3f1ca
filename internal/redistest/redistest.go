// Package redistest runs a real redis-server for a test: on a free port of
// 127.0.0.1, with persistence off, in the test's temporary folder, stopped
// at the test's end. Tests that use it carry the e2e build tag, since they
// need redis-server (scripts/install-redis.sh, run by `make tools`,
// installs it).
//
//	srv := redistest.Start(t)
//	client := srv.Client(t) // or redis.NewClient(&redis.Options{Addr: srv.Addr})
//
// A missing redis-server fails the test, never skips it: a skipped test
// would pass CI without testing anything.
package redistest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
	"github.com/redis/go-redis/v9"
)

// startTimeout bounds waiting for redis-server to answer PING.
const startTimeout = 10 * time.Second

// Server is a redis-server process started by [Start].
type Server struct {
	// Addr is the host:port the server listens on, on 127.0.0.1; it stays
	// the same across [Server.Restart].
	Addr string

	t    testing.TB
	tls  bool
	bin  string
	dir  string
	args []string
	log  syncbuf.Buffer // the server's output

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// Start starts a redis-server on a free port and waits until it answers
// PING. extra are more server arguments, such as "--requirepass", "pw".
// The server is stopped when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, false, extra)
}

// StartTLS is [Start] for a server that speaks only TLS, with the
// certificate and key in the given PEM files (clients are not asked for
// certificates).
func StartTLS(t testing.TB, certFile, keyFile string, extra ...string) *Server {
	t.Helper()
	return start(t, true, append([]string{
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-auth-clients", "no",
	}, extra...))
}

func start(t testing.TB, useTLS bool, extra []string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH: run `make tools` (scripts/install-redis.sh installs Debian's redis-server package): %v", err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), tls: useTLS}
	t.Cleanup(s.stop)
	// A free port can be taken between finding it and redis binding it:
	// try a few.
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		listen := []string{"--port", strconv.Itoa(port)}
		if useTLS {
			listen = []string{"--port", "0", "--tls-port", strconv.Itoa(port)}
		}
		s.args = append(append(listen,
			"--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no",
			"--dir", s.dir, "--daemonize", "no",
		), extra...)
		if last = s.start(); last == nil {
			return s
		}
		if !strings.Contains(last.Error(), "in use") {
			break // not a lost race for the port: trying again would not help
		}
	}
	t.Fatalf("redistest: %v", last)
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server and waits for it to answer PING.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		if ping(s.Addr, s.tls) == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited before answering PING on %s:\n%s", s.Addr, s.log.String())
		case <-time.After(20 * time.Millisecond): // polling a real process
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server did not answer PING on %s within %v:\n%s", s.Addr, startTimeout, s.log.String())
		}
	}
}

// ping sends PING in the Redis protocol and wants PONG (or NOAUTH, which
// a server started with --requirepass answers: it is up). Over TLS it
// does not check the certificate: it only asks whether the server is up.
func ping(addr string, useTLS bool) error {
	var c net.Conn
	var err error
	if useTLS {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a liveness probe of a test server
		c, err = d.Dial("tcp", addr)
	} else {
		c, err = net.DialTimeout("tcp", addr, time.Second)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH") {
		return nil
	}
	return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
}

// Stop kills the server, as a crash would, and waits until it has exited.
// The test fails if it was not running.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if !running {
		s.t.Fatal("redistest: Stop: the server is not running")
	}
	s.stop()
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill() // SIGKILL ends a paused process too
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Pause freezes the server (SIGSTOP), as a hung or overloaded Redis: the
// kernel still accepts connections, but nothing answers. [Server.Resume]
// thaws it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume thaws a server [Server.Pause] froze.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: %v: the server is not running", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v: %v", sig, err)
	}
}

// Restart starts the server again on the same port, empty (persistence is
// off), and waits until it answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.stop()
	var err error
	for deadline := time.Now().Add(startTimeout); ; {
		if err = s.start(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the port may take a moment to be free
	}
	s.t.Fatalf("redistest: restarting: %v", err)
}

// restartReplicaOf starts the stopped server again, empty, as a replica
// of primary (host:port), and waits until it answers PING.
func (s *Server) restartReplicaOf(primary string) {
	s.t.Helper()
	host, port, _ := net.SplitHostPort(primary)
	var args []string
	for i := 0; i < len(s.args); i++ {
		if s.args[i] == "--replicaof" && i+2 < len(s.args) {
			i += 2
			continue
		}
		args = append(args, s.args[i])
	}
	s.args = append(args, "--replicaof", host, port)
	s.Restart()
}

// Client returns a client of the server with short timeouts (half a
// second) and one retry, so that a test of an outage sees errors quickly.
// It is closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:            s.Addr,
		DialTimeout:     500 * time.Millisecond,
		ReadTimeout:     500 * time.Millisecond,
		WriteTimeout:    500 * time.Millisecond,
		DialerRetries:   1,
		MaxRetries:      1,
		DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// Log returns what the server has written so far, for failure messages.
func (s *Server) Log() string { return s.log.String() }
