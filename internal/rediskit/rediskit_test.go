package rediskit

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestHash(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
	}{
		// The first 32 hex digits of the SHA-256 of the input.
		{name: "empty", in: "", want: "e3b0c44298fc1c149afbf4c8996fb924"},
		{name: "abc", in: "abc", want: "ba7816bf8f01cfea414140de5dae2223"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Hash(tt.in); got != tt.want {
				t.Fatalf("Hash(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	owner := "https://idp.example|alice"
	if got := Hash(owner); len(got) != 32 || strings.Contains(got, "alice") || strings.Trim(got, "0123456789abcdef") != "" {
		t.Fatalf("Hash(%q) = %q, want 32 lower-case hex digits", owner, got)
	}
	if Hash("a") == Hash("b") {
		t.Fatal("two inputs share a hash")
	}
}

func TestUnavailable(t *testing.T) {
	cause := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	already := Unavailable("get", cause)
	for _, tt := range []struct {
		name     string
		op       string
		err      error
		want     string // the message; empty: nil
		isCause  bool
		notRepl  bool
		sameAsIn bool
	}{
		{name: "nil stays nil", op: "get", err: nil},
		{name: "a cause is wrapped and named", op: "create", err: cause, want: "redis unavailable: create: dial tcp 127.0.0.1:1: connect: connection refused", isCause: true},
		{name: "wrapped once only", op: "update", err: already, want: "redis unavailable: get: dial tcp 127.0.0.1:1: connect: connection refused", isCause: true, sameAsIn: true},
		{name: "too few replicas stays what it is", op: "set", err: replicated(0, Durability{Replicas: 1, Timeout: 500 * time.Millisecond}),
			want: "redis unavailable: the write reached too few replicas: 0 of 1 within 500ms", notRepl: true, sameAsIn: true},
		{name: "a timeout", op: "get", err: context.DeadlineExceeded, want: "redis unavailable: get: context deadline exceeded"},
		{name: "a lost connection", op: "get", err: io.EOF, want: "redis unavailable: get: EOF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Unavailable(tt.op, tt.err)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("Unavailable(%q, nil) = %v, want nil", tt.op, got)
				}
				return
			}
			if got == nil || got.Error() != tt.want {
				t.Fatalf("Unavailable = %v, want %q", got, tt.want)
			}
			if !errors.Is(got, ErrUnavailable) {
				t.Errorf("errors.Is(%v, ErrUnavailable) = false", got)
			}
			if errors.Is(got, cause) != tt.isCause {
				t.Errorf("errors.Is(%v, the cause) = %v, want %v", got, !tt.isCause, tt.isCause)
			}
			if errors.Is(got, ErrNotReplicated) != tt.notRepl {
				t.Errorf("errors.Is(%v, ErrNotReplicated) = %v, want %v", got, !tt.notRepl, tt.notRepl)
			}
			if tt.sameAsIn && got != tt.err {
				t.Errorf("Unavailable wrapped an ErrUnavailable again: %v", got)
			}
		})
	}
}

func TestReplicated(t *testing.T) {
	d := Durability{Replicas: 2, Timeout: 250 * time.Millisecond}
	for _, tt := range []struct {
		name string
		n    int64
		ok   bool
	}{
		{name: "none acknowledged", n: 0},
		{name: "too few", n: 1},
		{name: "enough", n: 2, ok: true},
		{name: "more than asked", n: 3, ok: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := replicated(tt.n, d)
			if (err == nil) != tt.ok {
				t.Fatalf("replicated(%d, %+v) = %v, want ok %v", tt.n, d, err, tt.ok)
			}
			if err != nil && (!errors.Is(err, ErrNotReplicated) || !errors.Is(err, ErrUnavailable)) {
				t.Fatalf("replicated = %v, want an ErrNotReplicated and an ErrUnavailable", err)
			}
		})
	}
}

func TestNewDurability(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, tt := range []struct {
		name string
		in   Durability
		want Durability
	}{
		{name: "zero waits for none", in: Durability{}, want: Durability{}},
		{name: "negative is none", in: Durability{Replicas: -1, Timeout: time.Second}, want: Durability{Timeout: time.Second}},
		{name: "replicas without a timeout get the default", in: Durability{Replicas: 1}, want: Durability{Replicas: 1, Timeout: DefaultTimeout}},
		{name: "as given", in: Durability{Replicas: 2, Timeout: 100 * time.Millisecond}, want: Durability{Replicas: 2, Timeout: 100 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(rdb, tt.in).Durability(); got != tt.want {
				t.Fatalf("New(%+v).Durability() = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestWriteWithoutReplicas: with none to wait for, a write runs on the
// client itself (whose retries then apply) and nothing else is sent.
func TestWriteWithoutReplicas(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c := New(rdb, Durability{})
	var got redis.Cmdable
	mine := errors.New("mine")
	err := c.Write(context.Background(), "k", func(w redis.Cmdable) error {
		got = w
		return mine
	})
	if got != redis.Cmdable(rdb) {
		t.Errorf("fn got %T, want the client itself", got)
	}
	if err != mine {
		t.Errorf("Write = %v, want fn's own error as it is", err)
	}
}

// TestWriteNeedsAKnownClient: waiting needs one connection to a primary,
// which only the single-server, Sentinel and Cluster clients give.
func TestWriteNeedsAKnownClient(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	c := New(ring, Durability{Replicas: 1})
	called := false
	err := c.Write(context.Background(), "k", func(redis.Cmdable) error { called = true; return nil })
	if called || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "*redis.Ring") {
		t.Fatalf("Write on a ring = %v (fn called: %v), want an ErrUnavailable naming the client's type", err, called)
	}
}

func TestValuesRefuseValuesThatNeverExpire(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	v := New(rdb, Durability{}).Values("p:")
	ctx := context.Background()
	for name, err := range map[string]error{
		"Set":            v.Set(ctx, "k", []byte("v"), 0),
		"SetNX":          second(v.SetNX(ctx, "k", []byte("v"), -time.Second)),
		"CompareAndSwap": second(v.CompareAndSwap(ctx, "k", []byte("a"), []byte("b"), 0)),
		"GetEx":          third(v.GetEx(ctx, "k", 0)),
	} {
		if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "positive time to live") {
			t.Errorf("%s with no time to live = %v, want a refusal that is not ErrUnavailable", name, err)
		}
	}
	if got := v.Key("session:abc"); got != "p:session:abc" {
		t.Errorf("Key = %q, want p:session:abc", got)
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

func TestSubscribeTimeout(t *testing.T) {
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 2 * time.Second, ReadTimeout: time.Second})
	defer single.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	defer cluster.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tt := range []struct {
		name string
		rdb  redis.UniversalClient
		want time.Duration
	}{
		{name: "one server or Sentinel: dial and read timeouts", rdb: single, want: 3 * time.Second},
		{name: "Cluster: dial and read timeouts", rdb: cluster, want: time.Second},
		{name: "another client", rdb: ring, want: fallbackSubscribeTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := SubscribeTimeout(tt.rdb); got != tt.want {
				t.Fatalf("SubscribeTimeout = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMillis(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want int64
	}{
		{in: time.Nanosecond, want: 1},
		{in: time.Millisecond, want: 1},
		{in: 1500 * time.Microsecond, want: 2},
		{in: time.Hour, want: 3600000},
	} {
		if got := millis(tt.in); got != tt.want {
			t.Errorf("millis(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
