// Module kube-schemas generates the local Kubernetes JSON schemas that
// `make helm-test` gives kubeconform; see main.go. It is its own module so
// the main module does not depend on it.
module github.com/portcullis-mcp/portcullis/scripts/kube-schemas

go 1.26.0

require sigs.k8s.io/yaml v1.6.0

require go.yaml.in/yaml/v2 v2.4.2 // indirect
