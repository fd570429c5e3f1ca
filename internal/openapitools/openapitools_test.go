package openapitools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// documents are the test documents: the specification's Petstores and
// webhook example, the 3.1 Petstore and the edge cases.
var documents = []string{
	"testdata/v3.0-petstore.yaml",
	"testdata/v3.0-petstore-expanded.yaml",
	"testdata/v3.1-petstore.yaml",
	"testdata/v3.1-webhook-example.yaml",
	"testdata/edge.yaml",
}

func load(t testing.TB, file string) *Document {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Load(data)
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}
	return d
}

var everything = Selection{Paths: []string{"/**"}}

func names(ops []Operation) []string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Name)
	}
	return out
}

func messages(problems []Problem) []string {
	var out []string
	for _, p := range problems {
		out = append(out, p.String())
	}
	return out
}

func find(t *testing.T, ops []Operation, name string) Operation {
	t.Helper()
	for _, o := range ops {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("no operation %q among %v", name, names(ops))
	return Operation{}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoad(t *testing.T) {
	d := load(t, "testdata/v3.1-petstore.yaml")
	if d.OpenAPI != "3.1.0" || d.Title != "Swagger Petstore" || d.Version != "1.0.0" || d.ServerURL != "https://eu.petstore.example/api/v1" {
		t.Errorf("got %q %q %q %q", d.OpenAPI, d.Title, d.Version, d.ServerURL)
	}
	if d := load(t, "testdata/v3.0-petstore.yaml"); d.ServerURL != "http://petstore.swagger.io/v1" {
		t.Errorf("ServerURL = %q", d.ServerURL)
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"swagger 2.0", `{"swagger": "2.0", "info": {"title": "x", "version": "1"}, "paths": {}}`, "no openapi field"},
		{"openapi 3.2", `{"openapi": "3.2.0", "info": {"title": "x", "version": "1"}, "paths": {}}`, "OpenAPI 3.2.0 is not supported"},
		{"not a document", `[1, 2`, "openapitools:"},
		{"an external reference", `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "https://example.com/s.json"}}}}}}}}}`, "external reference"},
		{"a reference to nothing", `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Nope"}}}}}}}}}`, "openapitools:"},
		{"an invalid document", `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a/{id}": {"get": {"responses": {"200": {"description": "ok"}}}}}}`, "not valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	d := load(t, "testdata/v3.1-petstore.yaml")
	for _, tc := range []struct {
		name     string
		sel      Selection
		want     []string
		problems []string
	}{
		{name: "nothing selected", sel: Selection{}, want: nil},
		{name: "by operationId", sel: Selection{OperationIDs: []string{"showPetById", "placeOrder"}}, want: []string{"showPetById", "placeOrder"}},
		{name: "by tag", sel: Selection{Tags: []string{"store"}}, want: []string{"placeOrder"}},
		{name: "by path", sel: Selection{Paths: []string{"/pets"}}, want: []string{"listPets", "createPet"}},
		{name: "by path glob in one segment", sel: Selection{Paths: []string{"/pets/*"}}, want: []string{"showPetById", "deletePet", "updatePet"}},
		{name: "by path glob over segments", sel: Selection{Paths: []string{"/pets/**"}}, want: []string{"listPets", "createPet", "showPetById", "deletePet", "updatePet"}},
		{name: "everything", sel: everything, want: []string{"listPets", "createPet", "showPetById", "deletePet", "updatePet", "placeOrder"}},
		{name: "by method", sel: Selection{Methods: []string{"get"}}, want: []string{"listPets", "showPetById"}},
		{name: "fields narrow each other", sel: Selection{Tags: []string{"pets"}, Methods: []string{"POST", "DELETE"}}, want: []string{"createPet", "deletePet"}},
		{name: "an id and a tag that disagree", sel: Selection{OperationIDs: []string{"placeOrder"}, Tags: []string{"pets"}}, want: nil},
		{name: "entries that match nothing", sel: Selection{OperationIDs: []string{"listPets", "listPet"}, Tags: []string{"pet"}, Paths: []string{"/pet/**", "/[x"}, Methods: []string{"FETCH", "TRACE"}},
			want: nil,
			problems: []string{
				`operationId "listPet" matches no operation of the document`,
				`tag "pet" matches no operation of the document`,
				`path glob "/pet/**" matches no operation of the document`,
				`path glob "/[x" is malformed`,
				`method "FETCH" is not an HTTP method an operation can have`,
				`method "TRACE" matches no operation of the document`,
			}},
		{name: "webhooks are not operations", sel: Selection{Paths: []string{"newPet", "/**"}, Methods: []string{"POST"}}, want: []string{"createPet", "placeOrder"},
			problems: []string{`path glob "newPet" matches no operation of the document`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, problems := d.Operations(tc.sel)
			if got := names(ops); !slices.Equal(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
			if got := messages(problems); !slices.Equal(got, tc.problems) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.problems, "\n"))
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name, id, method, path, want string
	}{
		{"an operationId as is", "listPets", "GET", "/pets", "listPets"},
		{"spaces", "find pet by id", "GET", "/pets/{id}", "find_pet_by_id"},
		{"dots and slashes", "pets.v2/list", "GET", "/pets", "pets_v2_list"},
		{"hyphens and underscores kept", "get-pet_by__id", "GET", "/pets", "get-pet_by__id"},
		{"no operationId", "", "GET", "/pets/{petId}/photos", "get_pets_petId_photos"},
		{"an operationId with nothing usable", "élan", "DELETE", "/x", "lan"},
		{"an operationId of symbols", "++", "PUT", "/x/{y}", "put_x_y"},
		{"cut to 64", strings.Repeat("a", 70), "GET", "/", strings.Repeat("a", 64)},
		{"the root path", "", "GET", "/", "get"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := toolName(tc.id, tc.method, tc.path); got != tc.want {
				t.Errorf("toolName(%q, %q, %q) = %q, want %q", tc.id, tc.method, tc.path, got, tc.want)
			}
		})
	}
	taken := map[string]bool{"a": true, "a_2": true, strings.Repeat("b", 64): true}
	for _, tc := range []struct{ in, want string }{
		{"c", "c"},
		{"a", "a_3"},
		{strings.Repeat("b", 64), strings.Repeat("b", 62) + "_2"},
	} {
		if got := unique(tc.in, func(n string) bool { return taken[n] }); got != tc.want {
			t.Errorf("unique(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"X-Request-Id", "X-Request-Id"},
		{"filter[name]", "filter_name_"},
		{"a.b", "a.b"},
		{"$", "arg"},
		{strings.Repeat("p", 65), strings.Repeat("p", 64)},
	} {
		if got := argName(tc.in); got != tc.want {
			t.Errorf("argName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNameClashes(t *testing.T) {
	doc := `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {
	  "/a": {"get": {"operationId": "list.things", "responses": {"200": {"description": "ok"}}}},
	  "/b": {"get": {"operationId": "list_things", "responses": {"200": {"description": "ok"}}}}}}`
	d, err := Load([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	ops, problems := d.Operations(everything)
	if got := names(ops); !slices.Equal(got, []string{"list_things", "list_things_2"}) {
		t.Errorf("names %v", got)
	}
	want := []string{
		`GET /a: operationId "list.things" is the tool name "list_things"`,
		`GET /b: the tool name "list_things" is another operation's: this one is "list_things_2"`,
	}
	if got := messages(problems); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

func TestParameters(t *testing.T) {
	ops, problems := load(t, "testdata/edge.yaml").Operations(everything)
	for _, tc := range []struct {
		name, op string
		params   []Param
		body     string
		ct       string
		required []string
	}{
		{name: "path, query, header; a clash; a renamed name; a cookie left out", op: "getThing",
			params: []Param{
				{Name: "id", In: InPath, As: "id", Required: true, Style: "simple"},
				{Name: "query_id", In: InQuery, As: "id", Style: "form", Explode: true},
				{Name: "filter_name_", In: InQuery, As: "filter[name]", Style: "form", Explode: true},
				{Name: "score", In: InQuery, As: "score", Style: "form", Explode: true},
				{Name: "code", In: InQuery, As: "code", Style: "form", Explode: true},
				{Name: "X-Trace", In: InHeader, As: "X-Trace", Required: true, Style: "simple"},
			},
			required: []string{"id", "X-Trace"}},
		{name: "a JSON body's properties; one named like a path parameter", op: "putThing", body: BodyJSON, ct: "application/json",
			params: []Param{
				{Name: "id", In: InPath, As: "id", Required: true, Style: "simple"},
				{Name: "body", In: InBody, As: "body"},
				{Name: "body_id", In: InBody, As: "id", Required: true},
			},
			required: []string{"id", "body_id"}},
		{name: "a body that is not an object", op: "addNumbers", body: BodyJSON, ct: "application/json",
			params: []Param{{Name: "body", In: InBody}}},
		{name: "a oneOf body", op: "addShape", body: BodyJSON, ct: "application/json",
			params:   []Param{{Name: "body", In: InBody, Required: true}},
			required: []string{"body"}},
		{name: "an optional body of another type left out", op: "addNote"},
		{name: "no parameters, no operationId", op: "get_anything"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := find(t, ops, tc.op)
			if !reflect.DeepEqual(o.Params, tc.params) {
				t.Errorf("params\n%s\nwant\n%s", toJSON(t, o.Params), toJSON(t, tc.params))
			}
			if o.Body != tc.body || o.ContentType != tc.ct {
				t.Errorf("body %q %q, want %q %q", o.Body, o.ContentType, tc.body, tc.ct)
			}
			req, _ := o.InputSchema["required"].([]string)
			if !slices.Equal(req, tc.required) {
				t.Errorf("required %v, want %v", req, tc.required)
			}
			props := o.InputSchema["properties"].(map[string]any)
			if len(props) != len(tc.params) {
				t.Errorf("%d properties for %d params", len(props), len(tc.params))
			}
			for _, p := range tc.params {
				if _, ok := props[p.Name]; !ok {
					t.Errorf("no property %q", p.Name)
				}
			}
		})
	}
	for _, op := range []string{"login", "upload"} {
		if slices.Contains(names(ops), op) {
			t.Errorf("%s is served", op)
		}
	}
	wantProblems := []string{
		`POST /login: required cookie parameter "csrf": cookie parameters cannot be sent; the operation is not served`,
		`POST /notes: the optional request body is left out: its media types (application/octet-stream) are neither JSON nor a form`,
		`GET /things/{id}: query parameter "id" is the argument "query_id"`,
		`GET /things/{id}: query parameter "filter[name]" is the argument "filter_name_"`,
		`GET /things/{id}: cookie parameter "session" is left out: cookie parameters cannot be sent`,
		"GET /things/{id}: query code: pattern \"^(?!x)[a-z]+$\" is left out: Go's regexp does not take it (error parsing regexp: invalid or unsupported Perl syntax: `(?!`)",
		`PUT /things/{id}: body property "id" is the argument "body_id"`,
		`POST /trees: body.children[].children[]: the schema is recursive or too deep; it is cut there and accepts any value`,
		`POST /trees: response body.children[].children[]: the schema is recursive or too deep; it is cut there and accepts any value`,
		`POST /uploads: the request body cannot be sent: its media types (multipart/form-data) are neither JSON nor a form; the operation is not served`,
	}
	if got := messages(problems); !slices.Equal(got, wantProblems) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantProblems, "\n"))
	}
}

func TestPetstore31(t *testing.T) {
	ops, problems := load(t, "testdata/v3.1-petstore.yaml").Operations(everything)
	if len(problems) > 0 {
		t.Errorf("problems: %v", messages(problems))
	}
	yes := true
	for _, tc := range []struct {
		op, input, output string
		body, ct          string
		ann               Annotations
	}{
		{op: "listPets", ann: Annotations{ReadOnly: &yes},
			input:  `{"additionalProperties":false,"properties":{"X-Request-Id":{"format":"uuid","type":"string"},"limit":{"description":"How many items to return at one time (max 100)","examples":[20],"exclusiveMinimum":0,"maximum":100,"type":"integer"},"tags":{"items":{"type":"string"},"type":"array"}},"type":"object"}`,
			output: `{"properties":{"items":{"items":{"properties":{"id":{"format":"int64","readOnly":true,"type":"integer"},"kind":{"const":"pet"},"name":{"examples":["Rex"],"type":"string"},"tag":{"type":["string","null"]}},"required":["id","name"],"type":"object"},"type":"array"},"next":{"type":["string","null"]}},"type":"object"}`},
		{op: "createPet", body: BodyJSON, ct: "application/json",
			input:  `{"additionalProperties":false,"properties":{"kind":{"const":"pet"},"name":{"examples":["Rex"],"type":"string"},"tag":{"type":["string","null"]}},"required":["name"],"type":"object"}`,
			output: `{"properties":{"id":{"format":"int64","readOnly":true,"type":"integer"},"kind":{"const":"pet"},"name":{"examples":["Rex"],"type":"string"},"tag":{"type":["string","null"]}},"required":["id","name"],"type":"object"}`},
		{op: "updatePet", body: BodyJSON, ct: "application/merge-patch+json",
			input:  `{"additionalProperties":false,"properties":{"kind":{"const":"pet"},"name":{"examples":["Rex"],"type":"string"},"petId":{"description":"The id of the pet","format":"int64","type":"integer"},"tag":{"type":["string","null"]}},"required":["petId","name"],"type":"object"}`,
			output: `{"properties":{"id":{"format":"int64","readOnly":true,"type":"integer"},"kind":{"const":"pet"},"name":{"examples":["Rex"],"type":"string"},"tag":{"type":["string","null"]}},"required":["id","name"],"type":"object"}`},
		{op: "deletePet", ann: Annotations{Idempotent: &yes, Destructive: &yes},
			input:  `{"additionalProperties":false,"properties":{"petId":{"description":"The id of the pet","format":"int64","type":"integer"}},"required":["petId"],"type":"object"}`,
			output: `null`},
		{op: "placeOrder", body: BodyForm, ct: "application/x-www-form-urlencoded",
			input:  `{"additionalProperties":false,"properties":{"petId":{"type":"integer"},"quantity":{"default":1,"minimum":1,"type":"integer"}},"required":["petId"],"type":"object"}`,
			output: `{"properties":{"id":{"type":"integer"},"status":{"enum":["placed","approved","delivered"]}},"type":"object"}`},
	} {
		t.Run(tc.op, func(t *testing.T) {
			o := find(t, ops, tc.op)
			if got := toJSON(t, o.InputSchema); got != tc.input {
				t.Errorf("input schema\n%s\nwant\n%s", got, tc.input)
			}
			if got := toJSON(t, o.OutputSchema); got != tc.output {
				t.Errorf("output schema\n%s\nwant\n%s", got, tc.output)
			}
			if o.Body != tc.body || o.ContentType != tc.ct {
				t.Errorf("body %q %q, want %q %q", o.Body, o.ContentType, tc.body, tc.ct)
			}
			if !reflect.DeepEqual(o.Annotations, tc.ann) {
				t.Errorf("annotations %s, want %s", toJSON(t, o.Annotations), toJSON(t, tc.ann))
			}
		})
	}
}

// TestSchemas checks the conversion of one body schema at a time, given
// in a document of the version named, with components A (an object with
// a readOnly id), B and Node (recursive).
func TestSchemas(t *testing.T) {
	components := `"A": {"type": "object", "required": ["id", "a"], "properties": {"id": {"type": "string", "readOnly": true}, "a": {"type": "string"}}},
	  "B": {"type": "object", "properties": {"b": {"type": "integer", "minimum": 1}, "a": {"type": "string", "maxLength": 3}}},
	  "Node": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Node"}}}`
	for _, tc := range []struct {
		name, version, schema, want string
	}{
		{"a $ref", "3.0.3", `{"$ref": "#/components/schemas/A"}`,
			`{"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"}`},
		{"allOf merged", "3.0.3", `{"allOf": [{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/B"}, {"required": ["b"]}]}`,
			`{"properties":{"a":{"maxLength":3,"type":"string"},"b":{"minimum":1,"type":"integer"}},"required":["a","b"],"type":"object"}`},
		{"allOf that cannot merge", "3.0.3", `{"type": "object", "properties": {"p": {"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "b$"}, {"type": "integer"}]}}}`,
			`{"properties":{"p":{"allOf":[{"pattern":"b$"},{"type":"integer"}],"pattern":"^a","type":"string"}},"type":"object"}`},
		{"oneOf as anyOf", "3.0.3", `{"type": "object", "properties": {"p": {"oneOf": [{"type": "string"}, {"$ref": "#/components/schemas/B"}], "discriminator": {"propertyName": "b"}}}}`,
			`{"properties":{"p":{"anyOf":[{"type":"string"},{"properties":{"a":{"maxLength":3,"type":"string"},"b":{"minimum":1,"type":"integer"}},"type":"object"}]}},"type":"object"}`},
		{"anyOf kept", "3.1.0", `{"type": "object", "properties": {"p": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}`,
			`{"properties":{"p":{"anyOf":[{"type":"string"},{"type":"null"}]}},"type":"object"}`},
		{"nullable with a type", "3.0.3", `{"type": "object", "properties": {"p": {"type": "string", "nullable": true, "enum": ["x"]}}}`,
			`{"properties":{"p":{"enum":["x",null],"type":["string","null"]}},"type":"object"}`},
		{"nullable without a type", "3.0.3", `{"type": "object", "properties": {"p": {"nullable": true, "allOf": [{"$ref": "#/components/schemas/B"}]}}}`,
			`{"properties":{"p":{"anyOf":[{"properties":{"a":{"maxLength":3,"type":"string"},"b":{"minimum":1,"type":"integer"}},"type":"object"},{"type":"null"}]}},"type":"object"}`},
		{"nullable in 3.1 means nothing", "3.1.0", `{"type": "object", "properties": {"p": {"type": "string", "nullable": true}}}`,
			`{"properties":{"p":{"type":"string"}},"type":"object"}`},
		{"example as examples", "3.0.3", `{"type": "object", "properties": {"p": {"type": "string", "example": "x"}}}`,
			`{"properties":{"p":{"examples":["x"],"type":"string"}},"type":"object"}`},
		{"3.0 exclusive bounds", "3.0.3", `{"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 9, "exclusiveMaximum": false}}}`,
			`{"properties":{"p":{"exclusiveMinimum":0,"maximum":9,"type":"number"}},"type":"object"}`},
		{"3.1 keywords", "3.1.0", `{"type": "object", "properties": {"p": {"type": "array", "prefixItems": [{"type": "string"}], "items": false, "contains": {"const": 1}}, "q": {"if": {"type": "string"}, "then": {"minLength": 1}, "else": {"type": "integer"}}}, "dependentRequired": {"p": ["q"]}}`,
			`{"dependentRequired":{"p":["q"]},"properties":{"p":{"contains":{"const":1},"items":{"not":{}},"prefixItems":[{"type":"string"}],"type":"array"},"q":{"else":{"type":"integer"},"if":{"type":"string"},"then":{"minLength":1}}},"type":"object"}`},
		{"recursion cut", "3.0.3", `{"$ref": "#/components/schemas/Node"}`,
			`{"properties":{"next":{"properties":{"next":{"description":"Not described further: the schema is recursive or too deep."}},"type":"object"}},"type":"object"}`},
		{"additionalProperties", "3.0.3", `{"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}, "n": {"type": "object", "additionalProperties": false}}}`,
			`{"properties":{"m":{"additionalProperties":{"type":"integer"},"type":"object"},"n":{"additionalProperties":false,"type":"object"}},"type":"object"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"openapi": "` + tc.version + `", "info": {"title": "x", "version": "1"}, "paths": {"/x": {"post": {"operationId": "x",
			  "requestBody": {"required": true, "content": {"application/json": {"schema": ` + tc.schema + `}}},
			  "responses": {"200": {"description": "ok"}}}}}, "components": {"schemas": {` + components + `}}}`
			d, err := Load([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			ops, _ := d.Operations(everything)
			if len(ops) != 1 {
				t.Fatalf("%d operations", len(ops))
			}
			// The body's schema, put together again from its arguments.
			in := ops[0].InputSchema
			var got map[string]any
			if b, ok := in["properties"].(map[string]any)["body"]; ok && ops[0].Params[0].As == "" {
				got = b.(map[string]any)
			} else {
				got = map[string]any{"type": "object", "properties": in["properties"]}
				if r, ok := in["required"]; ok {
					got["required"] = r
				}
			}
			if s := toJSON(t, got); s != tc.want {
				t.Errorf("schema\n%s\nwant\n%s", s, tc.want)
			}
		})
	}
}

// keywords are the JSON Schema 2020-12 keywords the conversion may write.
var keywords = map[string]bool{
	"type": true, "enum": true, "const": true, "title": true, "description": true, "default": true, "examples": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "format": true, "contentMediaType": true, "contentEncoding": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "pattern": true,
	"items": true, "prefixItems": true, "contains": true, "minContains": true, "maxContains": true, "minItems": true, "maxItems": true,
	"uniqueItems": true, "unevaluatedItems": true,
	"properties": true, "required": true, "additionalProperties": true, "patternProperties": true, "propertyNames": true,
	"minProperties": true, "maxProperties": true, "dependentRequired": true, "dependentSchemas": true, "unevaluatedProperties": true,
	"allOf": true, "anyOf": true, "not": true, "if": true, "then": true, "else": true,
}

// subschemas are the keywords whose value holds schemas: one, a list, or
// a map of them.
var subschemas = map[string]string{
	"items": "one", "contains": "one", "not": "one", "if": "one", "then": "one", "else": "one", "propertyNames": "one",
	"additionalProperties": "one", "unevaluatedItems": "one", "unevaluatedProperties": "one",
	"prefixItems": "list", "allOf": "list", "anyOf": "list",
	"properties": "map", "patternProperties": "map", "dependentSchemas": "map",
}

// checkKeywords reports any keyword of s, at any depth, that is not a
// JSON Schema 2020-12 keyword the conversion writes: no $ref, no oneOf,
// no OpenAPI keyword (nullable, example, discriminator) is left.
func checkKeywords(t *testing.T, at string, s any) {
	t.Helper()
	m, ok := s.(map[string]any)
	if !ok {
		if _, isBool := s.(bool); !isBool {
			t.Errorf("%s: a schema is a %T", at, s)
		}
		return
	}
	for k, v := range m {
		if !keywords[k] {
			t.Errorf("%s: keyword %q", at, k)
		}
		switch subschemas[k] {
		case "one":
			checkKeywords(t, at+"/"+k, v)
		case "list":
			for i, sub := range v.([]any) {
				checkKeywords(t, at+"/"+k+"/"+string(rune('0'+i)), sub)
			}
		case "map":
			for name, sub := range v.(map[string]any) {
				checkKeywords(t, at+"/"+k+"/"+name, sub)
			}
		}
	}
}

// propertyName is the Claude API's rule for an input schema's property
// names.
var propertyName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// toolNameRule is the Claude API's rule for tool names, stricter than
// MCP's.
var toolNameRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestSchemasValid2020 is the schema half of issue 43's second Shown-by:
// every tool's input schema (and output schema) of every test document
// compiles as a JSON Schema 2020-12 schema with google/jsonschema-go,
// holds only 2020-12 keywords and no $ref, and is an object schema with
// no combinator at its top, whose property names the Claude API takes.
func TestSchemasValid2020(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(documents) {
		t.Fatalf("testdata holds %v, the tests know %v", files, documents)
	}
	count := 0
	for _, file := range documents {
		ops, _ := load(t, file).Operations(everything)
		for _, o := range ops {
			if !toolNameRule.MatchString(o.Name) {
				t.Errorf("%s: tool name %q", file, o.Name)
			}
			for kind, schema := range map[string]map[string]any{"input": o.InputSchema, "output": o.OutputSchema} {
				if schema == nil {
					if kind == "input" {
						t.Errorf("%s %s: no input schema", file, o.Name)
					}
					continue
				}
				count++
				at := file + " " + o.Name + " " + kind
				if schema["type"] != "object" {
					t.Errorf("%s: type %v", at, schema["type"])
				}
				for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "if"} {
					if _, ok := schema[k]; ok {
						t.Errorf("%s: %s at the top", at, k)
					}
				}
				if kind == "input" {
					for name := range schema["properties"].(map[string]any) {
						if !propertyName.MatchString(name) {
							t.Errorf("%s: property name %q", at, name)
						}
					}
				}
				checkKeywords(t, at, schema)
				// Round-trip through JSON, as a client receives it.
				data := toJSON(t, schema)
				var s jsonschema.Schema
				if err := json.Unmarshal([]byte(data), &s); err != nil {
					t.Errorf("%s: %v", at, err)
					continue
				}
				s.Schema = "https://json-schema.org/draft/2020-12/schema"
				if _, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
					t.Errorf("%s: does not compile as JSON Schema 2020-12: %v\n%s", at, err, data)
				}
			}
		}
	}
	if count < 30 {
		t.Errorf("checked only %d schemas", count)
	}
}
