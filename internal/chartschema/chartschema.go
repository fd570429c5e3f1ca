// Package chartschema writes the config part of the Helm chart's
// values.schema.json from the server's Go config types, so that every key
// the server accepts is a key the chart accepts, described by the same
// words as in the Go code.
//
// The schema of the config file comes from [config.JSONSchema]; this
// package adds what only the chart knows ([Overrides]: the keys the chart
// sets itself, the durations it sums), the descriptions (the first sentence
// of each field's doc comment, read from the source with go/doc, its doc
// links to constants written as their values: "Zero means
// [DefaultFetchTimeout]" becomes "Zero means `5s`"), and
// replaces properties.config in values.schema.json, leaving the rest of
// that hand-kept file byte for byte as it was.
//
// The root package's TestGenerateChartSchema calls [Generate] with its
// configuration type and [Overrides];
// `go generate .` at the module root rewrites the file.
//
// [Reference] walks the same types to write docs/configuration.md, a
// Markdown reference of every key with the whole doc comment of each;
// the root package's TestConfigReference calls it, and the
// same `go generate .` rewrites the page.
package chartschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// Description is the description of the config part of the schema.
const Description = "The Portcullis configuration file (keys of `portcullis check-config --keys`). " +
	"Generated from the Go config types by `go generate` at the module root: do not edit."

// Override changes the generated schema of one key for the chart.
type Override struct {
	// Key is the dotted key path, such as "server.listen"; "[]" after a
	// list's name steps into its elements ("auth.issuers[].issuer").
	Key string
	// ChartOwned removes the key: the chart sets it, from other values, and
	// a value here would be ignored. The section's description says so.
	ChartOwned bool
	// Pattern, when set, replaces the key's pattern.
	Pattern string
	// NonEmpty requires a non-empty string.
	NonEmpty bool
	// Note is appended to the key's description.
	Note string
}

// wholeDuration is a duration the chart can add up with regexFind in
// _helpers.tpl (portcullis.seconds): whole hours, minutes and seconds.
const wholeDuration = `^(0|([0-9]+h)?([0-9]+m)?([0-9]+s)?)$`

// Overrides is what the chart knows about config keys and the Go types do
// not. Keep it in step with helm/portcullis/templates/_helpers.tpl.
var Overrides = []Override{
	// portcullis.config sets the listen addresses to the container ports
	// and the secret files to where the chart mounts its Secrets.
	{Key: "server.listen", ChartOwned: true},
	{Key: "server.metrics_listen", ChartOwned: true},
	{Key: "mcp.request_state.keys_file", ChartOwned: true},
	{Key: "auth.introspection.client_secret_file", ChartOwned: true},
	{Key: "mcp.request_state", Note: "Its keys come from the requestState values."},
	{Key: "auth.introspection", Note: "Its client secret comes from the introspection values."},
	{Key: "authorization_server.keys_file", ChartOwned: true},
	{Key: "authorization_server.idp.client_secret_file", ChartOwned: true},
	{Key: "authorization_server", Note: "Its signing keys and its client secret at the identity provider come from the authorizationServer values."},
	{Key: "connections.keys_file", ChartOwned: true},
	{Key: "connections", Note: "Its keys come from the connections values."},
	// The redis values name the deployment (the URL, the sentinels, the
	// cluster's nodes), the passwords (from Secrets, as
	// PORTCULLIS_REDIS_PASSWORD and PORTCULLIS_REDIS_SENTINEL_PASSWORD)
	// and the CA file (a mounted Secret).
	{Key: "redis.url", ChartOwned: true},
	{Key: "redis.sentinel.master_name", ChartOwned: true},
	{Key: "redis.sentinel.addresses", ChartOwned: true},
	{Key: "redis.sentinel.password", ChartOwned: true},
	{Key: "redis.cluster.addresses", ChartOwned: true},
	{Key: "redis.password", ChartOwned: true},
	{Key: "redis.tls.ca_file", ChartOwned: true},
	{Key: "redis", Note: "Its url, sentinel (master name, addresses, password), cluster, password and CA come from the redis values."},
	// portcullis.validate adds these two up (portcullis.seconds) to check
	// terminationGracePeriodSeconds, which only works for whole h, m and s.
	{Key: "server.drain_delay", Pattern: wholeDuration, NonEmpty: true, Note: "Whole h, m and s only, e.g. 25s or 1m30s: the chart adds it to shutdown_grace to check terminationGracePeriodSeconds."},
	{Key: "server.shutdown_grace", Pattern: wholeDuration, NonEmpty: true, Note: "Whole h, m and s only, e.g. 25s or 1m30s: the chart adds it to drain_delay to check terminationGracePeriodSeconds."},
	// portcullis.validate requires the path the server serves MCP at.
	{Key: "auth.resource", Pattern: `^(https?://[^/?#]+/mcp)?$`},
}

