// Package haproxytest configures a real HAProxy (Debian's haproxy) in
// front of Portcullis replicas as a Kubernetes Service or an ingress puts
// one there: round robin, no affinity unless asked, each replica
// health-checked on /readyz. The end-to-end tests and the load harness (bench/loadtest) run
// it, each with its own process handling:
//
//	bin, err := haproxytest.Binary()
//	cfg := haproxytest.Config{Front: "127.0.0.1:8000", Backends: addrs}.String()
//	// write cfg to a file, then run: bin -f FILE -db
//
// `make tools` (scripts/install-haproxy.sh) installs haproxy.
package haproxytest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// debianPath is where Debian's package puts haproxy, off a non-root PATH.
const debianPath = "/usr/sbin/haproxy"

// Binary returns the path of haproxy: on PATH, else Debian's.
func Binary() (string, error) {
	bin, err := exec.LookPath("haproxy")
	if err == nil {
		return bin, nil
	}
	if _, statErr := os.Stat(debianPath); statErr == nil {
		return debianPath, nil
	}
	return "", fmt.Errorf("haproxytest: haproxy not found: run `make haproxy-tools` (scripts/install-haproxy.sh installs Debian's haproxy): %w", err)
}

// Config is a balancer listening on Front in front of the replicas at
// Backends (host:port each), configured as docs/operations.md advises for
// MCP: with option http-no-delay, so that an event of an SSE stream (a
// server→client request, a notification) is sent as it comes, not held
// for data to follow it (about 200 ms a request otherwise, the client's
// delayed acknowledgement). A replica whose /readyz fails is out of the
// rotation within 200 ms, and back as soon as it answers; a request whose
// connection to a replica fails is sent to another, and a request a
// replica took is never sent twice.
type Config struct {
	Front    string
	Backends []string
	// KeepAlive keeps connections to the replicas open and reuses them
	// between requests (each request is still balanced on its own), as a
	// balancer tuned for throughput does. False sends one request per
	// connection to a replica, so that no reused connection can be closed
	// under a request while a replica stops: what a rolling restart wants.
	KeepAlive bool
	// SessionAffinity sends each request naming a legacy session (its
	// Mcp-Session-Id header) to the replica whose answer gave the session
	// its id, as affinity on Mcp-Session-Id does: how replicas that keep
	// their sessions in memory are run. Other requests are balanced round
	// robin.
	SessionAffinity bool
	// ReplicaHeader, when set, names a header HAProxy adds to every
	// response: the name of the replica that served it, "r0" for
	// Backends[0], "r1" for the next, and so on. A client then tells
	// which replica each of its requests reached.
	ReplicaHeader string
}

// String returns the configuration file's text.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString(`global
  maxconn 2000
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  retries 3
  option redispatch 1
  retry-on conn-failure
  option http-no-delay
`)
	if !c.KeepAlive {
		b.WriteString("  option http-server-close\n")
	}
	fmt.Fprintf(&b, `frontend mcp
  bind %s
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 200ms fall 1 rise 1
`, c.Front)
	if c.SessionAffinity {
		b.WriteString(`  stick-table type string len 128 size 100k expire 30m
  stick match req.hdr(Mcp-Session-Id)
  stick store-response res.hdr(Mcp-Session-Id)
`)
	}
	if c.ReplicaHeader != "" {
		fmt.Fprintf(&b, "  http-response set-header %s %%[srv_name]\n", c.ReplicaHeader)
	}
	for i, be := range c.Backends {
		fmt.Fprintf(&b, "  server r%d %s check\n", i, be)
	}
	return b.String()
}
