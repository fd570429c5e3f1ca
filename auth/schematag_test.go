package auth

import (
	"reflect"
	"slices"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// TestSchemaEnums checks that the enums the chart's schema offers (the
// fields' schema tags) are the values Validate accepts.
func TestSchemaEnums(t *testing.T) {
	tests := []struct {
		name  string
		field reflect.StructField
		want  []string
	}{
		{name: "auth.issuers[].algorithms", field: field[IssuerOptions]("Algorithms"), want: asymmetricAlgs},
		{name: "auth.introspection.auth_method", field: field[IntrospectionOptions]("AuthMethod"), want: []string{AuthMethodClientSecretBasic, AuthMethodBearer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enum := config.SchemaEnum(tt.field)
			slices.Sort(enum)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(enum, want) {
				t.Errorf("schema enum = %v, want %v", enum, want)
			}
		})
	}
}

func field[T any](name string) reflect.StructField {
	f, _ := reflect.TypeFor[T]().FieldByName(name)
	return f
}
