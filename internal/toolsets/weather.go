package toolsets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// maxUpstreamBody bounds how much of an upstream response the tools read.
const maxUpstreamBody = 1 << 20

// currentFields are the Open-Meteo "current" variables the weather tool asks for.
const currentFields = "temperature_2m,relative_humidity_2m,apparent_temperature,precipitation,weather_code,wind_speed_10m,wind_direction_10m"

type weatherInput struct {
	City        string   `json:"city,omitempty" jsonschema:"City or place name, e.g. Paris or San Francisco. Give either city, or latitude and longitude."`
	CountryCode string   `json:"country_code,omitempty" jsonschema:"Optional ISO 3166-1 alpha-2 country code that narrows the city search, e.g. US for Paris, Texas."`
	Latitude    *float64 `json:"latitude,omitempty" jsonschema:"Latitude in decimal degrees (-90 to 90); give it with longitude instead of city."`
	Longitude   *float64 `json:"longitude,omitempty" jsonschema:"Longitude in decimal degrees (-180 to 180); give it with latitude instead of city."`
}

type weatherOutput struct {
	Location             string   `json:"location" jsonschema:"The place the weather is for: the matched city, region and country, or the coordinates."`
	Latitude             float64  `json:"latitude" jsonschema:"Latitude of the forecast point."`
	Longitude            float64  `json:"longitude" jsonschema:"Longitude of the forecast point."`
	Timezone             string   `json:"timezone,omitempty" jsonschema:"IANA time zone of the place."`
	ObservedAt           string   `json:"observed_at" jsonschema:"Local time of the observation, RFC 3339."`
	Conditions           string   `json:"conditions" jsonschema:"Plain-language conditions, e.g. Partly cloudy."`
	WeatherCode          int      `json:"weather_code" jsonschema:"WMO weather interpretation code."`
	TemperatureC         float64  `json:"temperature_c" jsonschema:"Air temperature at 2 m, in degrees Celsius."`
	ApparentTemperatureC *float64 `json:"apparent_temperature_c,omitempty" jsonschema:"Feels-like temperature, in degrees Celsius."`
	RelativeHumidityPct  *float64 `json:"relative_humidity_pct,omitempty" jsonschema:"Relative humidity at 2 m, in percent."`
	PrecipitationMM      *float64 `json:"precipitation_mm,omitempty" jsonschema:"Precipitation in the last interval, in millimetres."`
	WindSpeedKmh         float64  `json:"wind_speed_kmh" jsonschema:"Wind speed at 10 m, in km/h."`
	WindDirectionDeg     *float64 `json:"wind_direction_deg,omitempty" jsonschema:"Direction the wind comes from, in degrees (0 = north)."`
}

func weatherTool(wc *weatherClient) catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "weather",
		Title: "Current weather",
		Description: "Returns the current weather (conditions, temperature in °C, feels-like, humidity, precipitation, " +
			"wind in km/h) for a city or for latitude/longitude, from the Open-Meteo service. Call this when the user " +
			"asks about the weather now somewhere. Give either city (optionally with country_code), or both latitude " +
			"and longitude. It does not forecast future days.",
		InputSchema: schemaFor[weatherInput](func(p map[string]*jsonschema.Schema) {
			p["city"].MinLength, p["city"].MaxLength = ptr(1), ptr(100)
			p["country_code"].Pattern = "^[A-Za-z]{2}$"
			for name, bound := range map[string]float64{"latitude": 90, "longitude": 180} {
				// A number, not the nullable number a pointer field infers.
				p[name].Type, p[name].Types = "number", nil
				p[name].Minimum, p[name].Maximum = ptr(-bound), ptr(bound)
			}
		}),
		Annotations: readOnly("Current weather", true),
	}, wc.handle)
}

// weatherClient calls an Open-Meteo-compatible forecast and geocoding API.
// It sends no credentials: requests are built from scratch, never from the
// caller's request.
type weatherClient struct {
	forecastURL  string
	geocodingURL string
	timeout      time.Duration
	http         *http.Client
	logger       *slog.Logger
}

