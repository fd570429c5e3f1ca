package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func sampleEvent() *Event {
	return &Event{
		ID: "0123", Time: time.Date(2026, 11, 29, 8, 0, 0, 123456000, time.UTC),
		Type: TypeToolCall, Outcome: OutcomeSuccess,
		Actor:   Actor{Issuer: "https://idp", Subject: "alice", ClientID: "cli", Act: []Delegate{{Subject: "agent", ClientID: "bot"}}},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Server: "math", Tool: "add", ToolOriginal: "calculator", ToolCalledAs: "plus",
		Duration: 1500 * time.Microsecond, Arguments: json.RawMessage(`{"a":1}`),
		Detail: map[string]string{"z": "last", "a": "first \"quoted\"\n<tag>"},
	}
}

func TestEventJSON(t *testing.T) {
	e := sampleEvent()
	var got map[string]any
	if err := json.Unmarshal(e.JSON(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, e.JSON())
	}
	want := `{"schema":"portcullis.audit/v1","id":"0123","time":"2026-11-29T08:00:00.123456Z","type":"tool.call","outcome":"success",` +
		`"actor":{"issuer":"https://idp","subject":"alice","client_id":"cli","act":[{"subject":"agent","client_id":"bot"}]},` +
		`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","server":"math","tool":"add","tool_original":"calculator","tool_called_as":"plus","duration_us":1500,` +
		`"arguments":{"a":1},"detail":{"a":"first \"quoted\"\n\u003ctag\u003e","z":"last"}}`
	if string(e.JSON()) != want {
		t.Errorf("JSON:\n got %s\nwant %s", e.JSON(), want)
	}
	for _, s := range []string{"a\x00b", "\xff", "\u2028", "é"} {
		b := appendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil || (back != s && s != "\xff") {
			t.Errorf("appendString(%q) = %s: %q, %v", s, b, back, err)
		}
	}
	bare := &Event{Type: TypeConfigLoaded, Outcome: OutcomeSuccess}
	var fresh map[string]any
	if err := json.Unmarshal(bare.JSON(), &fresh); err != nil || fresh["actor"] != nil {
		t.Errorf("an event without an actor: %s (%v)", bare.JSON(), err)
	}
}

func TestActChain(t *testing.T) {
	got := ActChain(json.RawMessage(`{"sub":"a","act":{"sub":"b","client_id":"c"}}`))
	if len(got) != 2 || got[0].Subject != "a" || got[1].ClientID != "c" {
		t.Errorf("ActChain = %+v", got)
	}
	if ActChain(json.RawMessage(`"x"`)) != nil || ActChain(nil) != nil {
		t.Error("ActChain of no chain is not nil")
	}
}

// memSink records what it is given; fail makes Write fail, block makes
// it wait.
type memSink struct {
	mu     sync.Mutex
	events []*Event
	fail   bool
	block  chan struct{}
}

func (m *memSink) Name() string { return "mem" }
func (m *memSink) Write(_ context.Context, es []*Event) error {
	if m.block != nil {
		<-m.block
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New("down")
	}
	m.events = append(m.events, es...)
	return nil
}
func (m *memSink) Close() error { return nil }
func (m *memSink) set(fail bool) {
	m.mu.Lock()
	m.fail = fail
	m.mu.Unlock()
}
func (m *memSink) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

