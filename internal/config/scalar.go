package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// setText parses s by the rules for v's type and stores the result in v. A
// pointer is given a newly allocated value, and only when s parses.
func setText(v reflect.Value, s string) error {
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		p := reflect.New(t.Elem())
		if err := setText(p.Elem(), s); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if t == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		p := reflect.New(t)
		if err := p.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return err
		}
		v.Set(p.Elem())
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "true", "1":
			v.SetBool(true)
		case "false", "0":
			v.SetBool(false)
		default:
			return fmt.Errorf("invalid boolean %q (want true, false, 1 or 0)", s)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, intBase(s), t.Bits())
		if err != nil {
			return numError(err, "integer", s, t)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(s, intBase(s), t.Bits())
		if err != nil {
			return numError(err, "non-negative integer", s, t)
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, t.Bits())
		if err != nil {
			return numError(err, "number", s, t)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("config: cannot set %s from text", t) // unreachable: the schema rejects such types
	}
	return nil
}

// intBase returns 0 (let strconv read the prefix) for integers written with
// a 0x, 0o or 0b prefix, and 10 otherwise, so that "010" is ten, not eight.
func intBase(s string) int {
	u := strings.TrimLeft(s, "+-")
	if len(u) > 2 && u[0] == '0' && strings.ContainsRune("xXoObB", rune(u[1])) {
		return 0
	}
	return 10
}

func numError(err error, what, s string, t reflect.Type) error {
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return fmt.Errorf("%s %s is out of range for %s", what, s, t)
	}
	return fmt.Errorf("invalid %s %q", what, s)
}

// describe says in words what a value of type t is written as.
func describe(t reflect.Type) string {
	t = deref(t)
	switch {
	case t == durationType:
		return `a duration such as "10s"`
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return "a " + t.String()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}
