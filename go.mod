module github.com/portcullis-mcp/portcullis

go 1.26.0

require (
	github.com/biter777/countries v1.7.5 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
