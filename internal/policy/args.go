package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Arguments. A rule sees a call's arguments as the tool would receive
// them, decoded strictly so that no two readers of the same bytes can
// disagree about what they say:
//
//   - an object that names one key twice is refused (one JSON decoder
//     keeps the first, another the last);
//   - an object holding two keys that differ only in letter case or by
//     Unicode simple folding ("db" and "DB", "s" and "ſ") is refused,
//     since a decoder that matches names case-insensitively, as Go's
//     encoding/json does, reads either;
//   - a key that folds to a name the rules read but is not that name
//     exactly ("Database" where a rule reads args.database) is refused,
//     for the same reason;
//   - a number is an int when written as an integer that fits in 64 bits,
//     else a double; a string is always a string, so "5" is not 5;
//   - a string that is not valid UTF-8 is refused, as is nesting deeper
//     than [maxDepth].
//
// Arguments that are absent or null are the empty object; anything else
// that is not an object is refused.

// maxDepth bounds the nesting of arguments a rule reads.
const maxDepth = 64

// errArguments is the cause of every refusal of arguments as such.
var errArguments = errors.New("policy: arguments")

// argNames are what decodeArguments checks and decodes of arguments for
// a tool's rules.
type argNames struct {
	// exact holds the names the rules read; folded maps the fold key of
	// each (see foldKey) to it.
	exact  map[string]bool
	folded map[string]string
	// top are the arguments the rules read by name; all is set when they
	// read arguments otherwise, and every argument is decoded.
	top map[string]bool
	all bool
}

func newArgNames(names, top []string, all bool) *argNames {
	n := &argNames{exact: map[string]bool{}, folded: map[string]string{}, top: map[string]bool{}, all: all}
	for _, name := range names {
		n.exact[name] = true
		n.folded[foldKey(name)] = name
	}
	for _, name := range top {
		n.top[name] = true
	}
	return n
}

// decodeArguments decodes raw, a call's arguments, strictly (see above).
// names holds the names the rules read, against which keys are checked
// for folding, and the arguments to decode: the others are checked as
// the rest and left out of the result (nil names: none read, all decoded).
func decodeArguments(raw []byte, names *argNames) (map[string]any, error) {
	if names == nil {
		names = &argNames{all: true}
	}
	d := decoder{data: raw, names: names}
	d.skipSpace()
	if d.pos == len(d.data) {
		return map[string]any{}, nil
	}
	if d.data[d.pos] != '{' {
		if d.literal("null") {
			d.skipSpace()
			if d.pos == len(d.data) {
				return map[string]any{}, nil
			}
		}
		return nil, fmt.Errorf("%w: not a JSON object", errArguments)
	}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, fmt.Errorf("%w: data after the object", errArguments)
	}
	out := v.(map[string]any)
	if !names.all {
		for k, v := range out {
			if _, ok := v.(skipped); ok {
				delete(out, k)
			}
		}
	}
	return out, nil
}

type decoder struct {
	data  []byte
	pos   int
	names *argNames
}

func (d *decoder) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errArguments, what, d.pos)
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) literal(s string) bool {
	if len(d.data)-d.pos >= len(s) && string(d.data[d.pos:d.pos+len(s)]) == s {
		d.pos += len(s)
		return true
	}
	return false
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, d.fail("nested too deep")
	}
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, d.fail("unexpected end")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == 't':
		if d.literal("true") {
			return true, nil
		}
	case c == 'f':
		if d.literal("false") {
			return false, nil
		}
	case c == 'n':
		if d.literal("null") {
			return nil, nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, d.fail("invalid value")
}

func (d *decoder) object(depth int) (any, error) {
	d.pos++ // {
	out := map[string]any{}
	var folded map[string]string // fold key → key, past smallObject keys
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return out, nil
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.fail("expected a key")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: the key %q appears twice", errArguments, k)
		}
		if err := d.checkFold(out, &folded, k); err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.fail("expected ':'")
		}
		d.pos++
		if depth == 0 && !d.names.all && !d.names.top[k] {
			// An argument no rule reads: passed over, not kept. Its key
			// in out still tells a duplicate or a folded key.
			if err := d.skipValue(); err != nil {
				return nil, err
			}
			out[k] = skipped{}
		} else {
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.fail("unexpected end")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return out, nil
		default:
			return nil, d.fail("expected ',' or '}'")
		}
	}
}

// smallObject is the most keys an object is checked for folding pairwise;
// a larger one is checked through a map of fold keys.
const smallObject = 8

