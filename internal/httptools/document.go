package httptools

// Documents read from a URL (openapi.url): fetched when the API is
// registered, then checked every openapi.reload; a document that changed
// rebuilds the API's tools, one that became unusable leaves them as
// they are.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// document is an API's OpenAPI document at its URL, as last fetched.
type document struct {
	url    string
	client *http.Client
	// etag and modified are the validators of the last response, sent
	// back to be answered 304 Not Modified; sum is its body's hash.
	etag, modified string
	sum            [sha256.Size]byte
}

// newDocument returns o's document at openapi.url, fetched with o's TLS
// settings and its check of private addresses but none of its
// credentials, redirects followed only on the URL's host, each fetch
// bounded by o's timeout. wrap, when set, wraps the transport (tracing).
func newDocument(o *Options, wrap func(http.RoundTripper) http.RoundTripper) (*document, error) {
	u, err := url.Parse(o.OpenAPI.URL)
	if err != nil {
		return nil, fmt.Errorf("httptools: %s: openapi.url: %w", o.Name, err)
	}
	rt, err := newTransport(o, wrap)
	if err != nil {
		return nil, err
	}
	host := []string{u.Host}
	return &document{url: o.OpenAPI.URL, client: &http.Client{
		Transport: rt,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("%w: more than %d redirects", errRedirect, maxRedirects)
			}
			if !hostAllowed(host, req.URL.Scheme, req.URL.Host) {
				return fmt.Errorf("%w: to %s, not the document's host", errRedirect, req.URL.Host)
			}
			return nil
		},
	}}, nil
}

// fetch returns the document when it changed since the last fetch (the
// first fetch included), nil when it did not: answered 304 to the last
// response's validators, or the same bytes. A changed document is
// remembered whether or not it can be used, so that an unusable one is
// reported once.
func (d *document) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	if d.etag != "" {
		req.Header.Set("If-None-Match", d.etag)
	}
	if d.modified != "" {
		req.Header.Set("If-Modified-Since", d.modified)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && (d.etag != "" || d.modified != "") {
		return nil, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("the document's URL answered %s", resp.Status)
	}
	data, err := readBody(resp.Body, maxDocument)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("the document is larger than %d bytes", maxDocument)
	}
	if err != nil {
		return nil, err
	}
	d.etag, d.modified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	sum := sha256.Sum256(data)
	if sum == d.sum {
		return nil, nil
	}
	d.sum = sum
	return data, nil
}

// watch checks the document at every tick until ctx ends: see reload.
func (d *document) watch(ctx context.Context, tick <-chan time.Time, api string, serve func([]byte) error, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			d.reload(ctx, api, serve, logger)
		}
	}
}

// reload fetches the document and, when it changed, has serve serve the
// tools of it, those of the API called api. A document that cannot be
// fetched, or that serve refuses, leaves the tools as they are, logged.
// It reports whether serve served the document.
func (d *document) reload(ctx context.Context, api string, serve func([]byte) error, logger *slog.Logger) bool {
	data, err := d.fetch(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.Warn("httptools: the OpenAPI document cannot be fetched; the API's tools stay as they are", "api", api, "err", err)
		}
		return false
	}
	if data == nil {
		return false
	}
	if err := serve(data); err != nil {
		logger.Warn("httptools: the OpenAPI document changed and cannot be served; the API's tools stay as they are", "api", api, "err", err)
		return false
	}
	logger.Info("httptools: the OpenAPI document changed; the API's tools are rebuilt", "api", api)
	return true
}
