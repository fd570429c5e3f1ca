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

// Sentinel is a Redis Sentinel deployment started by [StartSentinel]: a
// primary, a replica of it and three sentinels that monitor it under
// [SentinelMaster], with a quorum of two.
type Sentinel struct {
	// Primary and Replica are the data servers as started; after a
	// failover the replica is the primary ([Sentinel.PrimaryAddr] tells).
	Primary, Replica *Server
	// Sentinels are the three sentinels.
	Sentinels []*Server

	t testing.TB
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
	primary := Start(t, extra...)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := Start(t, append([]string{"--replicaof", host, port}, extra...)...)
	d := &Sentinel{Primary: primary, Replica: replica, t: t}
	password := argValue(extra, "--masterauth")
	for range 3 {
		d.Sentinels = append(d.Sentinels, startSentinel(t, primary.Addr, password))
	}
	d.waitReady()
	return d
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
			fmt.Sprintf("sentinel down-after-milliseconds %s 1000", SentinelMaster),
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
// took so far (WAIT 1 on the primary), so that a failover loses nothing.
func (d *Sentinel) WaitReplicated(ctx context.Context, password string) {
	d.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: d.Primary.Addr, Password: password, DisableIdentity: true})
	defer c.Close()
	n, err := c.Wait(ctx, 1, haTimeout).Result()
	if err != nil || n < 1 {
		d.t.Fatalf("redistest: WAIT 1 on the primary: %d replicas, %v", n, err)
	}
}

// KillPrimary kills the primary (SIGKILL) and waits until the sentinels
// have promoted the replica. It returns how long the promotion took.
func (d *Sentinel) KillPrimary() time.Duration {
	d.t.Helper()
	old := d.Primary.Addr
	start := time.Now()
	d.Primary.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	for {
		if a, err := d.PrimaryAddr(ctx); err == nil && a == d.Replica.Addr {
			return time.Since(start)
		}
		if ctx.Err() != nil {
			d.t.Fatalf("redistest: the sentinels did not promote %s within %v after %s was killed", d.Replica.Addr, haTimeout, old)
		}
		time.Sleep(50 * time.Millisecond) // polling real processes
	}
}

// Cluster is a Redis Cluster started by [StartCluster]: primaries, the
// hash slots split evenly between them, and the replicas
// [Cluster.AddReplica] adds.
type Cluster struct {
	// Nodes are the primaries as started.
	Nodes []*Server

	extra    []string // more arguments of every node
	password string   // --requirepass of extra, if any
}

// StartCluster starts n Redis Cluster nodes (three at least) on free ports
// of 127.0.0.1, joins them with redis-cli --cluster create, and waits
// until every node reports the cluster ok. extra are more arguments of
// every node.
func StartCluster(t testing.TB, n int, extra ...string) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli not found on PATH: run `make tools` (scripts/install-redis.sh installs Debian's redis-tools package): %v", err)
	}
	c := &Cluster{extra: extra, password: argValue(extra, "--requirepass")}
	for range n {
		c.Nodes = append(c.Nodes, c.startNode(t))
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if pw := argValue(extra, "--requirepass"); pw != "" {
		args = append(args, "-a", pw, "--no-auth-warning")
	}
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	for _, node := range c.Nodes {
		nc := redis.NewClient(&redis.Options{Addr: node.Addr, Password: argValue(extra, "--requirepass"), DisableIdentity: true})
		for {
			info, err := nc.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				nc.Close()
				t.Fatalf("redistest: cluster node %s not ok within %v: %v %v", node.Addr, haTimeout, info, err)
			}
			time.Sleep(100 * time.Millisecond) // polling real processes
		}
		nc.Close()
	}
	return c
}

// startNode starts one node of c, not yet part of the cluster.
func (c *Cluster) startNode(t testing.TB, extra ...string) *Server {
	t.Helper()
	return Start(t, append(append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(t.TempDir(), "nodes.conf"),
		"--cluster-node-timeout", "2000",
	}, c.extra...), extra...)...)
}

