package portcullis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
)

// auditor emits the audit events of the audit section: it holds the
// recorder and what the configuration says each tool's events record. A
// nil *auditor emits nothing.
type auditor struct {
	rec  *audit.Recorder
	opts audit.Options
	// calledAs is the name a tools/call used when it is not the listed
	// name (mcp.CalledAs).
	calledAs func(context.Context) string
	// recordings caches opts.For per tool name (registered tools only).
	recordings sync.Map
}

// newAuditor starts the recorder of cfg.Audit's sinks; nil when it has
// none. stderr is the stderr sink's writer.
func newAuditor(ctx context.Context, cfg *configFile, metrics *observability.Metrics, logger *slog.Logger, stderr io.Writer) (*auditor, error) {
	o := cfg.Audit
	if !o.Enabled() {
		return nil, nil
	}
	var sinks []audit.Sink
	var names []string
	closeAll := func() {
		for _, s := range sinks {
			_ = s.Close()
		}
	}
	for i, so := range o.Sinks {
		key := fmt.Sprintf("audit.sinks[%d]", i)
		var s audit.Sink
		switch so.Type {
		case audit.SinkStderr:
			s = audit.NewLines(audit.SinkStderr, stderr)
		case audit.SinkFile:
			f, err := audit.OpenLines(so.Path)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("%s.path: %w", key, err)
			}
			s = f
		case audit.SinkSyslog:
			so := audit.SyslogOptions{Address: so.Address, Facility: *so.Facility, Format: so.Format, Version: version}
			if cfg.Audit.Sinks[i].TLS {
				tc, err := syslogTLS(cfg.Audit.Sinks[i].CAFile)
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("%s.ca_file: %w", key, err)
				}
				so.TLS = tc
			}
			s = audit.NewSyslog(so)
		case audit.SinkOTLP:
			otlp, err := observability.NewAuditOTLP(ctx, so.Endpoint, version)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			s = otlp
		}
		sinks = append(sinks, s)
		names = append(names, s.Name())
	}
	am := observability.NewAuditMetrics(metrics, names)
	hooks := am.Hooks(func(sink string, err error) {
		if err != nil {
			logger.Warn("an audit sink fails; its events are queued, and dropped once its queue is full", "sink", sink, "error", err)
			return
		}
		logger.Info("an audit sink takes events again", "sink", sink)
	})
	rec := audit.NewRecorder(audit.RecorderOptions{QueueSize: o.QueueSize, Hooks: hooks}, sinks...)
	return &auditor{rec: rec, opts: o, calledAs: mcp.CalledAs}, nil
}

// syslogTLS is the TLS configuration of a syslog sink: the system's roots,
// or those of caFile.
func syslogTLS(caFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	tc.RootCAs = pool
	return tc, nil
}

// close delivers what is queued, for at most five seconds, so that a sink
// that is down cannot hold the exit.
func (a *auditor) close(logger *slog.Logger) {
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.rec.Close(ctx); err != nil {
		logger.Warn("closing the audit sinks", "error", err)
	}
}

// record stamps e with the trace of ctx and records it.
func (a *auditor) record(ctx context.Context, e *audit.Event) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		e.TraceID, e.SpanID = sc.TraceID().String(), sc.SpanID().String()
	}
	a.rec.Record(e)
}

// actor is the audit actor of a request's token info.
func actor(info *sdkauth.TokenInfo) audit.Actor {
	p, ok := auth.PrincipalFromTokenInfo(info)
	if !ok {
		return audit.Actor{}
	}
	return principalActor(p)
}

func principalActor(p *auth.Principal) audit.Actor {
	a := audit.Actor{Issuer: p.Issuer, Subject: p.Subject, ClientID: p.ClientID}
	if act, ok := p.Claims["act"]; ok {
		a.Act = audit.ActChain(act)
	}
	return a
}

// recording returns what the events of tool record.
func (a *auditor) recording(tool string) audit.Recording {
	if len(a.opts.Tools) == 0 {
		return audit.Recording{}
	}
	if r, ok := a.recordings.Load(tool); ok {
		return r.(audit.Recording)
	}
	r := a.opts.For(tool)
	a.recordings.Store(tool, r)
	return r
}

// auditMark is put in a call's context by the tool-call middleware, so
// that a refusal inside it (the tool gate's, which emits its own event)
// is not recorded as a call too.
type auditMark struct{ refused atomic.Bool }

type auditMarkKey struct{}

// markRefused notes in ctx that the call was refused.
func markRefused(ctx context.Context) {
	if m, ok := ctx.Value(auditMarkKey{}).(*auditMark); ok {
		m.refused.Store(true)
	}
}

