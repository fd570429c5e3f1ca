package httptools

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
)

const petstore30 = "../openapitools/testdata/v3.0-petstore.yaml"

// TestOpenAPIImport: the operations a document selects are served as
// tools beside the declared ones; a call becomes the operation's request,
// at base_url and never at the document's servers.
func TestOpenAPIImport(t *testing.T) {
	for _, c := range []struct {
		name           string
		file           string
		sel            SelectOptions
		want           []string
		petID, petPath string
	}{
		{"3.0 by operationId", petstore30, SelectOptions{OperationIDs: []string{"showPetById", "listPets"}}, []string{"listPets", "showPetById"}, `"a/../b"`, "/v1/pets/a%2F..%2Fb"},
		{"3.0 by method", petstore30, SelectOptions{Methods: []string{"GET"}}, []string{"listPets", "showPetById"}, `"7"`, "/v1/pets/7"},
		{"3.1 by path", "../openapitools/testdata/v3.1-petstore.yaml", SelectOptions{Paths: []string{"/pets/*"}}, nil, "7", "/v1/pets/7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := newTestAPI(t, nil)
			o := Options{Name: "pets", BaseURL: api.srv.URL + "/v1", AllowPrivateAddresses: true,
				OpenAPI: &OpenAPIOptions{File: c.file, Select: c.sel}}
			tools := register(t, o)
			var names []string
			for n := range tools {
				names = append(names, n)
			}
			slices.Sort(names)
			if c.want != nil && !slices.Equal(names, c.want) {
				t.Fatalf("served %v, want %v", names, c.want)
			}
			if len(names) == 0 {
				t.Fatal("nothing served")
			}
			if show, ok := tools["showPetById"]; ok {
				res := show(`{"petId":` + c.petID + `}`)
				if res.IsError {
					t.Fatalf("showPetById: %s", text(res))
				}
				if got := api.last(t); got.method != http.MethodGet || got.rawPath != c.petPath {
					t.Fatalf("the API got %s %s", got.method, got.rawPath)
				}
			}
		})
	}
}

func TestOpenAPIImportChecks(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("openapi: 3.0.0\ninfo: [\n"), 0o600)
	for _, c := range []struct {
		name string
		o    OpenAPIOptions
		want string
	}{
		{"nothing selected", OpenAPIOptions{File: petstore30}, "select: empty, which serves nothing"},
		{"a selection matching nothing", OpenAPIOptions{File: petstore30, Select: SelectOptions{OperationIDs: []string{"nope"}}}, "no operation"},
		{"a missing file", OpenAPIOptions{File: filepath.Join(dir, "missing.yaml"), Select: SelectOptions{Methods: []string{"GET"}}}, "no such file"},
		{"not a document", OpenAPIOptions{File: bad, Select: SelectOptions{Methods: []string{"GET"}}}, "[0].openapi:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			list := []Options{{Name: "pets", BaseURL: "https://pets.example/v1", OpenAPI: &c.o}}
			list[0].Defaults()
			err := Validate(list, nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want %q", err, c.want)
			}
		})
	}
	// A declared tool named like an imported operation.
	list := []Options{{Name: "pets", BaseURL: "https://pets.example/v1", Tools: petsAPI("https://pets.example/v1").Tools,
		OpenAPI: &OpenAPIOptions{File: petstore30, Select: SelectOptions{Methods: []string{"GET"}}}}}
	list[0].Tools = append(list[0].Tools, list[0].Tools[0])
	list[0].Tools[len(list[0].Tools)-1].Name = "listPets"
	list[0].Defaults()
	if err := Validate(list, nil, nil); err == nil || !strings.Contains(err.Error(), `the operation "listPets" is named like tools[`) {
		t.Fatalf("a clash: %v", err)
	}
}

// TestJoinedQuery: a query param marked joined (OpenAPI's explode false)
// sends an array as one comma-joined value; one not joined, a key per
// element.
func TestJoinedQuery(t *testing.T) {
	api := newTestAPI(t, nil)
	o := Options{Name: "pets", BaseURL: api.srv.URL, AllowPrivateAddresses: true, Tools: []spec.Tool{{
		Name: "list", Method: "GET", Path: "/pets",
		Params: []spec.Param{{Name: "tags", In: spec.InQuery, Joined: true}, {Name: "ids", In: spec.InQuery}},
	}}}
	res := register(t, o)["list"](`{"tags":["a","b"],"ids":[1,2]}`)
	if res.IsError {
		t.Fatal(text(res))
	}
	if got := api.last(t).rawQuery; got != "ids=1&ids=2&tags=a%2Cb" {
		t.Fatalf("query %q", got)
	}
}
