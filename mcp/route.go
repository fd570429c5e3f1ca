package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/mcpmethod"
)

// How a request to /mcp finds its way: the era router, which sends it to
// the tasks surface (tasks.go), the tool gate (enforce.go), a direct call
// (direct.go), shared sessions (shared*.go) or one of the SDK's handlers
// (handler.go).

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.cors(w, r) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r)
	case http.MethodGet, http.MethodDelete:
		if h.stateful == nil || r.Header.Get(mcpheader.ProtocolVersion) >= statelessEra {
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed: this endpoint keeps no sessions for this protocol version", http.StatusMethodNotAllowed)
			return
		}
		if h.shared != nil {
			h.shared.serve(w, r, sharedRequest{})
			return
		}
		if r.Method == http.MethodGet {
			h.streams.serve(w, r, h.stateful)
			return
		}
		h.stateful.ServeHTTP(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.limitHook(r.Context(), limits.Event{Limit: limits.LimitBodySize})
			jsonrpcerr.Write(w, http.StatusRequestEntityTooLarge, nil, jsonrpcerr.InvalidRequest,
				fmt.Sprintf("Request body exceeds %d bytes.", mbe.Limit))
			return
		}
		if errors.Is(err, limits.ErrBodyReadTimeout) {
			w.Header().Set("Connection", "close")
			jsonrpcerr.Write(w, http.StatusRequestTimeout, nil, jsonrpcerr.ServerError, "Request Timeout: the request body did not arrive in time.")
			return
		}
		jsonrpcerr.Write(w, http.StatusBadRequest, nil, jsonrpcerr.ParseError, "Could not read the request body.")
		return
	}
	msgs, jerr := parseMessages(body)
	if jerr != nil {
		jsonrpcerr.Write(w, http.StatusBadRequest, jerr.id, jerr.code, jerr.msg)
		return
	}
	modern := isStatelessEra(r.Header, msgs)
	if !modern {
		// The SDK answers an unknown legacy method with a plain-text 400;
		// clients are owed a JSON-RPC error naming the method.
		for _, m := range msgs {
			if m.Method != "" && len(m.ID) > 0 && !mcpmethod.IsRequest(m.Method) {
				jsonrpcerr.Write(w, http.StatusBadRequest, m.ID, jsonrpcerr.MethodNotFound, fmt.Sprintf("Method not found: %q.", m.Method))
				return
			}
		}
	}
	if v := r.Header.Get(mcpheader.ProtocolVersion); !modern && isBatch(body) && v >= firstVersionWithoutBatches && slices.Contains(sdkVersions, v) {
		// The SDK refuses it too, in plain text and only where it put
		// the version in the request's context; a JSON-RPC client is
		// owed a JSON-RPC error, as on stdio.
		jsonrpcerr.Write(w, http.StatusBadRequest, nil, jsonrpcerr.InvalidRequest, "Invalid Request: JSON-RPC batches are not supported in protocol version "+v+".")
		return
	}
	if modern && len(msgs) == 1 && isTaskMethod(msgs[0].Method) {
		h.serveTask(w, r, msgs[0])
		return
	}
	// A batch is the SDK's to answer call by call: its middleware gate
	// answers each call of a tool the caller does not see in that call's
	// place, and the other calls are served. Refusing the whole body with
	// one call's error would leave the others unanswered.
	if h.gate != nil && !isBatch(body) && !h.gateTools(w, r, msgs) {
		return
	}
	plain := modern && onlyResponse(msgs)
	if plain && h.serveDirect(w, r, body, msgs[0]) {
		return
	}
	r.Body = &bodyReader{Reader: bytes.NewReader(body)}
	r.ContentLength = int64(len(body))
	r.Header.Del(RequestIDHeader)
	if len(msgs) == 1 && msgs[0].Method != "" && len(msgs[0].ID) > 0 {
		r.Header.Set(RequestIDHeader, idText(msgs[0].ID))
	}

	switch {
	case plain:
		h.plain.ServeHTTP(w, r)
	case h.stateful == nil || modern:
		h.stateless.ServeHTTP(w, r)
	case r.Header.Get(mcpheader.SessionID) != "" && h.shared != nil:
		h.shared.serve(w, r, sharedRequest{answers: allAnswers(msgs), initialized: onlyInitialized(msgs)})
	case r.Header.Get(mcpheader.SessionID) != "":
		h.stateful.ServeHTTP(w, r)
	case isInitialize(msgs):
		h.serveInitialize(w, r)
	default:
		h.stateless.ServeHTTP(w, r)
	}
}

// serveInitialize serves a legacy initialize through the session caps:
// a principal holding its share is refused with 429, a full server with
// 503; both with Retry-After and a JSON-RPC error. A shared session is
// made by the shared sessions (sharedserve.go).
func (h *Handler) serveInitialize(w http.ResponseWriter, r *http.Request) {
	if h.shared != nil {
		h.shared.serveInitialize(w, r)
		return
	}
	key := h.sessions.principal(r)
	limit, ok := h.sessions.acquire(key)
	if !ok {
		h.sessions.refuse(w, r, limit)
		return
	}
	rec := &sessionIDRecorder{ResponseWriter: w}
	defer func() { h.sessions.release(key, rec.id) }()
	h.stateful.ServeHTTP(rec, r)
}

// bodyReader is the body handed on to the SDK: the bytes already read.
type bodyReader struct{ *bytes.Reader }

// Close does nothing: the original body was read and closed by the server.
func (*bodyReader) Close() error { return nil }
