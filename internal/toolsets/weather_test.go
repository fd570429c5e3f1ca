package toolsets

import (
	"cmp"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	parisGeocoding = `{"results":[{"name":"Paris","latitude":48.85341,"longitude":2.3488,"country":"France","admin1":"Île-de-France","timezone":"Europe/Paris"}]}`
	parisForecast  = `{"latitude":48.86,"longitude":2.35,"timezone":"Europe/Paris","utc_offset_seconds":3600,
		"current":{"time":"2026-03-14T16:00","interval":900,"temperature_2m":12.3,"relative_humidity_2m":71,
		"apparent_temperature":10.9,"precipitation":0,"weather_code":2,"wind_speed_10m":14.8,"wind_direction_10m":230}}`
)

// answers are the canned upstream answers of one test case. A status of -1
// blocks until the request's context ends (a timeout).
type answers struct {
	geoStatus, forecastStatus int
	geoBody, forecastBody     string
}

// fakeOpenMeteo serves the geocoding and forecast APIs from canned answers.
type fakeOpenMeteo struct {
	answers
	leaked atomic.Bool // a credential header reached the upstream
}

func (f *fakeOpenMeteo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
		f.leaked.Store(true)
	}
	status, body := f.geoStatus, f.geoBody
	switch r.URL.Path {
	case "/v1/search":
		if r.URL.Query().Get("name") == "" || r.URL.Query().Get("count") != "1" {
			http.Error(w, "bad geocoding query", http.StatusBadRequest)
			return
		}
	case "/v1/forecast":
		q := r.URL.Query()
		if q.Get("latitude") == "" || q.Get("longitude") == "" || !strings.Contains(q.Get("current"), "temperature_2m") {
			http.Error(w, "bad forecast query", http.StatusBadRequest)
			return
		}
		status, body = f.forecastStatus, f.forecastBody
	default:
		http.NotFound(w, r)
		return
	}
	if status == -1 {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func TestWeather(t *testing.T) {
	tests := []struct {
		name     string
		upstream answers
		args     map[string]any
		want     map[string]any // fields of the structured output
		wantErr  string         // substring of the tool error
		timeout  time.Duration  // the upstream timeout; zero means 10s (only the timeout case needs it short)
	}{
		{
			name:     "city",
			upstream: answers{geoStatus: 200, geoBody: parisGeocoding, forecastStatus: 200, forecastBody: parisForecast},
			args:     map[string]any{"city": "Paris"},
			want: map[string]any{
				"location": "Paris, Île-de-France, France", "latitude": 48.85341, "temperature_c": 12.3,
				"wind_speed_kmh": 14.8, "weather_code": float64(2), "conditions": "Partly cloudy",
				"observed_at": "2026-03-14T16:00:00+01:00", "relative_humidity_pct": float64(71),
			},
		},
		{
			name:     "coordinates",
			upstream: answers{forecastStatus: 200, forecastBody: parisForecast},
			args:     map[string]any{"latitude": 48.85, "longitude": 2.35},
			want:     map[string]any{"location": "latitude 48.85, longitude 2.35", "temperature_c": 12.3},
		},
		{
			name:     "forecast 503",
			upstream: answers{geoStatus: 200, geoBody: parisGeocoding, forecastStatus: 503, forecastBody: "upstream overloaded"},
			args:     map[string]any{"city": "Paris"},
			wantErr:  "Weather service returned 503 for Paris, Île-de-France, France; try again later",
		},
		{
			name:     "geocoding 503",
			upstream: answers{geoStatus: 503, geoBody: "down"},
			args:     map[string]any{"city": "Paris"},
			wantErr:  "Geocoding service returned 503 for Paris; try again later",
		},
		{
			name:     "rate limited",
			upstream: answers{forecastStatus: 429, forecastBody: "slow down"},
			args:     map[string]any{"latitude": 1, "longitude": 2},
			wantErr:  "rate limiting",
		},
		{
			name:     "timeout",
			upstream: answers{geoStatus: 200, geoBody: parisGeocoding, forecastStatus: -1},
			args:     map[string]any{"city": "Paris"},
			timeout:  50 * time.Millisecond,
			wantErr:  "did not answer within 50ms",
		},
		{
			name:     "city not found",
			upstream: answers{geoStatus: 200, geoBody: `{"generationtime_ms":0.4}`},
			args:     map[string]any{"city": "Atlantis"},
			wantErr:  `no place named "Atlantis" was found`,
		},
		{
			name:     "bad JSON",
			upstream: answers{geoStatus: 200, geoBody: parisGeocoding, forecastStatus: 200, forecastBody: `{"current": {"temperature_2m": `},
			args:     map[string]any{"city": "Paris"},
			wantErr:  "could not be read",
		},
		{
			name:     "answer without current conditions",
			upstream: answers{forecastStatus: 200, forecastBody: `{"latitude": 1}`},
			args:     map[string]any{"latitude": 1, "longitude": 2},
			wantErr:  "no current conditions",
		},
		{
			name:    "latitude without longitude",
			args:    map[string]any{"latitude": 48.85},
			wantErr: "latitude and longitude must be given together",
		},
		{
			name:    "no place at all",
			args:    map[string]any{},
			wantErr: "pass a city name",
		},
		{
			name:    "latitude out of range",
			args:    map[string]any{"latitude": 123, "longitude": 2},
			wantErr: "latitude",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &fakeOpenMeteo{answers: tt.upstream}
			srv := httptest.NewServer(up)
			defer srv.Close()
			opts := Options{
				Toolsets: []string{ToolsetWorkshop},
				Weather:  WeatherOptions{BaseURL: srv.URL, GeocodingURL: srv.URL + "/", Timeout: cmp.Or(tt.timeout, 10*time.Second)},
			}
			cs, _ := connect(t, newCatalog(t, opts, Deps{HTTPClient: srv.Client()}), nil)

			res := call(t, cs, "weather", tt.args)
			if up.leaked.Load() {
				t.Error("a credential header reached the upstream")
			}
			if tt.wantErr != "" {
				if !res.IsError || !strings.Contains(resultText(res), tt.wantErr) {
					t.Fatalf("got isError %v %q, want a tool error containing %q", res.IsError, resultText(res), tt.wantErr)
				}
				if strings.Contains(resultText(res), srv.URL) {
					t.Errorf("tool error leaks the upstream URL: %q", resultText(res))
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error: %s", resultText(res))
			}
			got := structured(t, res)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v (%T), want %v (%T)", k, got[k], got[k], v, v)
				}
			}
		})
	}
}