// ChartOwned returns the keys of Overrides that the chart sets itself.
func ChartOwned() []string {
	var keys []string
	for _, o := range Overrides {
		if o.ChartOwned {
			keys = append(keys, o.Key)
		}
	}
	return keys
}

// Generate returns values (the text of values.schema.json) with
// properties.config replaced by the schema of the config struct cfg, its
// descriptions read from the Go source of the module in root, with
// overrides ([Overrides] for the chart) applied.
func Generate(cfg any, root string, values []byte, overrides []Override) ([]byte, error) {
	d, err := newDocs(root)
	if err != nil {
		return nil, err
	}
	s, err := config.JSONSchema(cfg, &config.SchemaOptions{Describe: d.describe})
	if err != nil {
		return nil, err
	}
	if d.err != nil {
		return nil, d.err
	}
	s.Description = Description
	if err := Apply(s, overrides); err != nil {
		return nil, err
	}
	return Splice(values, s)
}

// Apply applies overrides to s, the schema of the config file. A key that
// is not in s is an error, so an override cannot outlive its key.
func Apply(s *jsonschema.Schema, overrides []Override) error {
	var errs []error
	owned := map[*jsonschema.Schema][]string{} // section → keys the chart sets
	var sections []*jsonschema.Schema
	for _, o := range overrides {
		parent, name, p := lookup(s, o.Key)
		if p == nil {
			errs = append(errs, fmt.Errorf("chartschema: override of %s: no such key", o.Key))
			continue
		}
		if o.ChartOwned {
			delete(parent.Properties, name)
			parent.PropertyOrder = slices.DeleteFunc(parent.PropertyOrder, func(k string) bool { return k == name })
			parent.Required = slices.DeleteFunc(parent.Required, func(k string) bool { return k == name })
			if owned[parent] == nil {
				sections = append(sections, parent)
			}
			owned[parent] = append(owned[parent], name)
			continue
		}
		if o.Pattern != "" {
			p.Pattern = o.Pattern
		}
		if o.NonEmpty {
			p.MinLength = new(1)
		}
		p.Description = sentences(p.Description, o.Note)
	}
	for _, sec := range sections {
		keys := owned[sec]
		sec.Description = sentences(sec.Description, "The chart sets "+strings.Join(keys, " and ")+".")
	}
	return errors.Join(errs...)
}

func sentences(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + " " + b
}

// lookup finds the schema of the key at path in s, and the object schema
// holding it and its name there.
func lookup(s *jsonschema.Schema, path string) (parent *jsonschema.Schema, name string, p *jsonschema.Schema) {
	p = s
	for elem := range strings.SplitSeq(path, ".") {
		var list bool
		name, list = strings.CutSuffix(elem, "[]")
		parent = p
		if p = p.Properties[name]; p == nil {
			return nil, "", nil
		}
		if list {
			if p.Items == nil {
				return nil, "", nil
			}
			p = p.Items
		}
	}
	return parent, name, p
}

// Splice returns values with the value of properties.config replaced by
// cfg, indented to its depth with two spaces. Everything else is kept as
// it was.
func Splice(values []byte, cfg *jsonschema.Schema) ([]byte, error) {
	start, end, err := findConfig(values)
	if err != nil {
		return nil, err
	}
	compact, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("chartschema: %w", err)
	}
	var indented bytes.Buffer
	// properties.config sits two objects deep, so its lines start with
	// four spaces.
	if err := json.Indent(&indented, compact, "    ", "  "); err != nil {
		return nil, fmt.Errorf("chartschema: %w", err)
	}
	out := slices.Concat(values[:start], indented.Bytes(), values[end:])
	return out, nil
}

// findConfig returns the byte range of the value of properties.config in
// the JSON object in values.
func findConfig(values []byte) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(values))
	// expectObject reads the '{' that opens an object.
	expectObject := func(what string) error {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("chartschema: values schema: %w", err)
		}
		if tok != json.Delim('{') {
			return fmt.Errorf("chartschema: values schema: %s is not an object", what)
		}
		return nil
	}
	// find reads keys of the current object up to key, skipping the other
	// values, and reports whether it found it.
	find := func(key string) (bool, error) {
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return false, fmt.Errorf("chartschema: values schema: %w", err)
			}
			if tok == key {
				return true, nil
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return false, fmt.Errorf("chartschema: values schema: %w", err)
			}
		}
		return false, nil
	}
	if err := expectObject("the document"); err != nil {
		return 0, 0, err
	}
	if ok, err := find("properties"); err != nil || !ok {
		return 0, 0, errors.Join(err, errors.New("chartschema: values schema has no properties"))
	}
	if err := expectObject("properties"); err != nil {
		return 0, 0, err
	}
	if ok, err := find("config"); err != nil || !ok {
		return 0, 0, errors.Join(err, errors.New("chartschema: values schema has no properties.config"))
	}
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return 0, 0, fmt.Errorf("chartschema: values schema: properties.config: %w", err)
	}
	end = int(dec.InputOffset())
	return end - len(v), end, nil
}
