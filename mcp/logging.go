package mcp

import (
	"context"
	"log/slog"
)

// sdkLogger returns the logger the SDK is given. The SDK logs routine
// lifecycle at Info (three lines for every stateless request: "server
// connecting", "server session connected", "server session
// disconnected"), which at production volume is most of the log and a
// large share of a call's CPU; those lines are logged at Debug instead.
// Warnings and errors pass unchanged.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demoteInfo{l.Handler()})
}

// demoteInfo logs records below Warn at Debug.
type demoteInfo struct{ slog.Handler }

func demote(level slog.Level) slog.Level {
	if level > slog.LevelDebug && level < slog.LevelWarn {
		return slog.LevelDebug
	}
	return level
}

func (h demoteInfo) Enabled(ctx context.Context, level slog.Level) bool {
	return h.Handler.Enabled(ctx, demote(level))
}

func (h demoteInfo) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h demoteInfo) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoteInfo{h.Handler.WithAttrs(attrs)}
}

func (h demoteInfo) WithGroup(name string) slog.Handler {
	return demoteInfo{h.Handler.WithGroup(name)}
}
