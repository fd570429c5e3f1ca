//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeOpenMeteo is an httptest stand-in for the Open-Meteo geocoding and
// forecast APIs, with the real APIs' response shapes. It knows one city,
// Paris, whose current temperature is always fakeParisTemperature.
type fakeOpenMeteo struct {
	*httptest.Server

	// hold, if set, runs at the start of every request before it is
	// answered; a test blocks in it to keep a tool call in flight.
	hold func(*http.Request)

	mu       sync.Mutex
	requests []string // "path?query" of each request, in order
}

const fakeParisTemperature = "17.3"

// newFakeOpenMeteo starts the fake; it is closed when the test ends.
func newFakeOpenMeteo(t *testing.T, hold func(*http.Request)) *fakeOpenMeteo {
	t.Helper()
	f := &fakeOpenMeteo{hold: hold}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/search", f.search)
	mux.HandleFunc("GET /v1/forecast", f.forecast)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.URL.Path+"?"+r.URL.RawQuery)
		f.mu.Unlock()
		if f.hold != nil {
			f.hold(r)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// Requests returns "path?query" of every request so far.
func (f *fakeOpenMeteo) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// search answers GET /v1/search?name=..&count=1 like Open-Meteo's
// geocoding API: a "results" list, absent when nothing matches.
func (f *fakeOpenMeteo) search(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	resp := map[string]any{"generationtime_ms": 0.5}
	if strings.EqualFold(strings.TrimSpace(name), "Paris") {
		resp["results"] = []map[string]any{{
			"id":           2988507,
			"name":         "Paris",
			"latitude":     48.85341,
			"longitude":    2.3488,
			"elevation":    42.0,
			"feature_code": "PPLC",
			"country_code": "FR",
			"country":      "France",
			"admin1":       "Île-de-France",
			"timezone":     "Europe/Paris",
			"population":   2138551,
		}}
	}
	writeJSON(w, resp)
}

// forecast answers GET /v1/forecast?latitude=..&longitude=..&current=a,b
// with a "current" block holding every field asked for.
func (f *fakeOpenMeteo) forecast(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lat, errLat := strconv.ParseFloat(q.Get("latitude"), 64)
	lon, errLon := strconv.ParseFloat(q.Get("longitude"), 64)
	if errLat != nil || errLon != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"error": true, "reason": "latitude and longitude must be numbers"})
		return
	}
	known := map[string]struct {
		value any
		unit  string
	}{
		"temperature_2m":       {17.3, "°C"},
		"apparent_temperature": {16.1, "°C"},
		"relative_humidity_2m": {64, "%"},
		"weather_code":         {3, "wmo code"},
		"wind_speed_10m":       {11.5, "km/h"},
		"wind_direction_10m":   {220, "°"},
		"wind_gusts_10m":       {20.2, "km/h"},
		"precipitation":        {0.0, "mm"},
		"rain":                 {0.0, "mm"},
		"showers":              {0.0, "mm"},
		"snowfall":             {0.0, "cm"},
		"cloud_cover":          {75, "%"},
		"pressure_msl":         {1013.2, "hPa"},
		"surface_pressure":     {1003.1, "hPa"},
		"is_day":               {1, ""},
	}
	current := map[string]any{"time": "2026-11-22T10:00", "interval": 900}
	units := map[string]any{"time": "iso8601", "interval": "seconds"}
	for field := range strings.SplitSeq(q.Get("current"), ",") {
		if field = strings.TrimSpace(field); field == "" {
			continue
		}
		k, ok := known[field]
		if !ok {
			k.value = 0
		}
		current[field] = k.value
		units[field] = k.unit
	}
	writeJSON(w, map[string]any{
		"latitude":              lat,
		"longitude":             lon,
		"generationtime_ms":     0.1,
		"utc_offset_seconds":    0,
		"timezone":              "GMT",
		"timezone_abbreviation": "GMT",
		"elevation":             42.0,
		"current_units":         units,
		"current":               current,
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
