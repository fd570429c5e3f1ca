package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/haproxytest"
)

// The rows of portable legacy sessions: Portcullis with its sessions in a
// real Redis, one process called directly, and three behind HAProxy
// (round robin, no affinity), so that each request of a session lands on
// another replica than the last. Beside each, the same deployment without
// portable sessions, its sessions in memory and its rate buckets in the
// same Redis: one process, and three behind HAProxy with affinity on
// Mcp-Session-Id.
const (
	redisRowName       = "portcullis-redis"
	redisMemoryRowName = "portcullis-redis-memory"
	replicasRowName    = "portcullis-replicas"
	affinityRowName    = "portcullis-affinity"
	replicaCount       = 3
)

// targetReplicasKept is the goal of portable sessions: on the 2025-11-25
// path, a deployment sharing its sessions through Redis keeps at least
// this share of the throughput of the same deployment keeping them in
// memory (one replica; three behind the balancer, with affinity there),
// on the same machine, at the same concurrency.
const targetReplicasKept = 0.80

// startRedis starts a redis-server on a free port of 127.0.0.1, with
// persistence off, and waits until it answers PING.
func (h *harness) startRedis(ctx context.Context) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addr, ":")
	dir := filepath.Join(h.dir, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1, DisableIdentity: true})
	spec := serverSpec{name: "redis", bin: h.cfg.redisServer, addr: addr, env: serverEnv(), logPath: filepath.Join(h.dir, "redis.log"),
		args:  []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"},
		ready: func() bool { return rdb.Ping(ctx).Err() == nil }}
	if h.cfg.pin {
		spec.cpu = serverCPU
	}
	s, _, err := startServer(ctx, spec)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	s.rdb = rdb
	return s, nil
}

// redisUsedMemory returns what a Redis server holds (INFO memory's
// used_memory), in bytes.
func redisUsedMemory(ctx context.Context, s *server) (int64, error) {
	info, err := s.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO memory: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("redis INFO memory: no used_memory")
}

// startRedisRow starts a one-replica row: Portcullis with its rate
// buckets in rdb, called directly, and its legacy sessions there too, or,
// for the row named redisMemoryRowName, in memory (measured on the
// 2025-11-25 path only: on the other, it is the same as the row with
// its sessions in Redis). On the 2026-07-28 path, which keeps no
// session, the row with its sessions in Redis shows what the rate
// buckets in Redis cost.
func (h *harness) startRedisRow(ctx context.Context, name string, rdb *server) (*server, error) {
	o := pcOptions{name: name, redisURL: "redis://" + rdb.addr() + "/0"}
	if name == redisMemoryRowName {
		o.sessionStore = "memory"
	}
	s, _, err := h.startPortcullisWith(ctx, o)
	if err != nil {
		return nil, err
	}
	s.store = rdb
	if name == redisMemoryRowName {
		s.paths = []string{pathLegacy}
	}
	return s, nil
}

// startReplicas starts replicaCount Portcullis processes with their rate
// buckets in rdb, and HAProxy in front of them (connections to the
// replicas kept alive), and returns the balancer's row named name: its
// base URL is HAProxy's, its counters the replicas'. The replicas'
// resource is the balancer's URL, as behind a Service. Without affinity
// the replicas share their legacy sessions in rdb and HAProxy balances
// round robin; with it they keep their sessions in memory and HAProxy
// sends a session's requests to the replica that made it, and the row is
// measured on the 2025-11-25 path only (on the other, it is the same as
// the replicas without affinity).
func (h *harness) startReplicas(ctx context.Context, name string, rdb *server, affinity bool) (*server, error) {
	front, err := freeAddr()
	if err != nil {
		return nil, err
	}
	g := &server{name: name, base: "http://" + front, store: rdb}
	store := ""
	if affinity {
		g.paths, store = []string{pathLegacy}, "memory"
	}
	var addrs []string
	for i := range replicaCount {
		r, _, err := h.startPortcullisWith(ctx, pcOptions{name: fmt.Sprintf("%s-%d", name, i),
			resource: g.base + "/mcp", redisURL: "redis://" + rdb.addr() + "/0", sessionStore: store})
		if err != nil {
			g.stopReplicas()
			return nil, err
		}
		g.replicas = append(g.replicas, r)
		addrs = append(addrs, r.addr())
	}
	cfgPath := filepath.Join(h.dir, name+"-haproxy.cfg")
	cfg := haproxytest.Config{Front: front, Backends: addrs, KeepAlive: true, SessionAffinity: affinity}.String()
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		g.stopReplicas()
		return nil, err
	}
	// SIGUSR1 is HAProxy's graceful stop, which exits 0; SIGTERM exits 143.
	spec := serverSpec{name: name + "-haproxy", bin: h.cfg.haproxy, args: []string{"-f", cfgPath, "-db"}, env: serverEnv(),
		addr: front, logPath: filepath.Join(h.dir, name+"-haproxy.log"), stopSignal: syscall.SIGUSR1}
	if h.cfg.pin {
		spec.cpu = serverCPU
	}
	if g.balancer, _, err = startServer(ctx, spec); err != nil {
		g.stopReplicas()
		return nil, err
	}
	return g, nil
}

// sessionsRebuilt is the metric of the sessions a replica rebuilt from
// their records: requests of sessions another replica made.
const sessionsRebuilt = "portcullis_mcp_sessions_rebuilt_total"

// rebuilt returns how many sessions the replicas of g rebuilt, summed.
func (g *server) rebuilt() (float64, error) {
	var total float64
	for _, r := range g.replicas {
		m, err := scrape(r.metricsURL, sessionsRebuilt)
		if err != nil {
			return 0, err
		}
		total += m[sessionsRebuilt]
	}
	return total, nil
}

// addr is the server's host:port.
func (s *server) addr() string { return strings.TrimPrefix(s.base, "http://") }

// stopReplicas stops the replicas of g started so far.
func (g *server) stopReplicas() {
	for _, r := range g.replicas {
		r.stop()
	}
}
