package upstream

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestSSECounter(t *testing.T) {
	stream := "id: 1\ndata: \n\n" + // priming event
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\r\ndata: \"params\":{\"level\":\"info\",\"data\":\"x\"}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\",\"params\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\\\"method\\\":\\\"notifications/progress\\\"\"}]}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
	n := &notes{}
	// One byte at a time: events split across reads are counted once.
	b := &sseBody{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), notes: n}
	if _, err := io.ReadAll(b); err != nil {
		t.Fatal(err)
	}
	if n.read != 2 {
		t.Errorf("counted %d awaited notifications, want 2 (a progress and a multi-line log message)", n.read)
	}
}

func TestNotesWaitWritesOffLostNotifications(t *testing.T) {
	n := &notes{}
	n.addRead() // never handled
	ctx := callCtx(t)
	start := time.Now()
	n.wait(ctx)
	if d := time.Since(start); d < notesGrace {
		t.Fatalf("wait returned after %v with a notification unhandled, want %v", d, notesGrace)
	}
	// Written off: the next wait has nothing to wait for.
	done := make(chan struct{})
	go func() { n.wait(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(notesGrace / 2):
		t.Fatal("a lost notification still holds later calls")
	}
	n.addRead()
	go n.addHandled()
	n.wait(ctx) // returns once handled
	if n.handled != 2 {
		t.Errorf("handled = %d, want 2", n.handled)
	}
}
