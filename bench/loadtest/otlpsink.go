package main

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// otlpSink is the OTLP/HTTP endpoint Portcullis exports traces to: it
// accepts protobuf POSTs on /v1/traces, counts them and their bytes, and
// answers 200 with an empty ExportTraceServiceResponse (an empty protobuf
// message is zero bytes).
type otlpSink struct {
	url      string
	srv      *http.Server
	requests atomic.Int64
	bytes    atomic.Int64
	bad      atomic.Int64 // requests that were not protobuf POSTs
}

func newOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-protobuf" {
			s.bad.Add(1)
			http.Error(w, "want a protobuf POST", http.StatusUnsupportedMediaType)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *otlpSink) close() { s.srv.Close() }