// nodeClient returns a client of one node alone (not a cluster client).
func (c *Cluster) nodeClient(s *Server) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, Password: c.password, DialTimeout: time.Second, ReadTimeout: time.Second, DisableIdentity: true})
}

// AddReplica starts a node, joins it to the cluster as a replica of
// c.Nodes[i], and waits until it has copied its primary and every node
// knows it as that primary's replica (so that it can be failed over to).
func (c *Cluster) AddReplica(t testing.TB, i int) *Server {
	t.Helper()
	var extra []string
	if c.password != "" {
		extra = []string{"--masterauth", c.password}
	}
	r := c.startNode(t, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	pc, rc := c.nodeClient(c.Nodes[i]), c.nodeClient(r)
	defer pc.Close()
	defer rc.Close()
	primaryID, err := pc.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatalf("redistest: CLUSTER MYID on %s: %v", c.Nodes[i].Addr, err)
	}
	replicaID, err := rc.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatalf("redistest: CLUSTER MYID on %s: %v", r.Addr, err)
	}
	host, port, _ := net.SplitHostPort(c.Nodes[i].Addr)
	if err := rc.ClusterMeet(ctx, host, port).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER MEET from %s: %v", r.Addr, err)
	}
	// CLUSTER REPLICATE fails until the new node has learned of the
	// primary through the handshake.
	c.await(ctx, t, "replicating "+c.Nodes[i].Addr, func() (bool, string) {
		err := rc.ClusterReplicate(ctx, primaryID).Err()
		return err == nil, fmt.Sprint(err)
	})
	c.await(ctx, t, "in sync with "+c.Nodes[i].Addr, func() (bool, string) {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up"), info + fmt.Sprint(err)
	})
	for _, n := range c.Nodes {
		nc := c.nodeClient(n)
		c.await(ctx, t, n.Addr+" knowing "+r.Addr+" as a replica", func() (bool, string) {
			nodes, err := nc.ClusterNodes(ctx).Result()
			for line := range strings.Lines(nodes) {
				f := strings.Fields(line)
				if len(f) > 3 && f[0] == replicaID && strings.Contains(f[2], "slave") && f[3] == primaryID {
					return true, ""
				}
			}
			return false, nodes + fmt.Sprint(err)
		})
		nc.Close()
	}
	return r
}

// Failover makes replica, added by [Cluster.AddReplica], take over from
// its primary with CLUSTER FAILOVER (the manual failover, which waits
// until the replica has every write the primary took), and waits until
// the replica is a primary and every node reports the cluster ok.
func (c *Cluster) Failover(t testing.TB, replica *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	rc := c.nodeClient(replica)
	defer rc.Close()
	if err := rc.ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER FAILOVER on %s: %v", replica.Addr, err)
	}
	c.await(ctx, t, replica.Addr+" promoted", func() (bool, string) {
		role, err := rc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master", fmt.Sprint(role, err)
	})
	for _, n := range append([]*Server{replica}, c.Nodes...) {
		nc := c.nodeClient(n)
		c.await(ctx, t, n.Addr+" reporting the cluster ok", func() (bool, string) {
			info, err := nc.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok"), info + fmt.Sprint(err)
		})
		nc.Close()
	}
}

// await polls ok until it holds or ctx ends, then fails the test with
// what, and the last state ok described.
func (c *Cluster) await(ctx context.Context, t testing.TB, what string, ok func() (bool, string)) {
	t.Helper()
	for {
		done, state := ok()
		if done {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: not %s within %v: %s", what, haTimeout, state)
		}
		time.Sleep(50 * time.Millisecond) // polling real processes
	}
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
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

// Client returns a cluster client that knows one node (it learns the
// others), closed when the test ends.
func (c *Cluster) Client(t testing.TB, password string) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:           c.Addrs()[:1],
		Password:        password,
		DialTimeout:     500 * time.Millisecond,
		ReadTimeout:     500 * time.Millisecond,
		WriteTimeout:    500 * time.Millisecond,
		DisableIdentity: true,
	})
	t.Cleanup(func() { cc.Close() })
	return cc
}