func TestRecorderDeliversInOrder(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(RecorderOptions{}, sink)
	for i := range 1000 {
		r.Record(&Event{Type: TypeToolCall, Tool: strconv.Itoa(i)})
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.count() != 1000 {
		t.Fatalf("delivered %d of 1000", sink.count())
	}
	ids := map[string]bool{}
	for i, e := range sink.events {
		if e.Tool != strconv.Itoa(i) || e.ID == "" || ids[e.ID] || e.Time.IsZero() {
			t.Fatalf("event %d: %+v", i, e)
		}
		ids[e.ID] = true
	}
}

// TestRecorderSinkDown: a sink that fails neither blocks Record nor
// loses events silently: its queue holds what it can, the rest is
// counted as dropped, and what was held arrives once the sink is back.
func TestRecorderSinkDown(t *testing.T) {
	sink := &memSink{fail: true}
	var mu sync.Mutex
	dropped, failed, recovered := 0, 0, 0
	r := NewRecorder(RecorderOptions{QueueSize: 10, BatchSize: 1, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, Hooks: Hooks{
		Dropped:   func(_ string, n int) { mu.Lock(); dropped += n; mu.Unlock() },
		Failed:    func(string, error) { mu.Lock(); failed++; mu.Unlock() },
		Recovered: func(string) { mu.Lock(); recovered++; mu.Unlock() },
	}}, sink)
	start := time.Now()
	for range 100 {
		r.Record(&Event{Type: TypeToolCall})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("recording 100 events with the sink down took %v", d)
	}
	mu.Lock()
	if dropped < 100-11 || dropped > 100-10 {
		t.Errorf("dropped %d of 100 with a queue of 10 (and one batch held), want 89 or 90", dropped)
	}
	held := 100 - dropped
	mu.Unlock()
	// The sink fails at least once before it comes back.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		f := failed
		mu.Unlock()
		if f > 0 {
			break
		}
	}
	sink.set(false)
	deadline := time.Now().Add(10 * time.Second)
	for sink.count() < held && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if sink.count() != held {
		t.Fatalf("delivered %d after the sink came back, want the %d held", sink.count(), held)
	}
	_ = r.Close(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if failed == 0 || recovered != 1 {
		t.Errorf("failed %d, recovered %d; want failures and one recovery", failed, recovered)
	}
}

func TestSyslog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 10)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			n, err := br.ReadString(' ')
			if err != nil {
				return
			}
			size, _ := strconv.Atoi(strings.TrimSpace(n))
			msg := make([]byte, size)
			if _, err := io.ReadFull(br, msg); err != nil {
				return
			}
			got <- string(msg)
		}
	}()
	for _, format := range []string{FormatJSON, FormatCEF} {
		s := NewSyslog(SyslogOptions{Address: ln.Addr().String(), Facility: 13, Format: format, Hostname: "host", Version: "1.2"})
		e := sampleEvent()
		e.Outcome, e.Rule = OutcomeRefused, "no|pipes=here"
		if err := s.Write(context.Background(), []*Event{e}); err != nil {
			t.Fatal(err)
		}
		msg := <-got
		header := "<109>1 2026-11-29T08:00:00.123456Z host portcullis "
		if !strings.HasPrefix(msg, header) || !strings.Contains(msg, " tool.call - \xef\xbb\xbf") {
			t.Errorf("%s: message %q, want the RFC 5424 header %q… and MSGID tool.call", format, msg, header)
		}
		body := msg[strings.Index(msg, "\xef\xbb\xbf")+3:]
		switch format {
		case FormatJSON:
			if body != string(e.JSON()) {
				t.Errorf("json body %q", body)
			}
		case FormatCEF:
			if !strings.HasPrefix(body, "CEF:0|Portcullis|Portcullis|1.2|tool.call|tool.call refused|5|") ||
				!strings.Contains(body, `cs5=no|pipes\=here`) || !strings.Contains(body, "suser=alice") {
				t.Errorf("cef body %q", body)
			}
		}
		_ = s.Close()
		if format == FormatJSON {
			// The listener serves one connection: take the next.
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				n, _ := br.ReadString(' ')
				size, _ := strconv.Atoi(strings.TrimSpace(n))
				msg := make([]byte, size)
				_, _ = io.ReadFull(br, msg)
				got <- string(msg)
			}()
		}
	}
}

func TestRedact(t *testing.T) {
	raw := json.RawMessage(`{"user":"a","Password":"s3cret","creds":[{"token":"t1"},{"token":"t2"}],"n":12345678901234567890}`)
	out, cut := Redact(raw, [][]string{ParsePath("password"), ParsePath("creds.*.token")}, 0)
	if cut || strings.Contains(string(out), "s3cret") || strings.Contains(string(out), "t1") || !strings.Contains(string(out), "12345678901234567890") {
		t.Errorf("Redact = %s (cut %v)", out, cut)
	}
	out, cut = Redact(json.RawMessage(`{"text":"ééééé"}`), nil, 12)
	var s string
	if !cut || json.Unmarshal(out, &s) != nil || len(s) > 12 {
		t.Errorf("cut: %s (%v)", out, cut)
	}
}
