package openapitools

import (
	"encoding/json"
	"fmt"
	"testing"
)

// document1000 returns an OpenAPI 3.0 document of 1,000 operations over
// 500 paths (a GET with path and query parameters, a PUT with a JSON body
// of shared components), in 20 tags.
func document1000(tb testing.TB) []byte {
	paths := map[string]any{}
	for i := range 500 {
		tag := fmt.Sprintf("tag%d", i%20)
		paths[fmt.Sprintf("/res%d/{id}", i)] = map[string]any{
			"parameters": []any{map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}},
			"get": map[string]any{
				"operationId": fmt.Sprintf("get%d", i), "tags": []any{tag}, "summary": "Get one",
				"parameters": []any{
					map[string]any{"name": "limit", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1}},
					map[string]any{"name": "X-Trace", "in": "header", "schema": map[string]any{"type": "string"}},
				},
				"responses": map[string]any{"200": map[string]any{"description": "ok", "content": map[string]any{
					"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Item"}}}}},
			},
			"put": map[string]any{
				"operationId": fmt.Sprintf("put%d", i), "tags": []any{tag}, "summary": "Replace one",
				"requestBody": map[string]any{"required": true, "content": map[string]any{
					"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Item"}}}},
				"responses": map[string]any{"204": map[string]any{"description": "ok"}},
			},
		}
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "big", "version": "1"},
		"paths":   paths,
		"components": map[string]any{"schemas": map[string]any{
			"Base": map[string]any{"type": "object", "required": []any{"id"}, "properties": map[string]any{
				"id": map[string]any{"type": "string", "readOnly": true}, "created": map[string]any{"type": "string", "format": "date-time"}}},
			"Item": map[string]any{"allOf": []any{
				map[string]any{"$ref": "#/components/schemas/Base"},
				map[string]any{"type": "object", "properties": map[string]any{
					"name":  map[string]any{"type": "string", "nullable": true},
					"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					"owner": map[string]any{"$ref": "#/components/schemas/Base"},
				}},
			}},
		}},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// BenchmarkLoadAndSelect1000 loads a document of 1,000 operations and
// converts the 50 of one tag: issue 43's goal is under a second.
func BenchmarkLoadAndSelect1000(b *testing.B) {
	data := document1000(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d, err := Load(data)
		if err != nil {
			b.Fatal(err)
		}
		if ops, _ := d.Operations(Selection{Tags: []string{"tag3"}}); len(ops) != 50 {
			b.Fatalf("%d operations", len(ops))
		}
	}
}

// BenchmarkLoadAndConvertAll1000 converts all 1,000 operations.
func BenchmarkLoadAndConvertAll1000(b *testing.B) {
	data := document1000(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d, err := Load(data)
		if err != nil {
			b.Fatal(err)
		}
		if ops, _ := d.Operations(everything); len(ops) != 1000 {
			b.Fatalf("%d operations", len(ops))
		}
	}
}

// BenchmarkSelect1000 converts the 50 operations of one tag of a loaded
// document of 1,000.
func BenchmarkSelect1000(b *testing.B) {
	d, err := Load(document1000(b))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ops, _ := d.Operations(Selection{Tags: []string{"tag3"}}); len(ops) != 50 {
			b.Fatalf("%d operations", len(ops))
		}
	}
}
