// Command kube-schemas writes the JSON schemas kubeconform validates the
// chart's manifests against, from sources in the Go module cache, so that
// `make helm-test` needs no network but the Go module proxy:
//
//   - every built-in kind, from api/openapi-spec/swagger.json in the module
//     k8s.io/kubernetes;
//   - ServiceMonitor and PrometheusRule, from the CRDs in the module
//     github.com/prometheus-operator/prometheus-operator;
//   - HTTPRoute, from the CRDs in the module sigs.k8s.io/gateway-api.
//
// The files follow kubeconform's default layout,
// OUT/v{VERSION}-standalone-strict/{kind}-{group}-{version}.json, so
// kubeconform finds them with
//
//	-strict -kubernetes-version VERSION -schema-location 'OUT/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json'
//
// The schemas are strict: every object that lists its properties refuses
// any other (a misspelled field fails), apiVersion and kind are pinned, and
// Kubernetes' int-or-string and quantity types accept numbers and strings.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kube-schemas:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kube-schemas", flag.ContinueOnError)
	out := fs.String("out", "", "output `folder` (required)")
	kube := fs.String("kubernetes", "v1.32.13", "version of the module k8s.io/kubernetes")
	promOp := fs.String("prometheus-operator", "v0.85.0", "version of the module github.com/prometheus-operator/prometheus-operator")
	gateway := fs.String("gateway-api", "v1.3.0", "version of the module sigs.k8s.io/gateway-api")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	dir := filepath.Join(*out, *kube+"-standalone-strict")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	kubeDir, err := moduleDir("k8s.io/kubernetes@" + *kube)
	if err != nil {
		return err
	}
	n, err := writeBuiltins(dir, filepath.Join(kubeDir, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		return err
	}
	promDir, err := moduleDir("github.com/prometheus-operator/prometheus-operator@" + *promOp)
	if err != nil {
		return err
	}
	gwDir, err := moduleDir("sigs.k8s.io/gateway-api@" + *gateway)
	if err != nil {
		return err
	}
	crds := []string{
		filepath.Join(promDir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(promDir, "example", "prometheus-operator-crd", "monitoring.coreos.com_prometheusrules.yaml"),
		filepath.Join(gwDir, "config", "crd", "standard", "gateway.networking.k8s.io_httproutes.yaml"),
	}
	for _, path := range crds {
		m, err := writeCRD(dir, path)
		if err != nil {
			return err
		}
		n += m
	}
	fmt.Printf("kube-schemas: wrote %d schemas to %s\n", n, dir)
	return nil
}

// moduleDir downloads mod (path@version) into the module cache if needed
// and returns its folder.
func moduleDir(mod string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(stdout.Bytes(), &info); jerr != nil || info.Error != "" || err != nil {
		return "", fmt.Errorf("go mod download %s: %v %s %s", mod, err, info.Error, stderr.String())
	}
	return info.Dir, nil
}

type schema = map[string]any

// fileName is kubeconform's name for a kind's schema: the kind, the first
// label of the group (if any) and the version, lower case.
func fileName(group, version, kind string) string {
	parts := []string{strings.ToLower(kind)}
	if group != "" {
		parts = append(parts, strings.ToLower(strings.Split(group, ".")[0]))
	}
	parts = append(parts, strings.ToLower(version))
	return strings.Join(parts, "-") + ".json"
}

func apiVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// writeBuiltins writes one schema per kind in the swagger document: the
// kind's definition with the definitions it reaches.
func writeBuiltins(dir, swaggerPath string) (int, error) {
	data, err := os.ReadFile(swaggerPath)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Definitions map[string]schema `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", swaggerPath, err)
	}
	defs := map[string]any{}
	for name, d := range doc.Definitions {
		if name == "io.k8s.apimachinery.pkg.api.resource.Quantity" {
			defs[name] = schema{"oneOf": []any{schema{"type": "string"}, schema{"type": "number"}}}
			continue
		}
		defs[name] = convert(d)
	}
	names := make([]string, 0, len(doc.Definitions))
	for name := range doc.Definitions {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		gvks, _ := doc.Definitions[name]["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			if kind == "" || strings.HasSuffix(kind, "List") || kind == "WatchEvent" || kind == "DeleteOptions" || kind == "Status" {
				continue
			}
			root := pin(defs[name].(schema), apiVersion(group, version), kind)
			root["definitions"] = reachable(defs, root)
			if err := writeJSON(filepath.Join(dir, fileName(group, version, kind)), root); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// writeCRD writes one schema per served version of the CRD at path.
func writeCRD(dir, path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	n := 0
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		root := pin(convert(v.Schema.OpenAPIV3Schema).(schema), apiVersion(crd.Spec.Group, v.Name), crd.Spec.Names.Kind)
		if err := writeJSON(filepath.Join(dir, fileName(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)), root); err != nil {
			return n, err
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no served version with a schema", path)
	}
	return n, nil
}

// pin returns a copy of s whose apiVersion and kind accept only the given values.
func pin(s schema, apiVersion, kind string) schema {
	out := schema{}
	for k, v := range s {
		out[k] = v
	}
	props := schema{}
	if p, ok := s["properties"].(schema); ok {
		for k, v := range p {
			props[k] = v
		}
	}
	props["apiVersion"] = schema{"type": "string", "enum": []any{apiVersion}}
	props["kind"] = schema{"type": "string", "enum": []any{kind}}
	out["properties"] = props
	out["required"] = union(s["required"], "apiVersion", "kind")
	return out
}

func union(existing any, names ...string) []any {
	seen := map[string]bool{}
	var out []any
	list, _ := existing.([]any)
	for _, v := range append(list, toAny(names)...) {
		if s, ok := v.(string); ok && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// convert turns an OpenAPI schema into a strict JSON schema: objects that
// list properties refuse others unless they preserve unknown fields,
// int-or-string accepts both, nullable adds null, and descriptions and
// vendor extensions are dropped.
func convert(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = convert(e)
		}
		return out
	case schema:
		if v["format"] == "int-or-string" || v["x-kubernetes-int-or-string"] == true {
			return schema{"oneOf": []any{schema{"type": "string"}, schema{"type": "integer"}}}
		}
		out := schema{}
		for k, e := range v {
			switch {
			case k == "description", strings.HasPrefix(k, "x-"):
			case k == "properties" || k == "patternProperties" || k == "definitions":
				props := schema{}
				for name, p := range e.(schema) {
					props[name] = convert(p)
				}
				out[k] = props
			default:
				out[k] = convert(e)
			}
		}
		if v["nullable"] == true {
			delete(out, "nullable")
			if t, ok := out["type"].(string); ok {
				out["type"] = []any{t, "null"}
			}
		}
		_, hasProps := v["properties"]
		_, hasAdditional := v["additionalProperties"]
		if hasProps && !hasAdditional && v["x-kubernetes-preserve-unknown-fields"] != true {
			out["additionalProperties"] = false
		}
		return out
	default:
		return v
	}
}

// reachable returns the definitions s refers to, directly or not.
func reachable(defs map[string]any, s schema) schema {
	out := schema{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case schema:
			for k, e := range v {
				if ref, ok := e.(string); ok && k == "$ref" {
					name := strings.TrimPrefix(ref, "#/definitions/")
					if _, done := out[name]; !done {
						out[name] = defs[name]
						walk(defs[name])
					}
					continue
				}
				walk(e)
			}
		}
	}
	walk(s)
	return out
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