// toolCalls returns the SDK middleware that records a tool.call event per
// call the server named server (empty for /mcp) serves: known reports
// whether a name is the server's tool (an unknown name is recorded as
// _OTHER), original and facts what the catalog knows of it, curate the
// arguments the tool receives (a virtual server's fixed arguments and
// defaults set; nil for none).
func (a *auditor) toolCalls(server string, known func(string) bool, original func(string) string, facts toolFacts, curate func(name string, args json.RawMessage) json.RawMessage) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		if a == nil {
			return next
		}
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			r, ok := req.(*sdk.CallToolRequest)
			if !ok || r.Params == nil {
				return next(ctx, method, req)
			}
			mark := &auditMark{}
			ctx = context.WithValue(ctx, auditMarkKey{}, mark)
			start := time.Now()
			res, err := next(ctx, method, req)
			if mark.refused.Load() {
				return res, err
			}
			name := r.Params.Name
			e := &audit.Event{Type: audit.TypeToolCall, Outcome: audit.OutcomeSuccess, Duration: time.Since(start), Server: server, Tool: observability.Other}
			if known(name) {
				e.Tool = name
				if orig := original(name); orig != name {
					e.ToolOriginal = orig
				}
				e.Upstream, _, _ = facts(name)
				if a.calledAs != nil {
					e.ToolCalledAs = truncateName(a.calledAs(ctx))
				}
			}
			if extra := req.GetExtra(); extra != nil {
				e.Actor = actor(extra.TokenInfo)
			}
			switch errType, _ := observability.Classify(res, err); errType {
			case "":
			case observability.ErrorTypeTool:
				e.Outcome, e.Reason = audit.OutcomeFailure, errType
			default:
				e.Outcome, e.Reason = audit.OutcomeError, errType
			}
			if rc := a.recording(e.Tool); rc.Arguments || rc.Result {
				var cut bool
				if rc.Arguments {
					args := r.Params.Arguments
					if curate != nil {
						args = curate(name, args)
					}
					e.Arguments, cut = audit.Redact(args, rc.Redact, rc.MaxBytes)
					e.Truncated = cut
				}
				if rc.Result && res != nil {
					if b, merr := json.Marshal(res); merr == nil {
						e.Result, cut = audit.Redact(b, rc.Redact, rc.MaxBytes)
						e.Truncated = e.Truncated || cut
					}
				}
			}
			a.record(ctx, e)
			return res, err
		}
	}
}

// refused records a tools/call the tool gate refused.
func (a *auditor) refused(ctx context.Context, server string, d toolRefusal) {
	if a == nil {
		return
	}
	markRefused(ctx)
	a.record(ctx, &audit.Event{
		Type: audit.TypeToolRefused, Outcome: audit.OutcomeRefused, Actor: actor(d.info),
		Server: server, Tool: d.tool, ToolOriginal: d.original, ToolCalledAs: d.calledAs, Reason: d.reason, Rule: d.rule, Scopes: d.needed,
	})
}

// toolRefusal is what a refusal event says of a tool gate's
// denial, its names bounded as the metrics bound them.
type toolRefusal struct {
	info           *sdkauth.TokenInfo
	tool, original string
	calledAs       string // the name the call used, when not tool
	reason, rule   string
	needed         []string
}

// authRefused records a request the bearer-token middleware refused.
func (a *auditor) authRefused(ctx context.Context, e auth.Event) {
	if a == nil || e.Outcome != auth.OutcomeDenied {
		return
	}
	a.record(ctx, &audit.Event{
		Type: audit.TypeAuthRefused, Outcome: audit.OutcomeRefused, Reason: string(e.Reason),
		Actor: audit.Actor{Issuer: e.Issuer, ClientID: e.ClientID},
	})
}

// limitRefused records a request a limit refused.
func (a *auditor) limitRefused(ctx context.Context, limit, tool string) {
	if a == nil {
		return
	}
	e := &audit.Event{Type: audit.TypeLimitRefused, Outcome: audit.OutcomeRefused, Reason: limit, Tool: truncateName(tool)}
	if p, ok := auth.PrincipalFrom(ctx); ok {
		e.Actor = principalActor(p)
	}
	a.record(ctx, e)
}

// upstream records an upstream's connection (up) or its loss; restarted
// says a stdio upstream was started again after it failed.
func (a *auditor) upstream(name string, up, restarted bool) {
	if a == nil {
		return
	}
	e := &audit.Event{Type: audit.TypeUpstreamConnected, Outcome: audit.OutcomeSuccess, Upstream: name}
	if !up {
		e.Outcome, e.Reason = audit.OutcomeFailure, "disconnected"
	}
	if restarted {
		e.Reason = "restarted"
	}
	a.rec.Record(e)
}

// tokenExchange records that an upstream whose token is got for each
// caller (token_exchange, jwt_bearer, id_jag) asked for the caller's token
// it presents: from the identity provider (a caller signed in through the
// authorization server: its access token, or its ID token) or the
// caller's own; ok false when there was none to give.
func (a *auditor) tokenExchange(info *sdkauth.TokenInfo, from string, ok bool) {
	if a == nil {
		return
	}
	e := &audit.Event{Type: audit.TypeTokenExchanged, Outcome: audit.OutcomeSuccess, Actor: actor(info), Detail: map[string]string{"subject_token": from}}
	if !ok {
		e.Outcome, e.Reason = audit.OutcomeRefused, "no_subject_token"
	}
	a.rec.Record(e)
}

// configLoaded records the configuration the process serves.
func (a *auditor) configLoaded(cfg *configFile) {
	if a == nil {
		return
	}
	a.rec.Record(&audit.Event{Type: audit.TypeConfigLoaded, Outcome: audit.OutcomeSuccess, Detail: map[string]string{
		"version":   version,
		"servers":   fmt.Sprint(len(cfg.Servers)),
		"upstreams": fmt.Sprint(len(cfg.Upstreams)),
		"http_apis": fmt.Sprint(len(cfg.HTTPAPIs)),
		"auth":      fmt.Sprint(cfg.authOn()),
	}})
}