// checkFold refuses k when it folds to another key of obj or to a name
// the rules read without being it. folded holds obj's fold keys once it
// outgrows smallObject.
func (d *decoder) checkFold(obj map[string]any, folded *map[string]string, k string) error {
	if len(d.names.folded) > 0 && !d.names.exact[k] {
		if n, ok := d.names.folded[foldKeyFast(k)]; ok {
			return fmt.Errorf("%w: the key %q is not %q, which the policy reads", errArguments, k, n)
		}
	}
	if len(obj) < smallObject {
		for other := range obj {
			if strings.EqualFold(other, k) {
				return fmt.Errorf("%w: the keys %q and %q differ only in letter case", errArguments, other, k)
			}
		}
		return nil
	}
	if *folded == nil {
		*folded = make(map[string]string, 2*len(obj))
		for other := range obj {
			(*folded)[foldKey(other)] = other
		}
	}
	fk := foldKey(k)
	if other, ok := (*folded)[fk]; ok {
		return fmt.Errorf("%w: the keys %q and %q differ only in letter case", errArguments, other, k)
	}
	(*folded)[fk] = k
	return nil
}

// skipValue passes over one value without decoding it: to the end of
// its string, or of its object or array, brackets inside strings
// ignored; or to the next ',', '}' or ']' for a scalar.
func (d *decoder) skipValue() error {
	d.skipSpace()
	depth := 0
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; c {
		case '"':
			d.pos++
			for d.pos < len(d.data) && d.data[d.pos] != '"' {
				if d.data[d.pos] == '\\' {
					d.pos++
				}
				d.pos++
			}
			if d.pos >= len(d.data) {
				return d.fail("an unterminated string")
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return nil
			}
			depth--
		case ',':
			if depth == 0 {
				return nil
			}
		}
		d.pos++
		if depth == 0 && (d.data[d.pos-1] == '"' || d.data[d.pos-1] == '}' || d.data[d.pos-1] == ']') {
			return nil
		}
	}
	if depth > 0 {
		return d.fail("unexpected end")
	}
	return nil
}

// skipped stands, in decoded arguments, for an argument no rule reads;
// it is removed before the rules see them.
type skipped struct{}

// foldKeyFast is foldKey, without allocating for a short ASCII s (an
// ASCII letter's least fold is its upper case).
func foldKeyFast(s string) string {
	var buf [64]byte
	if len(s) > len(buf) {
		return foldKey(s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			return foldKey(s)
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	return string(buf[:len(s)])
}

// foldKey maps s to a string that two strings share exactly when
// strings.EqualFold says they are equal: each rune replaced by the least
// rune of its simple case-folding orbit.
func foldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

func (d *decoder) array(depth int) (any, error) {
	d.pos++ // [
	out := []any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return out, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.fail("unexpected end")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return out, nil
		default:
			return nil, d.fail("expected ',' or ']'")
		}
	}
}

// str reads a string; d.data[d.pos] is its opening quote.
func (d *decoder) str() (string, error) {
	d.pos++
	start := d.pos
	// The common case: no escapes, ASCII or valid UTF-8.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			if !utf8.Valid(s) {
				return "", d.fail("a string that is not UTF-8")
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.fail("a control character in a string")
		}
		d.pos++
	}
	var b strings.Builder
	b.Write(d.data[start:d.pos])
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			s := b.String()
			if !utf8.ValidString(s) {
				return "", d.fail("a string that is not UTF-8")
			}
			return s, nil
		case c < 0x20:
			return "", d.fail("a control character in a string")
		case c != '\\':
			b.WriteByte(c)
			d.pos++
			continue
		}
		d.pos++
		if d.pos >= len(d.data) {
			break
		}
		e := d.data[d.pos]
		d.pos++
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", d.fail("an invalid \\u escape")
			}
			if r >= 0xD800 && r < 0xDC00 {
				// A high surrogate must be followed by a low one.
				if !d.literal(`\u`) {
					return "", d.fail("a lone surrogate")
				}
				lo, ok := d.hex4()
				if !ok || lo < 0xDC00 || lo >= 0xE000 {
					return "", d.fail("a lone surrogate")
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			} else if r >= 0xDC00 && r < 0xE000 {
				return "", d.fail("a lone surrogate")
			}
			b.WriteRune(r)
		default:
			return "", d.fail("an invalid escape")
		}
	}
	return "", d.fail("an unterminated string")
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	d.pos += 4
	return r, true
}

// number reads a JSON number: an int64 when written as an integer that
// fits, else a float64.
func (d *decoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	intStart := d.pos
	n := digits()
	if n == 0 || (n > 1 && d.data[intStart] == '0') {
		return nil, d.fail("an invalid number")
	}
	integral := true
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return nil, d.fail("an invalid number")
		}
		integral = false
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, d.fail("an invalid number")
		}
		integral = false
	}
	text := string(d.data[start:d.pos])
	if integral {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) {
		return nil, d.fail("a number out of range")
	}
	return f, nil
}
