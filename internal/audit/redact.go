package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Redacted is the value that replaces a redacted one.
const Redacted = "[REDACTED]"

// Redact returns raw (a JSON value: a call's arguments or result) with
// the value at each of paths replaced by [Redacted], and cut to max
// bytes: a value longer than max is replaced by a JSON string of its
// first max bytes, and truncated is set. A path is dot-separated keys,
// in which "*" matches any key or array element ("credentials.*.secret");
// keys match in any letter case, so that a caller cannot keep a value
// out of the redaction by spelling its key otherwise. A value that is
// not JSON is recorded as a string, cut the same way. max <= 0 means no
// cut.
func Redact(raw json.RawMessage, paths [][]string, max int) (out json.RawMessage, truncated bool) {
	if len(raw) == 0 {
		return nil, false
	}
	out = raw
	if len(paths) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			out, _ = json.Marshal(string(raw))
		} else {
			for _, p := range paths {
				v = redactPath(v, p)
			}
			if b, err := json.Marshal(v); err == nil {
				out = b
			}
		}
	}
	if max > 0 && len(out) > max {
		cut := out[:max]
		for len(cut) > 0 && !utf8.Valid(cut) {
			cut = cut[:len(cut)-1]
		}
		out, _ = json.Marshal(string(cut))
		return out, true
	}
	return out, false
}

func redactPath(v any, path []string) any {
	if len(path) == 0 {
		return Redacted
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if path[0] == "*" || strings.EqualFold(k, path[0]) {
				x[k] = redactPath(child, path[1:])
			}
		}
	case []any:
		if path[0] == "*" {
			for i := range x {
				x[i] = redactPath(x[i], path[1:])
			}
		}
	}
	return v
}

// ParsePath splits a dot-separated redaction path.
func ParsePath(p string) []string { return strings.Split(p, ".") }
