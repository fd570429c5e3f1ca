package toolsets

import (
	"strings"
	"testing"
)

func TestCountryInfo(t *testing.T) {
	cs, _ := connect(t, newCatalog(t, Options{Toolsets: []string{ToolsetWorkshop}}, Deps{}), nil)
	france := map[string]any{"name": "France", "alpha2": "FR", "alpha3": "FRA", "numeric": "250", "capital": "Paris", "region": "Europe", "top_level_domain": ".fr"}
	tests := []struct {
		name    string
		country string
		want    map[string]any
		wantErr []string // substrings of the tool error
	}{
		{name: "by name", country: "France", want: france},
		{name: "by name, any case and spacing", country: "  united states ", want: map[string]any{"alpha2": "US", "capital": "Washington"}},
		{name: "by alpha-2", country: "fr", want: france},
		{name: "by alpha-3", country: "FRA", want: france},
		{name: "by numeric code", country: "250", want: france},
		{name: "misspelled", country: "Frnace", wantErr: []string{`no country matches "Frnace"`, "France", `"FR"`}},
		{name: "unknown", country: "Atlantis", wantErr: []string{`no country matches "Atlantis"`}},
		{name: "placeholder code", country: "International", wantErr: []string{"no country matches"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, cs, "country_info", map[string]any{"country": tt.country})
			if tt.wantErr != nil {
				if !res.IsError {
					t.Fatalf("got %s, want a tool error", resultText(res))
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(resultText(res), w) {
						t.Errorf("error %q does not contain %q", resultText(res), w)
					}
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error: %s", resultText(res))
			}
			got := structured(t, res)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}

	res := call(t, cs, "country_info", map[string]any{"country": "FR"})
	got := structured(t, res)
	cur, _ := got["currency"].(map[string]any)
	if cur["code"] != "EUR" || cur["minor_digits"] != float64(2) {
		t.Errorf("currency = %v, want EUR with 2 minor digits", got["currency"])
	}
	if codes, _ := got["calling_codes"].([]any); len(codes) != 1 || codes[0] != "+33" {
		t.Errorf("calling_codes = %v, want [+33]", got["calling_codes"])
	}
}

func TestSuggestCountries(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  string // must be among the suggestions; empty means none
	}{
		{name: "transposed letters", query: "Germnay", want: "Germany"},
		{name: "substring", query: "zealand", want: "New Zealand"},
		{name: "nothing close", query: "Qqqqqqqqq", want: ""},
		{name: "empty", query: "!!", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := suggestCountries(tt.query, 3)
			if tt.want == "" {
				if len(got) != 0 {
					t.Errorf("suggestCountries(%q) = %v, want none", tt.query, got)
				}
				return
			}
			if !strings.Contains(strings.Join(got, "|"), tt.want) {
				t.Errorf("suggestCountries(%q) = %v, want %q among them", tt.query, got, tt.want)
			}
		})
	}
}
