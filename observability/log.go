package observability

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// NewLogger returns a JSON slog logger writing to w at the named level
// ("debug", "info", "warn" or "error"). A line logged with a context that
// carries a span gets its trace_id and span_id, so logs and traces join.
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("observability: log level %q: want debug, info, warn or error", level)
	}
	return slog.New(traceHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})}), nil
}

// traceHandler adds the trace and span ids of the context's span.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		traceID, spanID := hexIDs(sc)
		r.AddAttrs(slog.String("trace_id", traceID), slog.String("span_id", spanID))
	}
	return h.Handler.Handle(ctx, r)
}

// hexIDs returns sc's trace and span ids in hex, as TraceID.String and
// SpanID.String do, with one allocation for both.
func hexIDs(sc trace.SpanContext) (traceID, spanID string) {
	tid, sid := sc.TraceID(), sc.SpanID()
	var buf [2*len(tid) + 2*len(sid)]byte
	hex.Encode(buf[:2*len(tid)], tid[:])
	hex.Encode(buf[2*len(tid):], sid[:])
	s := string(buf[:])
	return s[:2*len(tid)], s[2*len(tid):]
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// ValidLogLevel reports whether level names a slog level.
func ValidLogLevel(level string) bool {
	var l slog.Level
	return l.UnmarshalText([]byte(strings.TrimSpace(level))) == nil
}

// Recover turns a panic in next into a 500 and a log line, so that one bad
// request cannot take the process down. http.ErrAbortHandler is re-raised, as
// net/http expects.
func Recover(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			logger.ErrorContext(r.Context(), "http handler panicked",
				"panic", fmt.Sprint(p), "path", r.URL.Path, "stack", string(debug.Stack()))
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		}()
		next.ServeHTTP(w, r)
	})
}

// logAttrs is logger.LogAttrs without the caller's program counter, which
// slog records on every call (a runtime.Callers stack walk, for each of the
// two lines a tool call logs) for handlers that add the source location;
// Portcullis's log handlers never do.
func logAttrs(ctx context.Context, logger *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	if !logger.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = logger.Handler().Handle(ctx, r)
}

// AccessLog logs one line per request to the paths it is given (never query
// strings or headers, which may carry secrets).
func AccessLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		logAttrs(r.Context(), logger, slog.LevelInfo, "http request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.Duration("duration", time.Since(start)),
			slog.String("remote", r.RemoteAddr),
		)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush on the real writer, which
// SSE responses need.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush forwards to the underlying writer when it can flush.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
