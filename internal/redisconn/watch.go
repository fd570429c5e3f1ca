package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultWatchInterval is how often a [Watcher] checks that Redis answers
// and, on Cluster, reads the cluster's nodes.
const DefaultWatchInterval = 5 * time.Second

// Watcher follows a Redis deployment for what operators alert on: whether
// it answers, and each switch of a primary (a failover). The client
// follows a failover by itself; a Watcher only reports it.
//
// How it sees a failover depends on the deployment:
//
//   - Sentinel: it subscribes to the +switch-master channel of one
//     sentinel (every sentinel publishes each switch it learns of, so
//     one is enough and a switch is counted once), moving to the next
//     sentinel when that one stops answering. When it (re)subscribes it
//     asks the sentinel for the primary and its configuration epoch, so
//     that a switch made while it was not listening is counted too, and a
//     sentinel that has not yet learned of a switch is not taken for a
//     switch back.
//   - Cluster: it reads CLUSTER NODES every Interval and counts a node
//     that was a replica and is now a primary with a configuration epoch
//     above every primary's before: what a failover (automatic or CLUSTER
//     FAILOVER) does and nothing else does. Comparing which node serves a
//     slot range would count resharding (slots moved between primaries)
//     as failovers, and a node whose view is stale (it has the old epoch)
//     as a switch back. CLUSTER NODES is answered by every Redis Cluster
//     version and managed service; CLUSTER SHARDS needs Redis 7.
//   - One server (url): no failover can be seen; it only checks.
//
// The callbacks run on the watcher's goroutines and must be quick.
type Watcher struct {
	// OnFailover is called once for each primary switch observed, with the
	// old and the new primary's host:port (from is empty when unknown).
	// Nil: not called.
	OnFailover func(from, to string)
	// OnCheck is called after each check, every Interval, with whether
	// Redis answered a PING (on Sentinel, the primary the sentinels name;
	// on Cluster, every primary). Nil: not called.
	OnCheck func(up bool)
	// Interval is the time between checks. Zero means
	// [DefaultWatchInterval].
	Interval time.Duration
	// Logger receives what the watcher itself cannot do (no sentinel
	// answers, CLUSTER NODES fails), at debug level: OnCheck already
	// reports an unreachable Redis. Nil discards it.
	Logger *slog.Logger
}

