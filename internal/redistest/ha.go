package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// haTimeout bounds waiting for a Sentinel deployment or a Cluster to be
// ready, and for a failover.
const haTimeout = 30 * time.Second

// sentinelDownAfter is the sentinels' down-after-milliseconds: how long a
// killed primary goes unnoticed before the failover begins.
const sentinelDownAfter = 3 * time.Second

// Sentinel is a Redis Sentinel deployment started by [StartSentinel]: a
// primary, a replica of it and three sentinels that monitor it under
// [SentinelMaster], with a quorum of two.
type Sentinel struct {
	// Primary and Replica are the data servers as started; after a
	// failover the replica is the primary ([Sentinel.PrimaryAddr] tells,
	// and [Sentinel.Roles]).
	Primary, Replica *Server
	// Sentinels are the three sentinels.
	Sentinels []*Server

	t        testing.TB
	primary  *Server // the primary now: Primary or Replica
	password string  // the data servers' (--masterauth), or ""
}

// SentinelMaster is the name the sentinels of [StartSentinel] monitor the
// primary under.
const SentinelMaster = "portcullis-test"

// StartSentinel starts a primary, a replica and three sentinels, all on
// free ports of 127.0.0.1, and waits until the sentinels know the replica
// and each other (before that a failover has no candidate). The sentinels
// judge the primary down after one second without an answer. extra are
// more arguments of both data servers, such as "--requirepass", "pw"
// (then give "--masterauth", "pw" too).
func StartSentinel(t testing.TB, extra ...string) *Sentinel {
	t.Helper()
	// A replica (the first, or one started again) copies the primary at
	// once, rather than after the five seconds Redis waits by default for
	// more replicas to share the copy.
	extra = append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
	primary := Start(t, extra...)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := Start(t, append([]string{"--replicaof", host, port}, extra...)...)
	d := &Sentinel{Primary: primary, Replica: replica, t: t, primary: primary}
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	d.waitLinkUp(ctx, replica, primary)
	d.password = argValue(extra, "--masterauth")
	for range 3 {
		d.Sentinels = append(d.Sentinels, startSentinel(t, primary.Addr, d.password))
	}
	d.waitReady()
	return d
}

// StartWithReplica starts a primary and a replica of it (no sentinels),
// and waits until the replica has copied the primary. extra are more
// arguments of both servers.
func StartWithReplica(t testing.TB, extra ...string) (primary, replica *Server) {
	t.Helper()
	extra = append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
	primary = Start(t, extra...)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica = Start(t, append([]string{"--replicaof", host, port}, extra...)...)
	d := &Sentinel{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	d.waitLinkUp(ctx, replica, primary)
	return primary, replica
}

// argValue returns the value after name in args, or "".
func argValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// startSentinel runs one sentinel monitoring primary. A sentinel rewrites
// its configuration file, so each gets its own in its own folder.
func startSentinel(t testing.TB, primary, password string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH: run `make tools` (scripts/install-redis.sh installs Debian's redis-server and redis-sentinel packages): %v", err)
	}
	host, port, _ := net.SplitHostPort(primary)
	var last error
	for range 5 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{t: t, bin: bin, dir: t.TempDir(), Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))}
		conf := []string{
			"port " + strconv.Itoa(p),
			"bind 127.0.0.1",
			"daemonize no",
			"dir " + s.dir,
			fmt.Sprintf("sentinel monitor %s %s %s 2", SentinelMaster, host, port),
			// A primary silent this long is down. Shorter, a loaded
			// two-core machine (a Redis or a sentinel not scheduled for a
			// second) makes the sentinels fail over a primary that is up:
			// a second, unplanned failover in a test of one.
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, sentinelDownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s 5000", SentinelMaster),
			fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster),
		}
		if password != "" {
			conf = append(conf, fmt.Sprintf("sentinel auth-pass %s %s", SentinelMaster, password))
		}
		file := filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(file, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.args = []string{file, "--sentinel"}
		t.Cleanup(s.stop)
		if last = s.start(); last == nil {
			return s
		}
		if !strings.Contains(last.Error(), "in use") {
			break
		}
	}
	t.Fatalf("redistest: starting a sentinel: %v", last)
	return nil
}

// StartPartitionedSentinel starts one more sentinel, as one cut off by a
// network partition from the data servers and the other sentinels while
// clients still reach it: it monitors the primary of now under
// [SentinelMaster] but authenticates to the data servers with a wrong
// password, so it never learns of a failover (nor of the other sentinels,
// which learn of it through the data servers, and so never do), and it
// names this primary to whoever asks, whatever happens. It is not one of
// [Sentinel.Sentinels]: the deployment's failovers do not wait for it.
// The deployment must have a password (--masterauth).
func (d *Sentinel) StartPartitionedSentinel() *Server {
	d.t.Helper()
	if d.password == "" {
		d.t.Fatal("redistest: StartPartitionedSentinel needs a deployment with a password (--requirepass, --masterauth)")
	}
	primary, _ := d.Roles()
	return startSentinel(d.t, primary.Addr, "not-"+d.password)
}

