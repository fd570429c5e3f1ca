package limits

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestTableIsDocumented checks that the operator documents name every
// limit: its label value (or its own metric) and its configuration keys.
func TestTableIsDocumented(t *testing.T) {
	for _, doc := range []string{"../../docs/operations.md", "../../docs/runbook.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, l := range Table {
			want := `limit="` + string(l.Name) + `"`
			if l.Metric != RejectionsMetric {
				want = l.Metric
			}
			if !strings.Contains(text, want) {
				t.Errorf("%s does not mention %s (limit %s)", doc, want, l.Name)
			}
			if !strings.Contains(text, "`"+l.Keys[0]+"`") {
				t.Errorf("%s does not name the key %s of limit %s", doc, l.Keys[0], l.Name)
			}
		}
	}
}

func TestTable(t *testing.T) {
	seen := map[Limit]bool{}
	for _, l := range Table {
		if seen[l.Name] {
			t.Errorf("%s is in the table twice", l.Name)
		}
		seen[l.Name] = true
		if l.Bounds == "" || len(l.Keys) == 0 {
			t.Errorf("%s: says neither what it bounds nor which key sets it", l.Name)
		}
		if l.Metric != RejectionsMetric && l.Metric != RateLimitedMetric {
			t.Errorf("%s: metric %q", l.Name, l.Metric)
		}
	}
	for _, l := range []Limit{LimitInFlightTotal, LimitInFlightPrincipal, LimitRate, LimitSessions, LimitSessionsPrincipal,
		LimitBodySize, LimitBodyReadTimeout, LimitToolTimeout, LimitHeaderSize, LimitReadHeaderTimeout} {
		if !seen[l] {
			t.Errorf("%s is not in the table", l)
		}
	}
	if labels := RejectionLabels(); slices.Contains(labels, string(LimitRate)) || len(labels) != len(Table)-1 {
		t.Errorf("RejectionLabels = %q", labels)
	}
}
