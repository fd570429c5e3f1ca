package toolsets

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/outbound"
)

// Toolset names accepted in [Options.Toolsets].
const (
	ToolsetCore        = "core"
	ToolsetConformance = "conformance"
	ToolsetWorkshop    = "workshop"
)

// knownToolsets lists the toolsets in the order error messages name them.
var knownToolsets = []string{ToolsetCore, ToolsetConformance, ToolsetWorkshop}

// Default values that [Options.Defaults] fills in.
const (
	DefaultWeatherBaseURL      = "https://api.open-meteo.com"
	DefaultWeatherGeocodingURL = "https://geocoding-api.open-meteo.com"
	DefaultWeatherTimeout      = 10 * time.Second

	// maxWeatherTimeout bounds WeatherOptions.Timeout: a tool call that waits
	// longer than this for an upstream is worse than a quick "try again".
	maxWeatherTimeout = time.Minute
)

// Options selects and configures the toolsets a server offers. It is the
// `tools:` section of the YAML config. The zero value, after [Options.Defaults],
// offers the core toolset and nothing else.
type Options struct {
	// Toolsets lists the enabled toolsets. Absent means ["core"]; an empty
	// list ([]) serves no built-in tool, as a gateway that serves only its
	// upstreams wants.
	// Known: core, workshop, conformance. The conformance toolset exists for
	// the official MCP conformance suite and is off unless listed.
	Toolsets []string `yaml:"toolsets" schema:"enum=core|workshop|conformance,unique"`
	// Weather configures the workshop toolset's weather tool.
	Weather WeatherOptions `yaml:"weather"`
	// Resources are resources declared in config, served whatever toolsets
	// are enabled.
	Resources []ResourceSpec `yaml:"resources"`
	// Prompts are prompts declared in config, served whatever toolsets are
	// enabled.
	Prompts []PromptSpec `yaml:"prompts"`
}

// WeatherOptions configures the weather tool's upstream, an
// Open-Meteo-compatible API. The tool sends no credentials upstream.
type WeatherOptions struct {
	// BaseURL is the forecast API root; the tool calls {BaseURL}/v1/forecast.
	// Empty means [DefaultWeatherBaseURL].
	BaseURL string `yaml:"base_url" schema:"url"`
	// GeocodingURL is the geocoding API root; the tool calls
	// {GeocodingURL}/v1/search. Empty means [DefaultWeatherGeocodingURL].
	GeocodingURL string `yaml:"geocoding_url" schema:"url"`
	// Timeout bounds each upstream call. Zero means [DefaultWeatherTimeout];
	// at most one minute.
	Timeout time.Duration `yaml:"timeout"`
}

// Defaults fills zero values with defaults. Call it before [Options.Validate].
func (o *Options) Defaults() {
	if o.Toolsets == nil {
		o.Toolsets = []string{ToolsetCore}
	}
	if o.Weather.BaseURL == "" {
		o.Weather.BaseURL = DefaultWeatherBaseURL
	}
	if o.Weather.GeocodingURL == "" {
		o.Weather.GeocodingURL = DefaultWeatherGeocodingURL
	}
	if o.Weather.Timeout == 0 {
		o.Weather.Timeout = DefaultWeatherTimeout
	}
}

// Validate reports every problem at once, as an [errors.Join] of errors whose
// text starts with the key path relative to Options, for example
// `toolsets[2]: unknown toolset "foo" (known: core, conformance, workshop)`.
// The caller prefixes the section name ("tools.").
//
// Validate reads the files that resources and prompts name, so that a
// missing file is reported here rather than when a client asks for it.
func (o *Options) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, name := range o.Toolsets {
		switch {
		case !slices.Contains(knownToolsets, name):
			errs = append(errs, fmt.Errorf("toolsets[%d]: unknown toolset %q (known: %s)", i, name, strings.Join(knownToolsets, ", ")))
		case seen[name]:
			errs = append(errs, fmt.Errorf("toolsets[%d]: toolset %q is listed twice", i, name))
		}
		seen[name] = true
	}
	errs = append(errs, o.Weather.validate("weather")...)
	errs = append(errs, validateResources(o.Resources)...)
	errs = append(errs, validatePrompts(o.Prompts)...)
	return errors.Join(errs...)
}

func (w *WeatherOptions) validate(path string) []error {
	var errs []error
	for key, raw := range map[string]string{"base_url": w.BaseURL, "geocoding_url": w.GeocodingURL} {
		if err := checkHTTPURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", path, key, err))
		}
	}
	if w.Timeout <= 0 || w.Timeout > maxWeatherTimeout {
		errs = append(errs, fmt.Errorf("%s.timeout: must be positive and at most %s (got %s)", path, maxWeatherTimeout, w.Timeout))
	}
	// Map iteration order is random; keep the report stable.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// checkHTTPURL reports whether raw is an absolute http or https URL without
// credentials, query or fragment.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL")
	}
	if u.User != nil {
		return errors.New("must not contain credentials")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must not have a query or fragment")
	}
	return nil
}

// Deps are what toolsets need from the process. Every field may be nil.
type Deps struct {
	// HTTPClient makes upstream calls (weather). Nil means a client with
	// dial, TLS and header timeouts. The tools never forward the caller's
	// credentials, whatever the client.
	HTTPClient *http.Client
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives diagnostics, never tool argument values. Nil discards.
	Logger *slog.Logger
	// Caller returns the verified identity behind a call (the whoami
	// tool); false when the call carries none. Nil means calls never do.
	Caller func(*sdk.CallToolRequest) (Caller, bool)
}

// Caller is the verified identity behind a call: the claims of the
// caller's token, never the token itself.
type Caller struct {
	Subject, Issuer, ClientID string
	Scopes, Roles             []string
	Expiry                    time.Time
}

func (d Deps) withDefaults() Deps {
	if d.HTTPClient == nil {
		d.HTTPClient = DefaultHTTPClient()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return d
}

// DefaultHTTPClient is the client tools use when [Deps] names none: it bounds
// every phase of a request but the body read, which the per-call context
// deadline covers. Wrap its Transport to instrument it.
func DefaultHTTPClient() *http.Client {
	return &http.Client{Transport: outbound.Transport(), Timeout: 30 * time.Second}
}