// sentinelClient returns a client of one sentinel, closed when the test
// ends.
func (d *Sentinel) sentinelClient(s *Server) *redis.SentinelClient {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, DisableIdentity: true})
	d.t.Cleanup(func() { c.Close() })
	return c
}

// waitReady waits until every sentinel sees the replica and the two other
// sentinels.
func (d *Sentinel) waitReady() {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	for _, s := range d.Sentinels {
		c := d.sentinelClient(s)
		for {
			m, err := c.Master(ctx, SentinelMaster).Result()
			if err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2" {
				break
			}
			if ctx.Err() != nil {
				d.t.Fatalf("redistest: sentinel %s not ready within %v: %v %v\n%s", s.Addr, haTimeout, m, err, s.Log())
			}
			time.Sleep(100 * time.Millisecond) // polling real processes
		}
	}
}

// Addrs returns the sentinels' addresses.
func (d *Sentinel) Addrs() []string {
	var out []string
	for _, s := range d.Sentinels {
		out = append(out, s.Addr)
	}
	return out
}

// PrimaryAddr returns the address the sentinels name as the primary now.
func (d *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	a, err := d.sentinelClient(d.Sentinels[0]).GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(a[0], a[1]), nil
}

// WaitReplicated waits until the replica has every write the primary
// took so far, so that a failover loses nothing: it reads the primary's
// replication offset and waits until the replica has acknowledged it.
// (WAIT on a connection of its own would wait for nothing: WAIT counts
// the writes of the connection it is sent on.)
func (d *Sentinel) WaitReplicated(ctx context.Context, password string) {
	d.t.Helper()
	primary, replica := d.Roles()
	c := redis.NewClient(&redis.Options{Addr: primary.Addr, Password: password, DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, haTimeout)
	defer cancel()
	info, err := c.Info(ctx, "replication").Result()
	want, ok := infoInt(info, "master_repl_offset")
	if err != nil || !ok {
		d.t.Fatalf("redistest: INFO replication on the primary: %v\n%s", err, info)
	}
	for {
		info, err = c.Info(ctx, "replication").Result()
		if acked, ok := replicaOffset(info, replica.Addr); err == nil && ok && acked >= want {
			return
		}
		if ctx.Err() != nil {
			d.t.Fatalf("redistest: the replica did not acknowledge offset %d within %v: %v\n%s", want, haTimeout, err, info)
		}
		time.Sleep(20 * time.Millisecond) // polling real processes
	}
}

// infoInt returns the integer field name of an INFO answer.
func infoInt(info, name string) (int64, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// replicaOffset returns the offset the replica at addr acknowledged, from
// a primary's INFO replication ("slaveN:ip=…,port=…,state=online,offset=…").
func replicaOffset(info, addr string) (int64, bool) {
	host, port, _ := net.SplitHostPort(addr)
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, ":ip=") {
			continue
		}
		_, fields, _ := strings.Cut(line, ":")
		kv := map[string]string{}
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		if kv["ip"] == host && kv["port"] == port && kv["state"] == "online" {
			n, err := strconv.ParseInt(kv["offset"], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// Failover runs SENTINEL FAILOVER, the graceful failover (what Redis
// charts run when the primary's pod stops): the sentinels promote the
// replica while the primary still runs, then make the old primary a
// replica of the new one. It waits until the sentinels name the replica
// as the primary, and returns how long that took; then until the old
// primary has copied the new one and every sentinel knows it as its
// replica, so that writes that wait for a replica work again and the
// next failover has a candidate.
func (d *Sentinel) Failover() time.Duration {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	old, next := d.Roles()
	start := time.Now()
	if err := d.sentinelClient(d.Sentinels[0]).Failover(ctx, SentinelMaster).Err(); err != nil {
		d.t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	var took time.Duration
	for {
		if a, err := d.PrimaryAddr(ctx); err == nil && a == next.Addr {
			took = time.Since(start)
			break
		}
		if ctx.Err() != nil {
			d.t.Fatalf("redistest: the sentinels did not promote %s within %v of SENTINEL FAILOVER", next.Addr, haTimeout)
		}
		time.Sleep(20 * time.Millisecond) // polling real processes
	}
	d.primary = next
	d.waitLinkUp(ctx, old, next)
	d.waitKnownReplica(ctx, old, next)
	return took
}

// waitKnownReplica waits until every sentinel names primary and knows
// replica, unflagged, as its replica.
func (d *Sentinel) waitKnownReplica(ctx context.Context, replica, primary *Server) {
	d.t.Helper()
	rhost, rport, _ := net.SplitHostPort(replica.Addr)
	for _, s := range d.Sentinels {
		c := d.sentinelClient(s)
		for {
			a, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
			named := err == nil && len(a) == 2 && net.JoinHostPort(a[0], a[1]) == primary.Addr
			known := false
			if replicas, err := c.Replicas(ctx, SentinelMaster).Result(); named && err == nil {
				for _, r := range replicas {
					if r["ip"] == rhost && r["port"] == rport && r["flags"] == "slave" && r["master-link-status"] == "ok" {
						known = true
					}
				}
			}
			if known {
				break
			}
			if ctx.Err() != nil {
				d.t.Fatalf("redistest: sentinel %s does not know %s as a replica of %s within %v", s.Addr, replica.Addr, primary.Addr, haTimeout)
			}
			time.Sleep(100 * time.Millisecond) // polling real processes
		}
	}
}

// StopSentinels kills every sentinel (SIGKILL). The data servers keep
// running; a client that has to ask the sentinels for the primary (a new
// connection) can no longer.
func (d *Sentinel) StopSentinels() {
	d.t.Helper()
	for _, s := range d.Sentinels {
		s.Stop()
	}
}

// Roles returns the data server that is the primary now, after the
// failovers of [Sentinel.Failover] and [Sentinel.KillPrimary], and the
// other.
func (d *Sentinel) Roles() (primary, replica *Server) {
	if d.primary == d.Primary {
		return d.Primary, d.Replica
	}
	return d.Replica, d.Primary
}

// KillPrimary kills the primary (SIGKILL) and waits until the sentinels
// have promoted the replica; it returns how long the promotion took.
// Then, once every sentinel names the new primary, it starts the killed
// server again, empty, as a replica of the new primary (as a restarted
// pod joins again), and waits until it has copied it and the sentinels
// know it, so that writes that wait for a replica work again.
func (d *Sentinel) KillPrimary() time.Duration {
	d.t.Helper()
	killed, next := d.Roles()
	start := time.Now()
	killed.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	var took time.Duration
	for {
		if a, err := d.PrimaryAddr(ctx); err == nil && a == next.Addr {
			took = time.Since(start)
			break
		}
		if ctx.Err() != nil {
			d.t.Fatalf("redistest: the sentinels did not promote %s within %v after %s was killed", next.Addr, haTimeout, killed.Addr)
		}
		time.Sleep(50 * time.Millisecond) // polling real processes
	}
	d.primary = next
	// Every sentinel names the new primary before the killed server is
	// back at its address: a sentinel that has not heard of the switch
	// yet would name the old primary, now up again as a replica, and a
	// client asking it would follow it there (go-redis's failover client
	// switches to whatever its sentinel names) and write to a replica.
	d.waitNamed(ctx, next)
	killed.restartReplicaOf(next.Addr)
	d.waitLinkUp(ctx, killed, next)
	d.waitKnownReplica(ctx, killed, next)
	return took
}

// waitNamed waits until every sentinel names primary as the primary.
func (d *Sentinel) waitNamed(ctx context.Context, primary *Server) {
	d.t.Helper()
	for _, s := range d.Sentinels {
		c := d.sentinelClient(s)
		for {
			a, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
			if err == nil && len(a) == 2 && net.JoinHostPort(a[0], a[1]) == primary.Addr {
				break
			}
			if ctx.Err() != nil {
				d.t.Fatalf("redistest: sentinel %s does not name %s as the primary within %v: %v %v", s.Addr, primary.Addr, haTimeout, a, err)
			}
			time.Sleep(50 * time.Millisecond) // polling real processes
		}
	}
}

// waitLinkUp waits until replica copies primary, and primary counts it
// as online: only then does it acknowledge writes (WAIT). After a copy
// without a file (diskless, the default), the primary counts a replica
// online once it has acknowledged something, up to a second later.
func (d *Sentinel) waitLinkUp(ctx context.Context, replica, primary *Server) {
	d.t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr, Password: argValue(replica.args, "--requirepass"), DialTimeout: time.Second, ReadTimeout: time.Second, DisableIdentity: true})
	defer rc.Close()
	pc := redis.NewClient(&redis.Options{Addr: primary.Addr, Password: argValue(primary.args, "--requirepass"), DialTimeout: time.Second, ReadTimeout: time.Second, DisableIdentity: true})
	defer pc.Close()
	host, port, _ := net.SplitHostPort(primary.Addr)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_host:"+host+"\r") && strings.Contains(info, "master_port:"+port+"\r") && strings.Contains(info, "master_link_status:up") {
			pinfo, perr := pc.Info(ctx, "replication").Result()
			if _, online := replicaOffset(pinfo, replica.Addr); perr == nil && online {
				return
			}
			info += pinfo
		}
		if ctx.Err() != nil {
			d.t.Fatalf("redistest: %s did not become an online replica of %s within %v: %v\n%s", replica.Addr, primary.Addr, haTimeout, err, info)
		}
		time.Sleep(20 * time.Millisecond) // polling real processes
	}
}

// Client returns a failover client of the deployment (it asks the
// sentinels for the primary and follows a failover), with short timeouts
// and retries that outlast a promotion. It is closed when the test ends.
func (d *Sentinel) Client(t testing.TB, password string) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:      SentinelMaster,
		SentinelAddrs:   d.Addrs(),
		Password:        password,
		DialTimeout:     500 * time.Millisecond,
		ReadTimeout:     500 * time.Millisecond,
		WriteTimeout:    500 * time.Millisecond,
		MaxRetries:      3,
		MinRetryBackoff: 100 * time.Millisecond,
		MaxRetryBackoff: time.Second,
		DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}
