package openapitools

import (
	"reflect"
	"slices"
)

// annotations are the keywords that describe rather than constrain: when
// two schemas merged into one both have one, the first's is kept.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// mergeInto merges the JSON Schema src into dst, as the two would apply
// together under allOf: properties are merged (a property both have, by
// merging its two schemas), required names joined, types intersected, and
// an annotation both have kept from dst. It returns what of src could not
// be merged (a keyword both have with other values, such as two patterns),
// which still applies beside dst: the caller keeps it under allOf.
func mergeInto(dst, src map[string]any) map[string]any {
	left := map[string]any{}
	for k, v := range src {
		dv, ok := dst[k]
		switch {
		case !ok:
			dst[k] = v
		case reflect.DeepEqual(dv, v), annotations[k]:
		case k == "properties":
			dst[k] = mergeProperties(dv.(map[string]any), v.(map[string]any))
		case k == "required":
			dst[k] = joinNames(dv.([]string), v.([]string))
		case k == "type":
			if t, ok := intersectTypes(dv, v); ok {
				dst[k] = t
			} else {
				left[k] = v
			}
		default:
			left[k] = v
		}
	}
	return left
}

// mergeProperties returns the properties of a and b, merging the schemas
// of a property both have.
func mergeProperties(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		av, ok := out[k]
		if !ok {
			out[k] = v
			continue
		}
		m := clone(av.(map[string]any))
		if left := mergeInto(m, v.(map[string]any)); len(left) > 0 {
			m["allOf"] = append(allOfOf(m), left)
		}
		out[k] = m
	}
	return out
}

// clone copies a schema's top level, so that merging into it leaves the
// schema it came from as it was.
func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// allOfOf returns a copy of the schema's allOf list, empty when it has none.
func allOfOf(m map[string]any) []any {
	l, _ := m["allOf"].([]any)
	return slices.Clone(l)
}

// joinNames returns a followed by the names of b it does not hold.
func joinNames(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// intersectTypes returns the types two "type" keywords (a string or a
// list of strings) both allow, as a string when there is one, and false
// when there is none.
func intersectTypes(a, b any) (any, bool) {
	as, bs := typeList(a), typeList(b)
	var both []string
	for _, t := range as {
		if slices.Contains(bs, t) || (t == "integer" && slices.Contains(bs, "number")) {
			both = append(both, t)
		} else if t == "number" && slices.Contains(bs, "integer") {
			both = append(both, "integer")
		}
	}
	switch len(both) {
	case 0:
		return nil, false
	case 1:
		return both[0], true
	}
	return both, true
}

func typeList(t any) []string {
	switch t := t.(type) {
	case string:
		return []string{t}
	case []string:
		return t
	}
	return nil
}
