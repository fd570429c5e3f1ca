package httptools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
)

// argError is a call's arguments refused before any request is made: its
// text is the tool error the caller reads.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func argErrorf(format string, args ...any) error { return &argError{fmt.Sprintf(format, args...)} }

// parsePath cuts a path template into its literal pieces and params,
// mapping each {wire} name to the argument that fills it.
func parsePath(tmpl string, byWire map[string]string) []segment {
	var out []segment
	for tmpl != "" {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			out = append(out, segment{lit: tmpl})
			break
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if i > 0 {
			out = append(out, segment{lit: tmpl[:i]})
		}
		out = append(out, segment{param: byWire[tmpl[i+1:i+j]]})
		tmpl = tmpl[i+j+1:]
	}
	return out
}

// newRequest builds the request a call with args (validated against the
// input schema) becomes. Every error is an *argError.
func (t *tool) newRequest(ctx context.Context, args map[string]json.RawMessage) (*http.Request, error) {
	var path strings.Builder
	path.WriteString(t.api.basePath)
	for _, s := range t.path {
		if s.param == "" {
			path.WriteString(s.lit)
			continue
		}
		raw, ok := args[s.param]
		if !ok {
			return nil, argErrorf("the argument %q is required", s.param)
		}
		v, err := scalar(s.param, raw, ",")
		if err != nil {
			return nil, err
		}
		// One segment each: never empty, never a dot segment a server
		// or proxy would resolve, and percent-encoded, so that a '/', an
		// encoded slash or a URL stays inside it.
		if v == "" || v == "." || v == ".." {
			return nil, argErrorf("the argument %q must not be %q: it fills one path segment", s.param, v)
		}
		path.WriteString(url.PathEscape(v))
	}
	u := *t.api.base
	u.RawPath = path.String()
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, argErrorf("the path cannot be built: %v", err)
	}
	u.Path = p
	q := u.Query()
	h := make(http.Header)
	var body map[string]json.RawMessage
	for _, name := range t.argNames(args) {
		raw := args[name]
		p, mapped := t.params[name]
		if !mapped {
			p = spec.Param{Name: name, In: spec.InBody}
		}
		switch p.In {
		case spec.InPath:
		case spec.InQuery:
			vs, err := values(name, raw)
			if err != nil {
				return nil, err
			}
			if p.Joined {
				vs = []string{strings.Join(vs, ",")}
			}
			for _, v := range vs {
				q.Add(p.Wire(), v)
			}
		case spec.InHeader:
			v, err := scalar(name, raw, ",")
			if err != nil {
				return nil, err
			}
			if !validHeaderValue(v) {
				return nil, argErrorf("the argument %q is not a valid header value: no control characters (CR, LF, …)", name)
			}
			h.Set(p.Wire(), v)
		case spec.InBody:
			if t.spec.Body == spec.BodyNone {
				return nil, argErrorf("the tool takes no argument %q", name)
			}
			if body == nil {
				body = make(map[string]json.RawMessage)
			}
			body[p.Wire()] = raw
		}
	}
	for _, p := range t.spec.Params {
		if _, ok := args[p.Name]; !ok && p.Required {
			return nil, argErrorf("the argument %q is required", p.Name)
		}
	}
	u.RawQuery = q.Encode()
	var r io.Reader
	var contentType string
	switch {
	case t.spec.Body == spec.BodyJSON && (body != nil || t.spec.Method != http.MethodGet):
		if body == nil {
			body = map[string]json.RawMessage{}
		}
		b, err := json.Marshal(body)
		if err != nil {
			return nil, argErrorf("the body cannot be encoded: %v", err)
		}
		r, contentType = bytes.NewReader(b), "application/json"
	case t.spec.Body == spec.BodyForm:
		form := url.Values{}
		for _, k := range slices.Sorted(maps.Keys(body)) {
			vs, err := values(k, body[k])
			if err != nil {
				return nil, err
			}
			form[k] = vs
		}
		r, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequestWithContext(ctx, t.spec.Method, u.String(), r)
	if err != nil {
		return nil, argErrorf("the request cannot be built: %v", err)
	}
	if req.URL.Host != t.api.base.Host || req.URL.Scheme != t.api.base.Scheme {
		return nil, argErrorf("the request would leave the API")
	}
	req.Header = h
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req, nil
}

// argNames returns args' names in a stable order.
func (t *tool) argNames(args map[string]json.RawMessage) []string {
	return slices.Sorted(maps.Keys(args))
}

// scalar returns an argument's value as request text: a string as is, a
// number or boolean as JSON writes it, an array of those joined by sep;
// objects and nulls are refused.
func scalar(name string, raw json.RawMessage, sep string) (string, error) {
	vs, err := values(name, raw)
	if err != nil {
		return "", err
	}
	return strings.Join(vs, sep), nil
}

// values returns an argument's value as request texts: one for a string,
// number or boolean, one per element of an array of those.
func values(name string, raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, argErrorf("the argument %q is not valid JSON", name)
		}
		out := make([]string, 0, len(elems))
		for _, e := range elems {
			v, err := one(name, e)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	v, err := one(name, raw)
	if err != nil {
		return nil, err
	}
	return []string{v}, nil
}

func one(name string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", argErrorf("the argument %q is empty", name)
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", argErrorf("the argument %q is not valid JSON", name)
		}
		return s, nil
	case 't', 'f':
		b, err := strconv.ParseBool(string(raw))
		if err != nil {
			return "", argErrorf("the argument %q is not valid JSON", name)
		}
		return strconv.FormatBool(b), nil
	case '{', '[', 'n':
		return "", argErrorf("the argument %q must be a string, number or boolean (or an array of them)", name)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", argErrorf("the argument %q is not valid JSON", name)
	}
	return n.String(), nil
}

// validHeaderValue reports whether v may be sent as a header value: no
// control character but horizontal tab (so no CR or LF), no DEL.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
