//go:build e2e

package redisconn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redisconn"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestOpen(t *testing.T) {
	const secret = "correct-horse-battery"
	srv := redistest.Start(t, "--requirepass", secret)
	ctx := context.Background()

	client, err := redisconn.Open(ctx, redisconn.Options{URL: "redis://" + srv.Addr + "/3", Password: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// The URL's /3 selected database 3.
	if n := client.Do(ctx, "CLIENT", "INFO").String(); !strings.Contains(n, "db=3") {
		t.Fatalf("CLIENT INFO = %s, want db=3", n)
	}

	for _, tt := range []struct {
		name     string
		password string
		want     string
	}{
		{name: "wrong password", password: "not-the-" + secret, want: "WRONGPASS"},
		{name: "no password", password: "", want: "NOAUTH"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := redisconn.Open(ctx, redisconn.Options{URL: "redis://" + srv.Addr, Password: tt.password})
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), "cannot reach Redis at "+srv.Addr) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open() = %q, want it to name %s and say %s", err, srv.Addr, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open() error carries a password: %q", err)
			}
		})
	}
}

func TestOpenACLUser(t *testing.T) {
	srv := redistest.Start(t, "--user", "portcullis", "on", ">app-pass", "~portcullis:*", "&portcullis:*", "+@all")
	ctx := context.Background()
	client, err := redisconn.Open(ctx, redisconn.Options{URL: "redis://portcullis@" + srv.Addr, Password: "app-pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if who, err := client.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "portcullis" {
		t.Fatalf("ACL WHOAMI = %q, %v", who, err)
	}
	// The user may write only under its prefix.
	if err := client.Set(ctx, "portcullis:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Set(ctx, "other:k", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET outside the prefix = %v, want NOPERM", err)
	}
}

// writeCerts writes a CA and a server certificate it signs, for the name
// redis.test and the address 127.0.0.1, as PEM files in dir.
func writeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "EC PRIVATE KEY", keyDER)
}

