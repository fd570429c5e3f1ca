package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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
