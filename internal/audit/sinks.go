package audit

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Lines is a sink that writes each event as one line of JSON to a
// writer: stderr, or a file it opens for appending.
type Lines struct {
	name string
	mu   sync.Mutex
	w    io.Writer
	c    io.Closer // nil for a writer the sink does not own
	buf  []byte
}

// NewLines returns a sink named name writing to w, which it does not
// close.
func NewLines(name string, w io.Writer) *Lines { return &Lines{name: name, w: w} }

// OpenLines returns a sink writing to the file at path, created with
// mode 0600 if missing and appended to.
func OpenLines(path string) (*Lines, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &Lines{name: "file", w: f, c: f}, nil
}

// Name implements [Sink].
func (l *Lines) Name() string { return l.name }

// Write implements [Sink]: the batch in one write.
func (l *Lines) Write(_ context.Context, events []*Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = l.buf[:0]
	for _, e := range events {
		l.buf = append(l.buf, e.JSON()...)
		l.buf = append(l.buf, '\n')
	}
	_, err := l.w.Write(l.buf)
	return err
}

// Close implements [Sink].
func (l *Lines) Close() error {
	if l.c != nil {
		return l.c.Close()
	}
	return nil
}

// Syslog formats.
const (
	// FormatJSON puts the event's JSON in the syslog message.
	FormatJSON = "json"
	// FormatCEF puts the event in ArcSight's Common Event Format.
	FormatCEF = "cef"
)

// SyslogOptions configure a [Syslog] sink.
type SyslogOptions struct {
	// Address is host:port of the syslog receiver.
	Address string
	// TLS, when set, connects with TLS (RFC 5425); nil is plain TCP
	// (RFC 6587's octet counting).
	TLS *tls.Config
	// Facility is the syslog facility, 0–23. Zero is kern's: callers set
	// it (the configuration's default is 13, log audit).
	Facility int
	// Format is [FormatJSON] or [FormatCEF].
	Format string
	// Hostname and AppName fill the header; AppName "" means
	// "portcullis", Hostname "" the host's name.
	Hostname, AppName string
	// Version is the product version CEF names.
	Version string
	// DialTimeout bounds a connection attempt and each write. Zero means 5s.
	DialTimeout time.Duration
}

// Syslog is a sink that sends events to a syslog receiver as RFC 5424
// messages over TCP or TLS, framed by octet counting (RFC 6587, RFC
// 5425). It connects on the first Write and again after a failure.
type Syslog struct {
	o    SyslogOptions
	conn net.Conn
	w    *bufio.Writer
	buf  []byte
	pid  string
}

// NewSyslog returns a syslog sink; it connects when it first writes.
func NewSyslog(o SyslogOptions) *Syslog {
	if o.AppName == "" {
		o.AppName = "portcullis"
	}
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Format == "" {
		o.Format = FormatJSON
	}
	return &Syslog{o: o, pid: strconv.Itoa(os.Getpid())}
}

// Name implements [Sink].
func (s *Syslog) Name() string { return "syslog" }

func (s *Syslog) connect(ctx context.Context) error {
	d := &net.Dialer{Timeout: s.o.DialTimeout}
	var c net.Conn
	var err error
	if s.o.TLS != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: s.o.TLS}).DialContext(ctx, "tcp", s.o.Address)
	} else {
		c, err = d.DialContext(ctx, "tcp", s.o.Address)
	}
	if err != nil {
		return fmt.Errorf("audit: syslog %s: %w", s.o.Address, err)
	}
	s.conn, s.w = c, bufio.NewWriterSize(c, 32<<10)
	return nil
}

// Write implements [Sink].
func (s *Syslog) Write(ctx context.Context, events []*Event) error {
	if s.conn == nil {
		if err := s.connect(ctx); err != nil {
			return err
		}
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.o.DialTimeout))
	for _, e := range events {
		s.buf = s.message(s.buf[:0], e)
		s.w.WriteString(strconv.Itoa(len(s.buf)))
		s.w.WriteByte(' ')
		s.w.Write(s.buf)
	}
	if err := s.w.Flush(); err != nil {
		s.conn.Close()
		s.conn = nil
		return fmt.Errorf("audit: syslog %s: %w", s.o.Address, err)
	}
	return nil
}