func TestOpenTLS(t *testing.T) {
	caFile, certFile, keyFile := writeCerts(t, t.TempDir())
	srv := redistest.StartTLS(t, certFile, keyFile)
	_, port, _ := net.SplitHostPort(srv.Addr)
	ctx := context.Background()
	tests := []struct {
		name string
		o    redisconn.Options
		want string // empty: Open succeeds
	}{
		{name: "ca file, address in the certificate", o: redisconn.Options{URL: "rediss://" + srv.Addr, TLS: redisconn.TLSOptions{CAFile: caFile}}},
		{name: "ca file and server name", o: redisconn.Options{URL: "rediss://" + srv.Addr, TLS: redisconn.TLSOptions{CAFile: caFile, ServerName: "redis.test"}}},
		{name: "wrong server name", o: redisconn.Options{URL: "rediss://" + srv.Addr, TLS: redisconn.TLSOptions{CAFile: caFile, ServerName: "other.test"}}, want: "certificate is valid for redis.test, not other.test"},
		{name: "system roots do not know the CA", o: redisconn.Options{URL: "rediss://" + srv.Addr}, want: "certificate signed by unknown authority"},
		{name: "insecure skip verify", o: redisconn.Options{URL: "rediss://localhost:" + port, TLS: redisconn.TLSOptions{InsecureSkipVerify: true}}},
		{name: "clear text to a TLS port", o: redisconn.Options{URL: "redis://" + srv.Addr, ReadTimeout: 300 * time.Millisecond}, want: "cannot reach Redis at " + srv.Addr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Time enough for a first handshake that loads the system
			// roots, under -race on a loaded machine: a deadline would hide
			// the error the case is about.
			tt.o.DialTimeout = 10 * time.Second
			c, err := redisconn.Open(ctx, tt.o)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// On Sentinel the client finds the primary through the sentinels, and
// after the primary is killed it reaches the promoted replica: what was
// written (and replicated) before is there, and writes work again.
func TestSentinelFailover(t *testing.T) {
	const secret = "sentinel-data-pass"
	d := redistest.StartSentinel(t, "--requirepass", secret, "--masterauth", secret)
	ctx := context.Background()
	o := redisconn.Options{
		Sentinel:    redisconn.SentinelOptions{MasterName: redistest.SentinelMaster, Addresses: d.Addrs()},
		Password:    secret,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
	}
	client, err := redisconn.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range 100 {
		if err := client.Set(ctx, fmt.Sprintf("before:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	d.WaitReplicated(ctx, secret)

	took := d.KillPrimary()
	t.Logf("replica promoted %v after the kill", took.Round(time.Millisecond))

	// Within a few tries (the client's retries, and the failover client
	// asking the sentinels again), writes reach the new primary.
	awaitWrite(t, client, "after")
	for i := range 100 {
		if v, err := client.Get(ctx, fmt.Sprintf("before:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("before:%d after the failover = %d, %v", i, v, err)
		}
	}
	if a, _ := d.PrimaryAddr(ctx); a != d.Replica.Addr {
		t.Fatalf("the sentinels name %s, want the promoted replica %s", a, d.Replica.Addr)
	}
}

// awaitWrite sets key within 15 s of tries, after a failover.
func awaitWrite(t *testing.T, client redis.UniversalClient, key string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := client.Set(context.Background(), key, "1", 0).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write reached the new primary within 15s: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // waiting on real processes
	}
}

// TestSentinelLaggingSentinel: the client's sentinel is cut off from the
// others and names the old primary for the whole test, while the
// deployment fails over and the old primary comes back as a replica of
// the new one (the worst case of a sentinel that lags). Writes, a
// MULTI/EXEC transaction and a script still reach the new primary, and
// no connection of the client stays on the replica: go-redis dials what
// its sentinel names, and each connection is checked to be to the
// primary before it is used.
func TestSentinelLaggingSentinel(t *testing.T) {
	const secret, appPass = "sentinel-data-pass", "app-pass"
	d := redistest.StartSentinel(t, "--requirepass", secret, "--masterauth", secret,
		"--user", "portcullis", "on", ">"+appPass, "~*", "&*", "+@all")
	lagging := d.StartPartitionedSentinel()
	ctx := context.Background()
	o := redisconn.Options{
		Sentinel:    redisconn.SentinelOptions{MasterName: redistest.SentinelMaster, Addresses: []string{lagging.Addr}},
		Username:    "portcullis",
		Password:    appPass,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
	}
	client, err := redisconn.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	old, promoted := d.Primary, d.Replica
	d.KillPrimary() // returns once old is back, as a replica of promoted
	lc := redis.NewSentinelClient(&redis.Options{Addr: lagging.Addr, DisableIdentity: true})
	defer lc.Close()
	if a, err := lc.GetMasterAddrByName(ctx, redistest.SentinelMaster).Result(); err != nil || net.JoinHostPort(a[0], a[1]) != old.Addr {
		t.Fatalf("the partitioned sentinel names %v (%v), want the old primary %s: the test no longer shows a lagging sentinel", a, err, old.Addr)
	}

	// The first write may meet the connection to the killed server (go-redis
	// retries it); then each kind of write succeeds at once.
	awaitWrite(t, client, "after")
	for i := range 20 {
		if err := client.Set(ctx, fmt.Sprintf("write:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if _, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "tx:n")
		p.Set(ctx, "tx:v", "1", 0)
		return nil
	}); err != nil {
		t.Fatalf("MULTI/EXEC: %v", err)
	}
	script := redis.NewScript(`return redis.call("INCRBY", KEYS[1], ARGV[1])`)
	if n, err := script.Run(ctx, client, []string{"script:n"}, 5).Int(); err != nil || n != 5 {
		t.Fatalf("script = %d, %v, want 5", n, err)
	}

	pc := redis.NewClient(&redis.Options{Addr: promoted.Addr, Password: secret, DisableIdentity: true})
	defer pc.Close()
	for _, k := range []string{"before", "after", "write:19", "tx:v", "script:n"} {
		if n, err := pc.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("%s on the new primary: exists %d, %v", k, n, err)
		}
	}
	// No connection of the client's user is open on the replica.
	rc := redis.NewClient(&redis.Options{Addr: old.Addr, Password: secret, DisableIdentity: true})
	defer rc.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		list, err := rc.ClientList(ctx).Result()
		if err == nil && !strings.Contains(list, "user=portcullis ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client still has connections to the replica %s: %v\n%s", old.Addr, err, list)
		}
		time.Sleep(50 * time.Millisecond) // polling a real process
	}
}

// On Cluster the client spreads keys over every primary, and Ping checks
// each of them.
func TestCluster(t *testing.T) {
	const secret = "cluster-pass"
	c := redistest.StartCluster(t, 3, "--requirepass", secret)
	ctx := context.Background()
	o := redisconn.Options{Cluster: redisconn.ClusterOptions{Addresses: c.Addrs()[:1]}, Password: secret}
	client, err := redisconn.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range 300 {
		if err := client.Set(ctx, fmt.Sprintf("k:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Every node holds some of them: the keys are spread by slot.
	for _, n := range c.Nodes {
		nc := redis.NewClient(&redis.Options{Addr: n.Addr, Password: secret, DisableIdentity: true})
		size, err := nc.DBSize(ctx).Result()
		nc.Close()
		if err != nil || size == 0 {
			t.Errorf("node %s holds %d keys (%v), want some", n.Addr, size, err)
		}
	}
	// A node down is named by Ping: every primary must answer.
	c.Nodes[2].Stop()
	err = redisconn.Ping(ctx, client, o)
	if err == nil || !strings.Contains(err.Error(), "the cluster of "+c.Nodes[0].Addr) || strings.Contains(err.Error(), secret) {
		t.Fatalf("Ping with a primary down = %v, want an error naming the cluster, without the password", err)
	}
}

// watch runs a Watcher on client until the test ends and returns what it
// reports: each failover as "from -> to", each check's result, and each
// log record's message.
func watch(t *testing.T, client redis.UniversalClient, o redisconn.Options) (failovers <-chan string, checks <-chan bool, logs <-chan string) {
	t.Helper()
	f, c, l := make(chan string, 10), make(chan bool, 1000), make(chan string, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		redisconn.Watcher{
			Interval:   100 * time.Millisecond,
			OnFailover: func(from, to string) { f <- from + " -> " + to },
			OnCheck: func(up bool) {
				select {
				case c <- up:
				default:
				}
			},
			Logger: slog.New(chanHandler(l)),
		}.Run(ctx, client, o)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return f, c, l
}

// chanHandler is a slog.Handler that sends each record's message on a
// channel, dropping it when the channel is full.
type chanHandler chan<- string

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default:
	}
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }

// awaitChecks waits for n checks that found Redis up.
func awaitChecks(t *testing.T, checks <-chan bool, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for n > 0 {
		select {
		case up := <-checks:
			if up {
				n--
			}
		case <-timeout:
			t.Fatalf("the watcher did not find Redis up %d more times within 30s", n)
		}
	}
}

// awaitFailover waits for failovers to report want, and then for a few
// more checks without another report.
func awaitFailover(t *testing.T, failovers <-chan string, checks <-chan bool, want string) {
	t.Helper()
	select {
	case got := <-failovers:
		if got != want {
			t.Errorf("failover %s, want %s", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no failover reported within 30s, want %s", want)
	}
	awaitChecks(t, checks, 5)
	select {
	case s := <-failovers:
		t.Errorf("one failover reported twice, or one that did not happen: %s", s)
	default:
	}
}

// A Watcher of a Sentinel deployment reports the primary's failover once,
// from the killed primary to the promoted replica, and finds Redis up
// again after it.
func TestWatcherSeesSentinelFailover(t *testing.T) {
	const secret = "sentinel-data-pass"
	d := redistest.StartSentinel(t, "--requirepass", secret, "--masterauth", secret)
	o := redisconn.Options{
		Sentinel:    redisconn.SentinelOptions{MasterName: redistest.SentinelMaster, Addresses: d.Addrs()},
		Password:    secret,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
	}
	client, err := redisconn.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	failovers, checks, logs := watch(t, client, o)
	// The watcher listens before the kill, or it could not tell a switch.
	for listening := false; !listening; {
		select {
		case msg := <-logs:
			listening = strings.Contains(msg, "listening to a sentinel")
		case <-time.After(30 * time.Second):
			t.Fatal("the watcher did not listen to a sentinel within 30s")
		}
	}
	awaitChecks(t, checks, 1)

	d.KillPrimary()
	awaitFailover(t, failovers, checks, d.Primary.Addr+" -> "+d.Replica.Addr)
}

// A Watcher of a Cluster reports a replica's takeover of its primary's
// slots once, from the old primary to the replica.
func TestWatcherSeesClusterFailover(t *testing.T) {
	const secret = "cluster-pass"
	c := redistest.StartCluster(t, 3, "--requirepass", secret)
	replica := c.AddReplica(t, 1)
	o := redisconn.Options{Cluster: redisconn.ClusterOptions{Addresses: c.Addrs()[:1]}, Password: secret}
	client, err := redisconn.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	failovers, checks, _ := watch(t, client, o)
	// Two checks: the first read of CLUSTER NODES, which follows the first
	// check, is done.
	awaitChecks(t, checks, 2)

	c.Failover(t, replica)
	awaitFailover(t, failovers, checks, c.Nodes[1].Addr+" -> "+replica.Addr)
}

// TestSentinelsDownFailFast: with every sentinel stopped, a command that
// needs a connection fails within a second, naming the sentinels and
// why (their ports refuse at once: nothing is worth retrying), rather
// than after seconds of retries with "context deadline exceeded". The
// primary itself still runs, and a connection already open still reaches
// it.
func TestSentinelsDownFailFast(t *testing.T) {
	d := redistest.StartSentinel(t)
	o := redisconn.Options{Sentinel: redisconn.SentinelOptions{MasterName: redistest.SentinelMaster, Addresses: d.Addrs()}}
	ctx := context.Background()
	open, err := redisconn.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	d.StopSentinels()
	if err := open.Set(ctx, "k", "through a connection already open", time.Minute).Err(); err != nil {
		t.Fatalf("a command on a connection opened before the sentinels stopped: %v", err)
	}

	fresh, err := redisconn.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for i := range 3 {
		start := time.Now()
		err := fresh.Set(ctx, "k", "v", time.Minute).Err()
		took := time.Since(start)
		var su *redisconn.SentinelsUnreachable
		if !errors.As(err, &su) || !strings.Contains(err.Error(), "redis: sentinels unreachable: ") || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("a command with every sentinel down = %v, want the sentinels named unreachable", err)
		}
		for _, s := range d.Sentinels {
			if !strings.Contains(err.Error(), s.Addr) {
				t.Errorf("the error does not name the sentinel %s: %v", s.Addr, err)
			}
		}
		if took > time.Second {
			t.Errorf("command %d failed after %v, want within a second", i+1, took)
		}
	}
	start := time.Now()
	if err := redisconn.Ping(ctx, fresh, o); err == nil || !strings.Contains(err.Error(), "sentinels unreachable") || time.Since(start) > time.Second {
		t.Fatalf("Ping with every sentinel down = %v after %v, want the sentinels named within a second", err, time.Since(start))
	}
}
