//lint:file-ignore U1000 the constants here are read from this file's source by the doc-link tests (the generator evaluates them), not used by code

package chartschema

import (
	"strings"
	"testing"
	"time"
)

// Constants the doc links of TestResolveLinks name.
const (
	testBytes                 = 5 << 10
	testName                  = "portcullis:"
	testDay                   = 24 * time.Hour
	testMixed                 = time.Hour + 30*time.Minute
	testTyped   time.Duration = 2500
	testConvert               = time.Duration(90) * time.Second
	testRatio                 = time.Minute / time.Second
	testDerived               = testDay * 2
	testOn                    = true
	testHalf                  = 0.5
	testIota                  = iota
	testIotaNext
)

func TestResolveLinks(t *testing.T) {
	d, err := newDocs("../..")
	if err != nil {
		t.Fatal(err)
	}
	src, err := d.pkg(d.module + "/internal/chartschema")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, text, want, wantErr string
	}{
		{name: "shifted integer", text: "Zero means [testBytes].", want: "Zero means `5120`."},
		{name: "string", text: "Empty means [testName].", want: "Empty means `portcullis:`."},
		{name: "whole hours", text: "Zero means [testDay].", want: "Zero means `24h`."},
		{name: "hours and minutes", text: "Default [testMixed]", want: "Default `1h30m`"},
		{name: "declared duration", text: "Default [testTyped].", want: "Default `2.5µs`."},
		{name: "converted duration", text: "Default [testConvert].", want: "Default `1m30s`."},
		{name: "ratio of durations", text: "At most [testRatio] of them.", want: "At most `60` of them."},
		{name: "constant of a constant", text: "Default [testDerived].", want: "Default `48h`."},
		{name: "boolean", text: "Default [testOn].", want: "Default `true`."},
		{name: "float", text: "Default [testHalf].", want: "Default `0.5`."},
		{name: "qualified by an import of the module", text: "See [config.DurationPattern].", want: "See `" + `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$` + "`."},
		{name: "two links", text: "[testBytes] or [testDay]", want: "`5120` or `24h`"},
		{name: "an interval is not a link", text: "clamped to [min_ttl, max_ttl]", want: "clamped to [min_ttl, max_ttl]"},
		{name: "a lower-case index is not a link", text: "list[i] and [x]", want: "list[i] and [x]"},
		{name: "a Markdown link is not a doc link", text: "see [Guide](guide.md)", want: "see [Guide](guide.md)"},
		{name: "a type", text: "see [Override].", wantErr: "[Override] names no constant"},
		{name: "a method", text: "[Override.Key] applies it", wantErr: "[Override.Key] names no constant"},
		{name: "another package's function", text: "the ping of [config.Keys]", wantErr: "[config.Keys] names no constant"},
		{name: "a package outside the module", text: "[time.Second]", wantErr: "[time.Second] names no constant"},
		{name: "iota", text: "[testIotaNext]", wantErr: "iota"},
		{name: "iota itself", text: "[testIota]", wantErr: "iota is not read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.resolveLinks(src, tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("resolveLinks(%q) = %q, %v; want an error containing %q", tt.text, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("resolveLinks(%q) = %q, %v; want %q", tt.text, got, err, tt.want)
			}
		})
	}
}
