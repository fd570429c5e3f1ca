package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/mcp"
)

// A server built from the default catalog, served on /mcp. The client here
// speaks revision 2026-07-28, which needs no initialize handshake.
func ExampleServer_Handler() {
	opts := toolsets.Options{}
	opts.Defaults()
	cat, err := toolsets.New(opts, toolsets.Deps{})
	if err != nil {
		log.Fatal(err)
	}
	sealer, err := mcp.NewSealer([][]byte{mcp.NewRandomKey()}, 10*time.Minute, nil)
	if err != nil {
		log.Fatal(err)
	}
	// The zero Options serves with the documented defaults.
	h := mcp.New(cat, mcp.Options{}, mcp.Deps{Version: "dev", Sealer: sealer}).Handler()

	mux := http.NewServeMux()
	mux.Handle("/mcp", h.OriginGuard(h))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"example","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		log.Fatalf("%s: %v", b, err)
	}
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	fmt.Println(msg.Result.Content[0].Text)
	// Output:
	// 200 application/json
	// hi
}

// A server for stdio serves newline-delimited JSON-RPC, as a local process
// a client starts. A line that is not JSON is answered, and serving goes
// on.
func ExampleServer_ServeStdio() {
	cat, err := toolsets.New(toolsets.Options{}, toolsets.Deps{})
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.New(cat, mcp.Options{}, mcp.Deps{Transport: mcp.Stdio, Version: "dev"})
	in := strings.NewReader("not json\n")
	var out strings.Builder
	if err := server.ServeStdio(context.Background(), in, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Print(out.String())
	// Output:
	// {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not valid JSON"}}
}
