package audit

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
)

// Options is the `audit:` section of the configuration: where the audit
// events go and what of tool calls they record. The zero value sends
// none (the log's audit line of each tool call stays either way).
type Options struct {
	// Sinks are where events go, each through a queue of its own. Empty
	// means no audit events.
	Sinks []SinkOptions `yaml:"sinks"`
	// QueueSize is how many events each sink's queue holds while the
	// sink is slow or down; beyond it, events are dropped and counted in
	// portcullis_audit_events_dropped_total. Default 10000.
	QueueSize int `yaml:"queue_size" schema:"min=0"`
	// Tools choose, per tool, what of its calls the tool.call events
	// record besides the call itself: its arguments (after a virtual
	// server's fixed arguments and defaults), its result, neither by
	// default. The first entry that names or matches a tool applies.
	Tools []ToolOptions `yaml:"tools"`
}

// Sink types.
const (
	SinkStderr = "stderr"
	SinkFile   = "file"
	SinkSyslog = "syslog"
	SinkOTLP   = "otlp"
)

// SinkOptions is one place audit events go.
type SinkOptions struct {
	// Type is stderr (JSON lines beside the log), file (JSON lines
	// appended to Path), syslog (RFC 5424 to Address over TCP, or TLS) or
	// otlp (OpenTelemetry logs to a collector, configured by the
	// OTEL_EXPORTER_OTLP_* variables, or Endpoint).
	Type string `yaml:"type" schema:"required,enum=stderr|file|syslog|otlp"`
	// Path is the file of a file sink.
	Path string `yaml:"path"`
	// Address is host:port of a syslog receiver.
	Address string `yaml:"address"`
	// TLS connects to a syslog receiver with TLS (RFC 5425), verified
	// against the system's roots or CAFile.
	TLS bool `yaml:"tls"`
	// CAFile holds the PEM certificates a syslog receiver's TLS
	// certificate is verified against, instead of the system's.
	CAFile string `yaml:"ca_file"`
	// Format of a syslog message: json (the event as JSON, default) or
	// cef (ArcSight's Common Event Format).
	Format string `yaml:"format" schema:"enum=json|cef"`
	// Facility is the syslog facility, 0 to 23. Default 13 (log audit).
	Facility *int `yaml:"facility"`
	// Endpoint is the URL an otlp sink posts logs to (such as
	// http://collector:4318/v1/logs). Empty means the
	// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
	// variable, else http://localhost:4318/v1/logs.
	Endpoint string `yaml:"endpoint"`
}

// ToolOptions is what the tool.call events of some tools record.
type ToolOptions struct {
	// Tool is a tool's name as callers call it, or a pattern as
	// path.Match takes it ("*" for every tool).
	Tool string `yaml:"tool" schema:"required"`
	// Arguments records the call's arguments.
	Arguments bool `yaml:"arguments"`
	// Result records the call's result.
	Result bool `yaml:"result"`
	// Redact are paths (dot-separated keys, "*" for any key or element,
	// matched in any letter case) whose values are recorded as the string
	// "REDACTED" in brackets, in the arguments and the result.
	Redact []string `yaml:"redact"`
	// MaxBytes caps what is recorded of the arguments, and of the result,
	// each: a longer one is recorded as a string of its first MaxBytes
	// bytes, and the event marked truncated. Default 4096.
	MaxBytes int `yaml:"max_bytes" schema:"min=0"`
}

// Defaults.
const (
	DefaultQueueSize = 10000
	DefaultFacility  = 13
	DefaultMaxBytes  = 4096
)

// Defaults fills unset fields.
func (o *Options) Defaults() {
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	for i := range o.Sinks {
		s := &o.Sinks[i]
		if s.Type == SinkSyslog {
			if s.Format == "" {
				s.Format = FormatJSON
			}
			if s.Facility == nil {
				s.Facility = new(DefaultFacility)
			}
		}
	}
	for i := range o.Tools {
		if o.Tools[i].MaxBytes == 0 {
			o.Tools[i].MaxBytes = DefaultMaxBytes
		}
	}
}

// Validate reports every problem at once, each as "key: problem"
// relative to the section.
func (o *Options) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if o.QueueSize < 0 {
		add("queue_size", "must not be negative")
	}
	seen := map[string]bool{}
	for i, s := range o.Sinks {
		k := fmt.Sprintf("sinks[%d]", i)
		switch s.Type {
		case SinkStderr, SinkOTLP:
		case SinkFile:
			if s.Path == "" {
				add(k+".path", "required for a file sink")
			}
		case SinkSyslog:
			if _, _, err := net.SplitHostPort(s.Address); err != nil {
				add(k+".address", "want host:port of the syslog receiver: %v", err)
			}
			if s.Format != "" && s.Format != FormatJSON && s.Format != FormatCEF {
				add(k+".format", "must be json or cef, got %q", s.Format)
			}
			if s.Facility != nil && (*s.Facility < 0 || *s.Facility > 23) {
				add(k+".facility", "must be between 0 and 23, got %d", *s.Facility)
			}
			if s.CAFile != "" && !s.TLS {
				add(k+".ca_file", "set without tls")
			}
		case "":
			add(k+".type", "required: stderr, file, syslog or otlp")
		default:
			add(k+".type", "must be stderr, file, syslog or otlp, got %q", s.Type)
		}
		if s.Type != SinkSyslog && (s.Address != "" || s.TLS || s.CAFile != "" || s.Format != "" || s.Facility != nil) {
			add(k, "address, tls, ca_file, format and facility are a syslog sink's")
		}
		if s.Type != SinkFile && s.Path != "" {
			add(k+".path", "a file sink's")
		}
		if s.Type != SinkOTLP && s.Endpoint != "" {
			add(k+".endpoint", "an otlp sink's")
		}
		if s.Type != "" && s.Type != SinkFile && seen[s.Type] {
			add(k+".type", "a second %s sink", s.Type)
		}
		seen[s.Type] = true
	}
	for i, t := range o.Tools {
		k := fmt.Sprintf("tools[%d]", i)
		if t.Tool == "" {
			add(k+".tool", "required")
		} else if _, err := path.Match(t.Tool, ""); err != nil {
			add(k+".tool", "%q: a malformed pattern: %v", t.Tool, err)
		}
		if t.MaxBytes < 0 {
			add(k+".max_bytes", "must not be negative")
		}
		for j, p := range t.Redact {
			if strings.TrimSpace(p) == "" || strings.Contains(p, "..") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") {
				add(fmt.Sprintf("%s.redact[%d]", k, j), "%q: want dot-separated keys", p)
			}
		}
	}
	return errors.Join(errs...)
}

// Enabled reports whether any sink is configured.
func (o *Options) Enabled() bool { return len(o.Sinks) > 0 }

// Recording is what the tool.call events of one tool record.
type Recording struct {
	Arguments, Result bool
	Redact            [][]string
	MaxBytes          int
}

// For returns what the tool.call events of tool record; zero when no
// entry names or matches it.
func (o *Options) For(tool string) Recording {
	for _, t := range o.Tools {
		if ok, err := path.Match(t.Tool, tool); ok && err == nil {
			r := Recording{Arguments: t.Arguments, Result: t.Result, MaxBytes: t.MaxBytes}
			for _, p := range t.Redact {
				r.Redact = append(r.Redact, ParsePath(p))
			}
			return r
		}
	}
	return Recording{}
}
