package redisconn

import (
	"context"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// clusterNodes is CLUSTER NODES of a cluster of three primaries (a, b, c)
// with a replica each (a2, b2, c2), as Redis 7 writes it, with the epochs
// given.
func clusterNodes(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

const (
	nodeA  = "aaaa 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-5460"
	nodeA2 = "aaa2 10.0.0.4:6379@16379 slave aaaa 0 1 1 connected"
	nodeB  = "bbbb 10.0.0.2:6379@16379,redis-b.internal master - 0 1 2 connected 5461-10922"
	nodeB2 = "bbb2 10.0.0.5:6379@16379 slave bbbb 0 1 2 connected"
	nodeC  = "cccc 10.0.0.3:6379@16379 master - 0 1 3 connected 10923-16383"
	nodeC2 = "ccc2 10.0.0.6:6379@16379 slave cccc 0 1 3 connected"
)

func TestParseClusterNodes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		text    string
		want    []clusterNode
		wantErr string
	}{
		{
			name: "primaries and replicas",
			text: clusterNodes(nodeA, nodeB2, nodeB),
			want: []clusterNode{
				{id: "aaaa", addr: "10.0.0.1:6379", primary: true, epoch: 1},
				{id: "bbb2", addr: "10.0.0.5:6379", of: "bbbb", epoch: 2},
				{id: "bbbb", addr: "10.0.0.2:6379", primary: true, epoch: 2},
			},
		},
		{
			name: "a failed primary",
			text: clusterNodes("dddd 10.0.0.9:6379@16379 master,fail - 0 1 7 disconnected"),
			want: []clusterNode{{id: "dddd", addr: "10.0.0.9:6379", primary: true, failed: true, epoch: 7}},
		},
		{name: "empty", text: "\n", wantErr: "empty"},
		{name: "short line", text: "aaaa 10.0.0.1:6379@16379 master -\n", wantErr: "4 fields"},
		{name: "bad epoch", text: "aaaa 10.0.0.1:6379@16379 master - 0 0 x connected\n", wantErr: "config epoch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseClusterNodes(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseClusterNodes() error = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseClusterNodes() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestClusterViewCountsFailovers reads a sequence of CLUSTER NODES answers
// and checks which reads report a failover: a replica promoted with a new
// epoch does; resharding, a stale node's view, a new primary and the
// failed old primary do not.
func TestClusterViewCountsFailovers(t *testing.T) {
	v := &clusterView{}
	for _, step := range []struct {
		name string
		text string
		want []clusterSwitch
	}{
		{name: "first read only records", text: clusterNodes(nodeA, nodeA2, nodeB, nodeB2, nodeC, nodeC2)},
		{name: "nothing changed", text: clusterNodes(nodeA, nodeA2, nodeB, nodeB2, nodeC, nodeC2)},
		{
			name: "b2 promoted, b failed",
			text: clusterNodes(nodeA, nodeA2,
				"bbbb 10.0.0.2:6379@16379 master,fail - 0 1 2 disconnected",
				"bbb2 10.0.0.5:6379@16379 master - 0 1 4 connected 5461-10922",
				nodeC, nodeC2),
			want: []clusterSwitch{{from: "10.0.0.2:6379", to: "10.0.0.5:6379"}},
		},
		{
			name: "b back as b2's replica",
			text: clusterNodes(nodeA, nodeA2,
				"bbbb 10.0.0.2:6379@16379 slave bbb2 0 1 4 connected",
				"bbb2 10.0.0.5:6379@16379 master - 0 1 4 connected 5461-10922",
				nodeC, nodeC2),
		},
		{
			name: "a node that has not learned of it yet",
			text: clusterNodes(nodeA, nodeA2, nodeB, nodeB2, nodeC, nodeC2),
		},
		{
			name: "up to date again",
			text: clusterNodes(nodeA, nodeA2,
				"bbbb 10.0.0.2:6379@16379 slave bbb2 0 1 4 connected",
				"bbb2 10.0.0.5:6379@16379 master - 0 1 4 connected 5461-10922",
				nodeC, nodeC2),
		},
		{
			name: "slots moved to c, which bumps its epoch",
			text: clusterNodes(
				"aaaa 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-5000",
				nodeA2,
				"bbbb 10.0.0.2:6379@16379 slave bbb2 0 1 4 connected",
				"bbb2 10.0.0.5:6379@16379 master - 0 1 4 connected 5461-10922",
				"cccc 10.0.0.3:6379@16379 master - 0 1 5 connected 5001-5460 10923-16383",
				nodeC2),
		},
		{
			name: "a new empty primary joins",
			text: clusterNodes(nodeA, nodeA2,
				"bbbb 10.0.0.2:6379@16379 slave bbb2 0 1 4 connected",
				"bbb2 10.0.0.5:6379@16379 master - 0 1 4 connected 5461-10922",
				"cccc 10.0.0.3:6379@16379 master - 0 1 5 connected 5001-5460 10923-16383",
				nodeC2,
				"eeee 10.0.0.7:6379@16379 master - 0 1 6 connected"),
		},
		{
			name: "two shards fail over between reads",
			text: clusterNodes(
				"aaaa 10.0.0.1:6379@16379 myself,slave aaa2 0 0 7 connected",
				"aaa2 10.0.0.4:6379@16379 master - 0 1 7 connected 0-5000",
				"bbbb 10.0.0.2:6379@16379 slave bbb2 0 1 4 connected",
				"bbb2 10.0.0.5:6379@16379 master - 0 1 4 connected 5461-10922",
				"cccc 10.0.0.3:6379@16379 slave ccc2 0 1 8 connected",
				"ccc2 10.0.0.6:6379@16379 master - 0 1 8 connected 5001-5460 10923-16383",
				"eeee 10.0.0.7:6379@16379 master - 0 1 6 connected"),
			want: []clusterSwitch{{from: "10.0.0.1:6379", to: "10.0.0.4:6379"}, {from: "10.0.0.3:6379", to: "10.0.0.6:6379"}},
		},
	} {
		nodes, err := parseClusterNodes(step.text)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := v.update(nodes); !reflect.DeepEqual(got, step.want) {
			t.Errorf("%s: update() = %+v, want %+v", step.name, got, step.want)
		}
	}
}

func TestSentinelObserve(t *testing.T) {
	a, b := "10.0.0.1:6379", "10.0.0.2:6379"
	for _, tt := range []struct {
		name     string
		last     sentinelPrimary
		now      sentinelPrimary
		wantFrom string
		wantOK   bool
		wantLast sentinelPrimary
	}{
		{name: "first look", now: sentinelPrimary{a, 3}, wantLast: sentinelPrimary{a, 3}},
		{name: "unchanged", last: sentinelPrimary{a, 3}, now: sentinelPrimary{a, 3}, wantLast: sentinelPrimary{a, 3}},
		{name: "switched while not listening", last: sentinelPrimary{a, 3}, now: sentinelPrimary{b, 4}, wantFrom: a, wantOK: true, wantLast: sentinelPrimary{b, 4}},
		{name: "a sentinel that has not learned of it", last: sentinelPrimary{b, 4}, now: sentinelPrimary{a, 3}, wantLast: sentinelPrimary{b, 4}},
		{name: "the epoch of a switch already counted", last: sentinelPrimary{b, 0}, now: sentinelPrimary{b, 4}, wantLast: sentinelPrimary{b, 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			last := tt.last
			from, ok := last.observe(tt.now)
			if from != tt.wantFrom || ok != tt.wantOK || last != tt.wantLast {
				t.Errorf("observe() = %q, %v, last %+v; want %q, %v, last %+v", from, ok, last, tt.wantFrom, tt.wantOK, tt.wantLast)
			}
		})
	}
}

// TestWatcherChecksUntilClosed: with nothing listening, each check reports
// Redis down; once the client is closed, Run returns.
func TestWatcherChecksUntilClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	o := Options{URL: "redis://" + addr, DialTimeout: 200 * time.Millisecond}
	client, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	checks := make(chan bool, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watcher{Interval: time.Millisecond, OnCheck: func(up bool) {
			select {
			case checks <- up:
			default:
			}
		}}.Run(context.Background(), client, o)
	}()
	for range 2 {
		if up := <-checks; up {
			t.Fatal("OnCheck(true) with nothing listening")
		}
	}
	client.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10s after the client was closed")
	}
}