func newWeatherClient(opts WeatherOptions, deps Deps) *weatherClient {
	return &weatherClient{
		forecastURL:  strings.TrimRight(opts.BaseURL, "/") + "/v1/forecast",
		geocodingURL: strings.TrimRight(opts.GeocodingURL, "/") + "/v1/search",
		timeout:      opts.Timeout,
		http:         deps.HTTPClient,
		logger:       deps.Logger,
	}
}

func (wc *weatherClient) handle(ctx context.Context, _ *sdk.CallToolRequest, in weatherInput) (*sdk.CallToolResult, weatherOutput, error) {
	var out weatherOutput
	city := strings.TrimSpace(in.City)
	switch {
	case (in.Latitude == nil) != (in.Longitude == nil):
		return nil, out, errors.New("latitude and longitude must be given together; or pass a city name instead")
	case in.Latitude != nil:
		// Coordinates win over a city name given with them; the name labels them.
		out.Latitude, out.Longitude = *in.Latitude, *in.Longitude
		out.Location = city
		if out.Location == "" {
			out.Location = fmt.Sprintf("latitude %g, longitude %g", out.Latitude, out.Longitude)
		}
	case city != "":
		place, err := wc.geocode(ctx, city, in.CountryCode)
		if err != nil {
			return nil, out, err
		}
		out.Location = place.label()
		out.Latitude, out.Longitude = place.Latitude, place.Longitude
	default:
		return nil, out, errors.New("pass a city name, or both latitude and longitude")
	}
	if err := wc.current(ctx, &out); err != nil {
		return nil, out, err
	}
	return nil, out, nil
}

type geoPlace struct {
	Name      string  `json:"name"`
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
	Country   string  `json:"country"`
	Admin1    string  `json:"admin1"`
}