// Run watches the deployment o names through client, the client [New]
// returned for o, until ctx ends or client is closed.
func (w Watcher) Run(ctx context.Context, client redis.UniversalClient, o Options) {
	o.Defaults()
	if w.Interval <= 0 {
		w.Interval = DefaultWatchInterval
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Mode() == ModeSentinel {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			w.followSentinels(ctx, o)
		}()
	}
	var cluster *clusterView
	if o.Mode() == ModeCluster {
		cluster = &clusterView{}
	}
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		err := Ping(ctx, client, o)
		if errors.Is(err, redis.ErrClosed) || ctx.Err() != nil {
			return
		}
		if w.OnCheck != nil {
			w.OnCheck(err == nil)
		}
		if cc, ok := client.(*redis.ClusterClient); ok && err == nil {
			w.pollCluster(ctx, cc, o, cluster)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// failover reports one switch.
func (w Watcher) failover(from, to string) {
	if w.OnFailover != nil {
		w.OnFailover(from, to)
	}
}

// sentinelPrimary is what a sentinel says of the primary: its address and
// the configuration epoch of that choice, which grows with each failover.
type sentinelPrimary struct {
	addr  string
	epoch int64
}

// followSentinels listens to one sentinel after another until ctx ends.
func (w Watcher) followSentinels(ctx context.Context, o Options) {
	uo, err := universalOptions(o)
	if err != nil {
		w.Logger.Debug("redis watch: sentinel options", "error", err)
		return
	}
	addrs := addresses(o.Sentinel.Addresses, DefaultSentinelPort)
	var last sentinelPrimary
	for i := 0; ctx.Err() == nil; i = (i + 1) % len(addrs) {
		err := w.followSentinel(ctx, &redis.Options{
			Addr:            addrs[i],
			Username:        o.Sentinel.Username,
			Password:        o.Sentinel.Password,
			TLSConfig:       uo.TLSConfig,
			DialTimeout:     o.DialTimeout,
			ReadTimeout:     o.ReadTimeout,
			WriteTimeout:    o.WriteTimeout,
			MaxRetries:      -1,
			DisableIdentity: true,
		}, o.Sentinel.MasterName, &last)
		if ctx.Err() != nil {
			return
		}
		w.Logger.Debug("redis watch: sentinel unavailable, trying the next", "sentinel", addrs[i], "error", scrub(scrub(err, o.Password), o.Sentinel.Password))
		if i == len(addrs)-1 {
			// Every sentinel failed in turn: pause before the next round.
			t := time.NewTimer(w.Interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// followSentinel subscribes to +switch-master on the sentinel opts names
// and reports each switch of master until the sentinel fails or ctx ends.
// last is the primary as last seen, kept across sentinels.
func (w Watcher) followSentinel(ctx context.Context, opts *redis.Options, master string, last *sentinelPrimary) error {
	sc := redis.NewSentinelClient(opts)
	defer sc.Close()
	ps := sc.Subscribe(ctx, "+switch-master")
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	if _, err := ps.ReceiveTimeout(ctx, opts.DialTimeout+opts.ReadTimeout); err != nil {
		return fmt.Errorf("subscribing: %w", err)
	}
	// Subscribed first, then asked: a switch between the two is seen by
	// both, and counted once.
	if err := w.sentinelSays(ctx, sc, master, last); err != nil {
		return err
	}
	w.Logger.Debug("redis watch: listening to a sentinel", "sentinel", opts.Addr, "primary", last.addr)
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, w.Interval)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout() && !pinged:
			// Quiet for an interval: make sure the sentinel is still there.
			if err := ps.Ping(ctx); err != nil {
				return err
			}
			pinged = true
			continue
		default:
			return err
		}
		pinged = false
		m, ok := msg.(*redis.Message)
		if !ok {
			continue // the Pong, or a subscription confirmed again
		}
		// "<master name> <old ip> <old port> <new ip> <new port>"
		f := strings.Fields(m.Payload)
		if len(f) != 5 || f[0] != master {
			continue
		}
		from, to := net.JoinHostPort(f[1], f[2]), net.JoinHostPort(f[3], f[4])
		if to != last.addr {
			w.failover(from, to)
			last.addr = to
		}
		// The epoch of the new configuration, so that a stale sentinel
		// met later is not taken for a switch back.
		if err := w.sentinelSays(ctx, sc, master, last); err != nil {
			return err
		}
	}
}

// sentinelSays asks the sentinel for master's primary and epoch and
// reports a switch when its choice is newer than last and differs from
// it; it updates last unless the sentinel's choice is older.
func (w Watcher) sentinelSays(ctx context.Context, sc *redis.SentinelClient, master string, last *sentinelPrimary) error {
	m, err := sc.Master(ctx, master).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL MASTER: %w", err)
	}
	epoch, err := strconv.ParseInt(m["config-epoch"], 10, 64)
	if err != nil {
		return fmt.Errorf("SENTINEL MASTER: config-epoch %q: %w", m["config-epoch"], err)
	}
	if from, ok := last.observe(sentinelPrimary{addr: net.JoinHostPort(m["ip"], m["port"]), epoch: epoch}); ok {
		w.failover(from, last.addr)
	}
	return nil
}

// observe records what a sentinel says of the primary, now, and reports
// whether it is a switch from the primary last seen (returned): a
// different primary with a newer epoch. A sentinel's older choice (it has
// not learned of the latest switch yet) is ignored; the first look only
// records.
func (last *sentinelPrimary) observe(now sentinelPrimary) (from string, switched bool) {
	switch {
	case last.addr == "":
		*last = now
	case now.epoch < last.epoch:
	case now.addr != last.addr && now.epoch > last.epoch:
		from = last.addr
		*last = now
		return from, true
	default:
		last.epoch = max(last.epoch, now.epoch)
	}
	return "", false
}

// pollCluster reads CLUSTER NODES and reports the failovers since the
// last read.
func (w Watcher) pollCluster(ctx context.Context, cc *redis.ClusterClient, o Options, view *clusterView) {
	text, err := cc.ClusterNodes(ctx).Result()
	if err != nil {
		w.Logger.Debug("redis watch: CLUSTER NODES", "error", scrub(err, o.Password))
		return
	}
	nodes, err := parseClusterNodes(text)
	if err != nil {
		w.Logger.Debug("redis watch: CLUSTER NODES", "error", err)
		return
	}
	for _, s := range view.update(nodes) {
		w.failover(s.from, s.to)
	}
}

// clusterNode is one line of CLUSTER NODES, the parts a clusterView reads.
type clusterNode struct {
	id      string
	addr    string // host:port, without the cluster bus port
	primary bool
	failed  bool   // flagged fail: the cluster agreed it is down
	of      string // the primary's id, for a replica
	epoch   int64  // the configuration epoch
}

// parseClusterNodes parses the answer to CLUSTER NODES: per line, id,
// ip:port@cport[,hostname], flags, the primary's id or "-", ping sent,
// pong received, config epoch, link state, then slots.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("redisconn: CLUSTER NODES line with %d fields, want 8 or more", len(f))
		}
		epoch, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redisconn: CLUSTER NODES config epoch %q: %w", f[6], err)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		n := clusterNode{id: f[0], addr: addr, epoch: epoch}
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "master":
				n.primary = true
			case "fail":
				n.failed = true
			}
		}
		if f[3] != "-" {
			n.of = f[3]
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("redisconn: CLUSTER NODES is empty")
	}
	return nodes, nil
}

// clusterView is what the last reads of CLUSTER NODES showed: which nodes
// were replicas, of which primary, and the highest configuration epoch of
// a primary.
type clusterView struct {
	seen      bool
	replicaOf map[string]string // replica id → its primary's id
	addrs     map[string]string // id → host:port
	maxEpoch  int64
}

// clusterSwitch is one failover a clusterView saw.
type clusterSwitch struct{ from, to string }

// update records nodes and returns the failovers since the previous
// update: nodes that were replicas and are now primaries (not failed)
// with an epoch above every primary's seen before.
func (v *clusterView) update(nodes []clusterNode) []clusterSwitch {
	var out []clusterSwitch
	maxEpoch := v.maxEpoch
	for _, n := range nodes {
		if !n.primary || n.failed {
			continue
		}
		if old, wasReplica := v.replicaOf[n.id]; v.seen && wasReplica && n.epoch > v.maxEpoch {
			out = append(out, clusterSwitch{from: v.addrs[old], to: n.addr})
		}
		maxEpoch = max(maxEpoch, n.epoch)
	}
	v.seen, v.maxEpoch = true, maxEpoch
	v.replicaOf, v.addrs = map[string]string{}, map[string]string{}
	for _, n := range nodes {
		v.addrs[n.id] = n.addr
		if !n.primary && n.of != "" {
			v.replicaOf[n.id] = n.of
		}
	}
	return out
}
