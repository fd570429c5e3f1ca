package chartschema

import (
	"errors"
	"fmt"
	"go/doc"
	"reflect"
	"regexp"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// describe returns the description of the key that field (of struct
// type owner) sets: the first sentence of its doc comment, or all of it
// when d.full is set, with the Go names of owner's fields in it replaced
// by their keys, the names an operator writes: "jwks_max_age is how long
// fetched keys are trusted…", "tool_timeouts overrides tool_timeout…".
func (d *docs) describe(owner reflect.Type, field reflect.StructField, _ string) string {
	return d.fieldDoc(owner, field, !d.full)
}

// fieldDoc returns the doc comment of field of struct type owner, with the
// Go names of owner's fields replaced by their keys and its doc links to
// constants by their values: the whole comment, or its first sentence
// when short is set.
func (d *docs) fieldDoc(owner reflect.Type, field reflect.StructField, short bool) string {
	if owner.Name() == "" || owner.PkgPath() == "" {
		return "" // an anonymous struct has no doc to find
	}
	src, err := d.pkg(owner.PkgPath())
	if err != nil {
		d.err = errors.Join(d.err, err)
		return ""
	}
	text := src.fields[owner.Name()+"."+field.Name]
	if text == "" {
		return ""
	}
	if short {
		var pkg doc.Package
		text = pkg.Synopsis(text)
	}
	text, err = d.resolveLinks(src, d.keyNames(owner).Replace(text))
	if err != nil {
		d.err = errors.Join(d.err, fmt.Errorf("chartschema: the doc comment of %s.%s: %w", owner, field.Name, err))
	}
	return text
}

// keyNames returns a replacer of the Go names of the fields of struct
// type owner, as whole words, by their keys.
func (d *docs) keyNames(owner reflect.Type) *wordReplacer {
	if r, ok := d.names[owner]; ok {
		return r
	}
	r := &wordReplacer{words: map[string]string{}}
	var alts []string
	for i := range owner.NumField() {
		f := owner.Field(i)
		if key := config.FieldKey(f); key != "" {
			r.words[f.Name] = key
			alts = append(alts, regexp.QuoteMeta(f.Name))
		}
	}
	if len(alts) > 0 {
		r.re = regexp.MustCompile(`\b(` + strings.Join(alts, "|") + `)\b`)
	}
	d.names[owner] = r
	return r
}
