package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// JSON-RPC bodies the checks send.
const (
	initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"portcullis-doctor","version":"1"}}}`
	pingBody       = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	modernVersion  = "2026-07-28"
	modernList     = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"portcullis-doctor","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
)

func (d *doctor) do(req *http.Request) (*response, error) {
	resp, err := d.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is already in the detail
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

func (d *doctor) get(ctx context.Context, u string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return d.do(req)
}

// post sends body to the endpoint as a Streamable HTTP client does, with
// the token when withToken is set and one was given.
func (d *doctor) post(ctx context.Context, body string, withToken bool, header map[string]string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.opts.URL, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if withToken && d.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+d.opts.Token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return d.do(req)
}
