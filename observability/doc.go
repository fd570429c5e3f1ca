// Package observability holds what lets operators see and run Portcullis:
// structured logs, HTTP middleware, and the liveness and readiness endpoints.
// It imports nothing of Portcullis's own but leaf packages that import
// nothing back (the limits table, MCP method and header names, and the
// types of package tasks that [TaskMetrics] observes), so any package can
// be observed by wrapping it, never by importing telemetry into it. Its API
// serves the server and is not covered by the public package's
// compatibility promise.
package observability
