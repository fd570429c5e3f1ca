package httptools

import (
	"net/http"
	"sync"
)

// recordedKey is the context key of a call's [recorded] credentials.
type recordedKey struct{}

// recorded are the credential header values a call's requests carried,
// so that an error excerpt that echoes one can be scrubbed.
type recorded struct {
	mu     sync.Mutex
	values []string
}

// recorder sits below an API's credential transport, where the requests
// carry it: it notes the values of the credential headers (names) in the
// request's [recorded], if any.
type recorder struct {
	next  http.RoundTripper
	names []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if rec, ok := req.Context().Value(recordedKey{}).(*recorded); ok {
		rec.mu.Lock()
		for _, n := range r.names {
			for _, v := range req.Header.Values(n) {
				rec.values = append(rec.values, v)
				// A bearer token may be echoed without its scheme.
				if len(v) > 7 && (v[:7] == "Bearer " || v[:7] == "bearer ") {
					rec.values = append(rec.values, v[7:])
				}
			}
		}
		rec.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

// credentialHeaders are the headers an API's credential is sent in.
func credentialHeaders(o *Options) []string {
	names := []string{"Authorization"}
	for _, h := range o.Headers {
		names = append(names, http.CanonicalHeaderKey(h.Name))
	}
	return names
}