func (p geoPlace) label() string {
	parts := []string{p.Name}
	for _, s := range []string{p.Admin1, p.Country} {
		if s != "" && s != p.Name {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}

func (wc *weatherClient) geocode(ctx context.Context, city, country string) (geoPlace, error) {
	q := url.Values{"name": {city}, "count": {"1"}, "language": {"en"}, "format": {"json"}}
	if country != "" {
		q.Set("countryCode", strings.ToUpper(country))
	}
	var body struct {
		Results []geoPlace `json:"results"`
	}
	if err := wc.getJSON(ctx, "Geocoding service", city, wc.geocodingURL+"?"+q.Encode(), &body); err != nil {
		return geoPlace{}, err
	}
	if len(body.Results) == 0 {
		return geoPlace{}, fmt.Errorf("no place named %q was found; check the spelling, add country_code, or pass latitude and longitude instead", city)
	}
	return body.Results[0], nil
}

// current fills out with the current conditions at out's coordinates.
func (wc *weatherClient) current(ctx context.Context, out *weatherOutput) error {
	q := url.Values{
		"latitude":  {strconv.FormatFloat(out.Latitude, 'f', -1, 64)},
		"longitude": {strconv.FormatFloat(out.Longitude, 'f', -1, 64)},
		"current":   {currentFields},
		"timezone":  {"auto"},
	}
	var body struct {
		Timezone         string `json:"timezone"`
		UTCOffsetSeconds int    `json:"utc_offset_seconds"`
		Current          *struct {
			Time                string   `json:"time"`
			Temperature         *float64 `json:"temperature_2m"`
			RelativeHumidity    *float64 `json:"relative_humidity_2m"`
			ApparentTemperature *float64 `json:"apparent_temperature"`
			Precipitation       *float64 `json:"precipitation"`
			WeatherCode         *int     `json:"weather_code"`
			WindSpeed           *float64 `json:"wind_speed_10m"`
			WindDirection       *float64 `json:"wind_direction_10m"`
		} `json:"current"`
	}
	if err := wc.getJSON(ctx, "Weather service", out.Location, wc.forecastURL+"?"+q.Encode(), &body); err != nil {
		return err
	}
	c := body.Current
	if c == nil || c.Temperature == nil || c.WeatherCode == nil || c.WindSpeed == nil {
		wc.logger.Warn("tools: weather upstream answer lacks current conditions", "service", "forecast")
		//lint:ignore ST1005 a tool error is a sentence the model reads, like the other weather errors
		return fmt.Errorf("Weather service sent no current conditions for %s; try again later", out.Location)
	}
	out.Timezone = body.Timezone
	out.ObservedAt = c.Time
	if t, err := time.Parse("2006-01-02T15:04", c.Time); err == nil {
		out.ObservedAt = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0,
			time.FixedZone("", body.UTCOffsetSeconds)).Format(time.RFC3339)
	}
	out.TemperatureC = *c.Temperature
	out.WindSpeedKmh = *c.WindSpeed
	out.WeatherCode = *c.WeatherCode
	out.Conditions = wmoConditions(*c.WeatherCode)
	out.ApparentTemperatureC = c.ApparentTemperature
	out.RelativeHumidityPct = c.RelativeHumidity
	out.PrecipitationMM = c.Precipitation
	out.WindDirectionDeg = c.WindDirection
	return nil
}

// getJSON GETs rawURL and decodes its JSON body into v, within the
// configured timeout. Its errors are written for the model: they name the
// service and the place asked about, and say what to do; the detail goes to
// the log, without the URL (which holds the caller's arguments).
func (wc *weatherClient) getJSON(ctx context.Context, service, subject, rawURL string, v any) error {
	callCtx, cancel := context.WithTimeout(ctx, wc.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("tools: weather request: %w", err) // a bug: the URLs were validated
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "portcullis-mcp")

	failed := func(reason string, err error) error {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // drop the URL
		}
		wc.logger.Warn("tools: weather upstream call failed", "service", service, "reason", reason, "err", err)
		switch {
		case ctx.Err() != nil:
			return ctx.Err() // the caller went away; nobody reads the message
		case callCtx.Err() != nil:
			return fmt.Errorf("%s did not answer within %s for %s; try again later", service, wc.timeout, subject)
		case reason == "decode":
			return fmt.Errorf("%s sent a response that could not be read for %s; try again later", service, subject)
		default:
			return fmt.Errorf("could not reach the %s for %s; try again later", strings.ToLower(service), subject)
		}
	}

	resp, err := wc.http.Do(req)
	if err != nil {
		return failed("request", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		wc.logger.Warn("tools: weather upstream call failed", "service", service, "reason", "status", "status", resp.StatusCode)
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			return fmt.Errorf("%s is rate limiting requests (429) for %s; try again in a minute", service, subject)
		case resp.StatusCode >= 500:
			return fmt.Errorf("%s returned %d for %s; try again later", service, resp.StatusCode, subject)
		default:
			return fmt.Errorf("%s rejected the request for %s (HTTP %d); check the arguments", service, subject, resp.StatusCode)
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxUpstreamBody)).Decode(v); err != nil {
		return failed("decode", err)
	}
	return nil
}

// wmoConditions describes a WMO weather interpretation code, as Open-Meteo
// documents them.
func wmoConditions(code int) string {
	switch code {
	case 0:
		return "Clear sky"
	case 1:
		return "Mainly clear"
	case 2:
		return "Partly cloudy"
	case 3:
		return "Overcast"
	case 45, 48:
		return "Fog"
	case 51, 53, 55:
		return "Drizzle"
	case 56, 57:
		return "Freezing drizzle"
	case 61, 63, 65:
		return "Rain"
	case 66, 67:
		return "Freezing rain"
	case 71, 73, 75:
		return "Snow fall"
	case 77:
		return "Snow grains"
	case 80, 81, 82:
		return "Rain showers"
	case 85, 86:
		return "Snow showers"
	case 95:
		return "Thunderstorm"
	case 96, 99:
		return "Thunderstorm with hail"
	}
	return "Unknown (WMO code " + strconv.Itoa(code) + ")"
}
