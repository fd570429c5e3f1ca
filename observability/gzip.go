package observability

import (
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// gzipWriters holds the writers of gzipped: gzip.BestSpeed.
//
// promhttp's own gzip (its default) compresses at gzip's default level,
// whose compressor fills a large hash table: every scrape made that much
// more of the server's memory resident, kept by promhttp's writer pool
// until collections that, with little allocated at idle, rarely come.
// BestSpeed leaves that table untouched and still shrinks the text format
// several times over.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return w
}}

// gzipped serves h's response gzipped (gzip.BestSpeed) to a request that
// accepts gzip, and as it is to any other.
func gzipped(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Values("Accept-Encoding")) {
			h.ServeHTTP(w, r)
			return
		}
		gz := gzipWriters.Get().(*gzip.Writer)
		gz.Reset(w)
		defer func() {
			gz.Reset(io.Discard)
			gzipWriters.Put(gz)
		}()
		w.Header().Set("Content-Encoding", "gzip")
		gw := &gzipResponseWriter{ResponseWriter: w, gz: gz}
		h.ServeHTTP(gw, r)
		if !gw.plain {
			_ = gz.Close() // a write error is the client's to see: the connection is gone
		}
	})
}

// gzipResponseWriter sends the body through gz, unless the handler took
// back the Content-Encoding before writing (promhttp does for an error
// message), in which case the body goes as it is. The handler's
// Content-Length, if it sets one, is of the uncompressed body, so it is
// dropped.
type gzipResponseWriter struct {
	http.ResponseWriter
	gz          *gzip.Writer
	wroteHeader bool
	plain       bool
}

func (w *gzipResponseWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if w.Header().Get("Content-Encoding") == "gzip" {
			w.Header().Del("Content-Length")
		} else {
			w.plain = true
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *gzipResponseWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.plain {
		return w.ResponseWriter.Write(b)
	}
	return w.gz.Write(b)
}

// acceptsGzip reports whether Accept-Encoding values accept gzip: gzip or
// x-gzip with no q or a q above 0, or else * likewise.
func acceptsGzip(values []string) bool {
	named, star := -1, -1 // -1: not listed, 0: refused, 1: accepted
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			ok := 1
			if q, set := qValue(params); set && q <= 0 {
				ok = 0
			}
			switch strings.ToLower(strings.TrimSpace(coding)) {
			case "gzip", "x-gzip":
				named = max(named, ok)
			case "*":
				star = max(star, ok)
			}
		}
	}
	if named >= 0 {
		return named == 1
	}
	return star == 1
}

// qValue returns the q parameter of an Accept-Encoding element's
// parameters, and whether there is one.
func qValue(params string) (float64, bool) {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, true
			}
			return q, true
		}
	}
	return 0, false
}
