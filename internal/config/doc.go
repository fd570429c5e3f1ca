// Package config fills one composed configuration struct from three layers,
// each overriding the one before:
//
//  1. the defaults already in the struct when it is passed in;
//  2. a YAML file;
//  3. environment variables whose names start with a prefix such as
//     "PORTCULLIS_".
//
// Command-line flags are applied by the caller afterwards, so they win over
// everything.
//
// A struct describes its keys with yaml tags; nested structs are sections:
//
//	type Config struct {
//		Server struct {
//			Listen            string        `yaml:"listen"`
//			ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
//		} `yaml:"server"`
//	}
//
//	cfg := Config{}
//	cfg.Server.Listen = ":8080" // default
//	err := config.LoadFile(&cfg, "config.yaml", os.Environ(), "PORTCULLIS_")
//
// With a config.yaml holding
//
//	server:
//	  read_header_timeout: 10s
//
// and PORTCULLIS_SERVER_LISTEN=:9090 in the environment, cfg.Server.Listen is
// ":9090" and cfg.Server.ReadHeaderTimeout is ten seconds.
//
// # Decoding rules
//
// Decoding is strict: an unknown key, a duplicate key, or a value of the
// wrong type is an error. [Load] does not stop at the first one; it returns
// every [Problem] at once, joined with [errors.Join], each naming the dotted
// key (for example "tools.resources[1].uri") and where the value came from
// (a file line or an environment variable). [Problems] takes them apart again.
//
// Supported field types are string, bool, all integer and float kinds,
// [time.Duration], types whose pointer implements [encoding.TextUnmarshaler],
// nested structs, slices of scalars or of structs, maps with string keys
// whose values are scalars, structs or JSON values, [encoding/json.RawMessage]
// (any value, converted to JSON), and pointers to any of those. A
// field is named by its yaml tag, or by its lower-cased Go name without one;
// `yaml:"-"` skips it and `yaml:",inline"` flattens an embedded struct into
// its parent.
//
// Scalars are parsed from their text, the same way for the file and the
// environment: bools are true, false, 1 or 0 (any case); integers are decimal
// or carry a 0x, 0o or 0b prefix; durations are Go duration strings such as
// "10s" or "5m" (a bare number is an error).
//
// A map is written as a mapping of names; a problem inside one names the
// entry ("servers[0].tools[1].fixed_arguments.region"). A
// [encoding/json.RawMessage] takes whatever the YAML holds, converted to
// JSON: a mapping's keys are taken as strings, a number must be finite, a
// scalar JSON has no type for (a timestamp, binary data) is the text
// written, and null (or an empty value) is JSON null rather than "keep the
// default".
//
// A list or a map from the file or the environment replaces the default
// one rather than adding to it. A pointer to a struct that already has a value is
// copied before keys inside it are set, so a default shared between structs
// is never changed; a nil one is allocated. In the file, an empty value
// (`key:` or `key: null`) leaves the default alone, except that it sets a
// pointer to nil.
//
// # Environment variables
//
// Each settable key has one variable: the prefix followed by the key path
// upper-cased, with dots (and any other character that is not a letter,
// digit or underscore) turned into underscores, so "server.read_header_timeout"
// is PORTCULLIS_SERVER_READ_HEADER_TIMEOUT. Because keys themselves contain
// underscores, a variable is matched against the table of all names ([Keys])
// rather than split apart. A variable that carries the prefix but matches no
// key is a [Problem] that suggests the closest name. Lists are written
// comma-separated (spaces around items are trimmed and empty items dropped).
// Slices of structs, maps and JSON values can be set only in the file. A variable that is set but
// empty sets the value to empty (an empty string, an empty list), which is an
// error for numbers, bools and durations. An empty prefix turns the
// environment layer off.
//
// Kubernetes puts service-link variables into every container: the Service
// "portcullis-gw" sets PORTCULLIS_GW_SERVICE_HOST,
// PORTCULLIS_GW_PORT_8080_TCP_ADDR and more. A variable that matches no key
// but has the shape of one of these, for a Service whose name starts with
// the prefix, is not a Problem: it is ignored, and [IgnoredEnv] lists it so
// that a program can log it. A key always wins over that shape, and a
// misspelt key that happens to have it is ignored too.
//
// # JSON Schema
//
// [JSONSchema] describes the same document as a JSON Schema, by the same
// rules, for tools that check a file before Load sees it (an editor, a Helm
// chart's values.schema.json). A `schema` struct tag adds enums, URL
// patterns, minimums and required keys, which the Go type cannot say.
//
// Load stops before decoding anything if the struct type itself cannot be
// configured (an unsupported field type, or two keys that map to the same
// variable name); those problems are programming errors and carry no Source.
package config
