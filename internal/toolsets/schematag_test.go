package toolsets

import (
	"reflect"
	"slices"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// TestToolsetsSchemaEnum checks that the enum the chart's schema offers
// for tools.toolsets (the field's schema tag) is the list Validate knows.
func TestToolsetsSchemaEnum(t *testing.T) {
	f, _ := reflect.TypeFor[Options]().FieldByName("Toolsets")
	enum := config.SchemaEnum(f)
	slices.Sort(enum)
	want := slices.Sorted(slices.Values(knownToolsets))
	if !slices.Equal(enum, want) {
		t.Errorf("tools.toolsets schema enum = %v, want the known toolsets %v", enum, want)
	}
}
