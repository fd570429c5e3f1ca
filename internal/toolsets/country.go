package toolsets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/suggest"

	"github.com/biter777/countries"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type countryInput struct {
	Country string `json:"country" jsonschema:"Country name (e.g. France, United States) or ISO 3166-1 code: alpha-2 (FR), alpha-3 (FRA) or numeric (250)."`
}

type countryOutput struct {
	Name         string           `json:"name" jsonschema:"Common English name."`
	Alpha2       string           `json:"alpha2" jsonschema:"ISO 3166-1 alpha-2 code."`
	Alpha3       string           `json:"alpha3" jsonschema:"ISO 3166-1 alpha-3 code."`
	Numeric      string           `json:"numeric" jsonschema:"ISO 3166-1 numeric code, three digits."`
	Capital      string           `json:"capital,omitempty" jsonschema:"Capital city."`
	Region       string           `json:"region,omitempty" jsonschema:"Continent or world region."`
	Currency     *countryCurrency `json:"currency,omitempty" jsonschema:"Official currency."`
	CallingCodes []string         `json:"calling_codes" jsonschema:"International dialling codes, e.g. +33."`
	Domain       string           `json:"top_level_domain,omitempty" jsonschema:"Country-code top-level domain, e.g. .fr."`
	Flag         string           `json:"flag,omitempty" jsonschema:"Flag emoji."`
	IOC          string           `json:"ioc_code,omitempty" jsonschema:"International Olympic Committee code."`
	FIFA         string           `json:"fifa_code,omitempty" jsonschema:"FIFA code."`
}

type countryCurrency struct {
	Code   string `json:"code" jsonschema:"ISO 4217 code, e.g. EUR."`
	Name   string `json:"name" jsonschema:"Currency name."`
	Digits int    `json:"minor_digits" jsonschema:"Digits after the decimal point."`
}

func countryTool() catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "country_info",
		Title: "Country information",
		Description: "Looks up a country by name or ISO 3166-1 code and returns its official codes (alpha-2, alpha-3, " +
			"numeric), capital, region, currency, international calling codes, top-level domain and flag. Call this " +
			"when the user asks for facts like these about a country. It has no population, language or " +
			"subregion data. An unknown name returns an error listing close matches.",
		InputSchema: schemaFor[countryInput](func(p map[string]*jsonschema.Schema) {
			p["country"].MinLength, p["country"].MaxLength = ptr(1), ptr(100)
		}),
		Annotations: readOnly("Country information", false),
	}, lookupCountry)
}

// countrySet returns the codes that are countries (and territories), not
// the package's placeholders such as "None" and "International". It is
// built on the first lookup, not at start-up: a server that never looks a
// country up neither builds the map nor touches the countries package's
// code.
var countrySet = sync.OnceValue(func() map[countries.CountryCode]bool {
	m := map[countries.CountryCode]bool{}
	for _, c := range countries.All() {
		m[c] = true
	}
	return m
})

func lookupCountry(_ context.Context, _ *sdk.CallToolRequest, in countryInput) (*sdk.CallToolResult, countryOutput, error) {
	q := strings.TrimSpace(in.Country)
	code := countries.ByName(q)
	if n, err := strconv.Atoi(q); err == nil {
		code = countries.ByNumeric(n)
	}
	if !countrySet()[code] {
		msg := fmt.Sprintf("no country matches %q.", q)
		if s := suggestCountries(q, 3); len(s) > 0 {
			msg = fmt.Sprintf("no country matches %q; did you mean %s?", q, strings.Join(s, ", "))
		}
		return nil, countryOutput{}, errors.New(msg + ` Pass a country name or an ISO 3166-1 code such as "FR" or "FRA".`)
	}
	info := code.Info()
	out := countryOutput{
		Name:         info.Name,
		Alpha2:       info.Alpha2,
		Alpha3:       info.Alpha3,
		Numeric:      fmt.Sprintf("%03d", int(code)),
		Capital:      known(info.Capital.String()),
		Region:       known(info.Region.String()),
		CallingCodes: []string{},
		Domain:       known(info.Domain.String()),
		Flag:         info.Emoji,
		IOC:          known(info.IOC),
		FIFA:         known(info.FIFA),
	}
	if cur := info.Currency; cur.IsValid() && known(cur.Alpha()) != "" {
		out.Currency = &countryCurrency{Code: cur.Alpha(), Name: cur.String(), Digits: cur.Digits()}
	}
	for _, cc := range info.CallCodes {
		out.CallingCodes = append(out.CallingCodes, cc.String())
	}
	return nil, out, nil
}

// known hides the package's placeholders for missing values.
func known(s string) string {
	switch strings.ToLower(s) {
	case "", "none", "unknown":
		return ""
	}
	return s
}

// suggestCountries returns up to n country names close to q: names that
// contain it, then names within a small edit distance.
func suggestCountries(q string, n int) []string {
	nq := foldName(q)
	if nq == "" {
		return nil
	}
	type scored struct {
		name  string
		score int
	}
	var cands []scored
	for c := range countrySet() {
		name := c.String()
		nn := foldName(name)
		score := suggest.Distance(nq, nn)
		if len(nq) >= 3 && strings.Contains(nn, nq) {
			score = 0
		}
		if score <= max(2, len(nq)/3) {
			cands = append(cands, scored{name, score})
		}
	}
	slices.SortFunc(cands, func(a, b scored) int {
		if a.score != b.score {
			return a.score - b.score
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, c := range cands[:min(n, len(cands))] {
		out = append(out, c.name)
	}
	return out
}

// foldName lower-cases s and keeps only its letters.
func foldName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