// Close implements [Sink].
func (s *Syslog) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// severity is an event's syslog severity: notice for refusals and
// failures, warning for a reused refresh token, info otherwise.
func severity(e *Event) int {
	switch {
	case e.Type == TypeTokenReused:
		return 4
	case e.Outcome == OutcomeRefused || e.Outcome == OutcomeFailure || e.Outcome == OutcomeError:
		return 5
	}
	return 6
}

// message appends e as an RFC 5424 message: header, no structured data,
// and the event as the message, UTF-8 with its BOM.
func (s *Syslog) message(b []byte, e *Event) []byte {
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(s.o.Facility*8+severity(e)), 10)
	b = append(b, ">1 "...)
	b = e.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	b = append(b, ' ')
	b = appendHeaderField(b, s.o.Hostname, 255)
	b = append(b, ' ')
	b = appendHeaderField(b, s.o.AppName, 48)
	b = append(b, ' ')
	b = appendHeaderField(b, s.pid, 128)
	b = append(b, ' ')
	b = appendHeaderField(b, e.Type, 32)
	b = append(b, " - \xef\xbb\xbf"...)
	if s.o.Format == FormatCEF {
		return appendCEF(b, e, s.o.Version)
	}
	return append(b, e.JSON()...)
}

// appendHeaderField appends v as a header field of RFC 5424: printable
// US-ASCII, at most max, "-" when empty.
func appendHeaderField(b []byte, v string, max int) []byte {
	n := 0
	for i := 0; i < len(v) && n < max; i++ {
		if c := v[i]; c > 32 && c < 127 {
			b = append(b, c)
			n++
		}
	}
	if n == 0 {
		b = append(b, '-')
	}
	return b
}

// appendCEF appends e in the Common Event Format: the header's fields
// escaped for '|' and '\', the extension's values for '=', '\' and
// newlines.
func appendCEF(b []byte, e *Event, version string) []byte {
	sev := map[int]string{4: "7", 5: "5", 6: "3"}[severity(e)]
	b = append(b, "CEF:0|Portcullis|Portcullis|"...)
	b = cefHeader(b, version)
	b = append(b, '|')
	b = cefHeader(b, e.Type)
	b = append(b, '|')
	b = cefHeader(b, e.Type+" "+e.Outcome)
	b = append(b, '|')
	b = append(b, sev...)
	b = append(b, '|')
	ext := []struct{ k, v string }{
		{"rt", strconv.FormatInt(e.Time.UnixMilli(), 10)},
		{"externalId", e.ID},
		{"outcome", e.Outcome},
		{"suser", e.Actor.Subject},
		{"cs1Label", "issuer"}, {"cs1", e.Actor.Issuer},
		{"cs2Label", "client_id"}, {"cs2", e.Actor.ClientID},
		{"cs3Label", "tool"}, {"cs3", e.Tool},
		{"cs4Label", "server"}, {"cs4", e.Server},
		{"cs5Label", "rule"}, {"cs5", e.Rule},
		{"cs6Label", "trace_id"}, {"cs6", e.TraceID},
		{"reason", e.Reason},
		{"dproc", e.Upstream},
	}
	first := true
	for i, kv := range ext {
		if kv.v == "" || strings.HasSuffix(kv.k, "Label") && ext[i+1].v == "" {
			continue
		}
		if !first {
			b = append(b, ' ')
		}
		first = false
		b = append(b, kv.k...)
		b = append(b, '=')
		b = cefValue(b, kv.v)
	}
	if e.Duration > 0 {
		b = append(b, " cn1Label=duration_us cn1="...)
		b = strconv.AppendInt(b, e.Duration.Microseconds(), 10)
	}
	return b
}

func cefHeader(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '|', '\\':
			b = append(b, '\\', c)
		case '\n', '\r':
			b = append(b, ' ')
		default:
			b = append(b, c)
		}
	}
	return b
}

func cefValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '=', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, c)
		}
	}
	return b
}
