//go:build e2e

package e2e

// The chart-to-binary test: render the Helm chart, run the real binary the
// way the rendered Deployment would, and check what the cluster would check
// (probes), what Prometheus would scrape (the ServiceMonitor) and what a
// connector would see (auth, metadata).
//
// helm comes from `make helm-tools` (.cache/bin/helm) or PATH; the test
// fails, never skips, without it.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/portcullis-mcp/portcullis/mcp"
)

// chartDir is the chart, relative to this package.
const chartDir = "../helm/portcullis"

// helmBinary returns the helm that `make helm-tools` installs, or the one on
// PATH, and fails the test when there is neither.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join("..", ".cache", "bin", "helm")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		t.Fatal("helm is not installed: run `make helm-tools` (scripts/install-helm-tools.sh) or put helm on PATH")
	}
	return p
}

// manifest is one rendered object, with the fields the test reads.
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec yaml.Node         `yaml:"spec"`
}

type podSpec struct {
	EnableServiceLinks *bool `yaml:"enableServiceLinks"`
	Containers         []struct {
		Args []string `yaml:"args"`
		Env  []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  probe `yaml:"livenessProbe"`
		ReadinessProbe probe `yaml:"readinessProbe"`
		VolumeMounts   []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
	} `yaml:"containers"`
	Volumes []podVolume `yaml:"volumes"`
}

type podVolume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string      `yaml:"secretName"`
		Items      []keyToPath `yaml:"items"`
	} `yaml:"secret"`
}

type servicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
	Protocol   string `yaml:"protocol"`
}

type keyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// rendered is `helm template`'s output, by kind and name.
type rendered map[string]manifest

func (r rendered) get(t *testing.T, kind, name string) manifest {
	t.Helper()
	m, ok := r[kind+"/"+name]
	if !ok {
		t.Fatalf("the chart rendered no %s named %q", kind, name)
	}
	return m
}

// only returns the one object of kind, and fails unless there is exactly one.
func (r rendered) only(t *testing.T, kind string) manifest {
	t.Helper()
	var found []manifest
	for _, m := range r {
		if m.Kind == kind {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the chart rendered %d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

func (m manifest) decodeSpec(t *testing.T, v any) {
	t.Helper()
	if err := m.Spec.Decode(v); err != nil {
		t.Fatalf("%s %s: spec: %v", m.Kind, m.Metadata.Name, err)
	}
}

// helmTemplate renders the chart as release "portcullis" with the values
// files, in order.
func helmTemplate(t *testing.T, valuesFiles ...string) rendered {
	t.Helper()
	return helmTemplateRelease(t, "portcullis", valuesFiles...)
}

// helmTemplateRelease renders the chart as the release named release, in
// the namespace "portcullis", with the values files, in order.
func helmTemplateRelease(t *testing.T, release string, valuesFiles ...string) rendered {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", "portcullis"}
	for _, f := range valuesFiles {
		args = append(args, "-f", f)
	}
	cmd := exec.CommandContext(t.Context(), helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	out := rendered{}
	dec := yaml.NewDecoder(&stdout)
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		if m.Kind != "" {
			out[m.Kind+"/"+m.Metadata.Name] = m
		}
	}
	return out
}

// hostPort returns addr's port as a number.
func hostPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return n
}

// mounts maps the pod's mount paths to folders under a temporary root.
type mounts struct {
	root  string
	paths []string // mount paths, longest first
}

// local returns where path (in the pod) is on this machine, and whether it
// is under a mount.
func (m *mounts) local(path string) (string, bool) {
	for _, p := range m.paths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return filepath.Join(m.root, path), true
		}
	}
	return path, false
}

// rewritePaths replaces, in every string of v (decoded YAML), a path under
// a mount by its local copy.
func (m *mounts) rewritePaths(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = m.rewritePaths(e)
		}
	case []any:
		for i, e := range v {
			v[i] = m.rewritePaths(e)
		}
	case string:
		if p, ok := m.local(v); ok {
			return p
		}
	}
	return v
}

// TestChartScenariosCheckConfig runs `portcullis check-config` with the
// rendered args, env and config file of every scenario the chart is linted
// with and of deploy/k8s: the values schema must not let through a
// configuration the binary refuses.
func TestChartScenariosCheckConfig(t *testing.T) {
	scenarios, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(scenarios) == 0 {
		t.Fatalf("no scenarios in %s/ci: %v", chartDir, err)
	}
	scenarios = append(scenarios, filepath.Join("..", "deploy", "k8s", "values.yaml"))
	// The Secrets the scenarios expect to exist.
	secrets := map[string]map[string]string{
		"portcullis-request-state": {"keys": base64.StdEncoding.EncodeToString(mcp.NewRandomKey())},
		"portcullis-introspection": {"client-secret": "a client secret"},
		"valkey-users":             {"default": "a redis password"},
		"valkey-ca":                {"ca.crt": selfSignedCAPEM(t)},
		// A JWKS of one private P-256 key, made with the recipe of
		// docs/authorization-server.md ("Signing keys"); a test key only.
		"portcullis-authorization-server-keys": {"keys.json": testAuthServerKeys},
		"portcullis-entra":                     {"client-secret": "an entra client secret"},
		"portcullis-connections":               {"keys": base64.StdEncoding.EncodeToString(mcp.NewRandomKey())},
	}
	for _, values := range scenarios {
		t.Run(strings.TrimSuffix(filepath.Base(values), ".yaml"), func(t *testing.T) {
			t.Parallel()
			d := prepareDeployment(t, helmTemplate(t, values), secrets)
			d.writeConfig(t)
			if len(d.args) == 0 || d.args[0] != "serve" {
				t.Fatalf("the container runs %q, want serve …", d.args)
			}
			cmd := exec.CommandContext(t.Context(), binary, append([]string{"check-config"}, d.args[1:]...)...)
			cmd.Env = serverEnv(d.env...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "configuration OK") {
				t.Errorf("portcullis check-config %s: %v\n%s", strings.Join(d.args[1:], " "), err, out)
			}
		})
	}
}

// testAuthServerKeys is the signing key set of the authorization-server
// scenario: a key made for this test, signing nothing real.
const testAuthServerKeys = `{"keys":[{"kty":"EC","crv":"P-256","alg":"ES256","use":"sig","kid":"20261125T201834Z","d":"ZkplJ8_Ho5b_Ipd27lLk6Uge3cgcD6SGhy1xsPOkLxw","x":"vqv558S9Pyf5qad3BGmFQmUTT9B6noZUomVGa6ZiO9Q","y":"6yWyq5-rOJNXXWfs-xaHMtJMOOHNzGO5-1g2llEShuU"}]}`

// deployment is the rendered Deployment's container, made runnable here:
// its volumes laid out under a temporary root, its args and config file
// pointing there.
type deployment struct {
	pod        podSpec
	ports      map[string]int // container port name → number
	mounts     *mounts
	args       []string       // the container's args, mount paths made local
	env        []string       // the container's env, KEY=value
	configPath string         // the local copy of the --config file
	config     map[string]any // its content, for the test to adjust
}

// prepareDeployment lays out the one Deployment of r, with secrets for the
// Secrets the chart expects to exist.
func prepareDeployment(t *testing.T, r rendered, secrets map[string]map[string]string) *deployment {
	t.Helper()
	var dep struct {
		Template struct {
			Spec yaml.Node `yaml:"spec"`
		} `yaml:"template"`
	}
	r.only(t, "Deployment").decodeSpec(t, &dep)
	d := &deployment{ports: map[string]int{}}
	if err := dep.Template.Spec.Decode(&d.pod); err != nil {
		t.Fatalf("Deployment pod spec: %v", err)
	}
	if len(d.pod.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(d.pod.Containers))
	}
	c := d.pod.Containers[0]
	for _, p := range c.Ports {
		d.ports[p.Name] = p.ContainerPort
	}
	d.mounts = layOut(t, r, d.pod, 0, secrets)
	for _, a := range c.Args {
		local, _ := d.mounts.local(a)
		d.args = append(d.args, local)
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			// A key of one of the Secrets the scenarios expect to exist.
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				t.Fatalf("env %s uses a valueFrom other than secretKeyRef, which the test cannot resolve", e.Name)
			}
			v, ok := secrets[ref.Name][ref.Key]
			if !ok {
				t.Fatalf("env %s reads key %q of Secret %q, which the test does not provide", e.Name, ref.Key, ref.Name)
			}
			value = v
		}
		d.env = append(d.env, e.Name+"="+value)
	}
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("the container's args %q name no --config file", c.Args)
	}
	var ok bool
	if d.configPath, ok = d.mounts.local(c.Args[i+1]); !ok {
		t.Fatalf("--config %s is not in a mounted volume", c.Args[i+1])
	}
	text, err := os.ReadFile(d.configPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(text, &d.config); err != nil {
		t.Fatalf("rendered config.yaml: %v\n%s", err, text)
	}
	return d
}

// writeConfig writes d.config back, its mount paths made local.
func (d *deployment) writeConfig(t *testing.T) {
	t.Helper()
	data, err := yaml.Marshal(d.mounts.rewritePaths(d.config))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// layOut writes the files that the pod's container number c mounts under
// a temporary root, as the kubelet would: ConfigMaps and Secrets from the
// rendered objects, or from secrets (name → key → content) for Secrets
// the chart expects to exist. A ConfigMap the chart does not render (from
// extraVolumes) becomes an empty folder.
func layOut(t *testing.T, r rendered, pod podSpec, c int, secrets map[string]map[string]string) *mounts {
	t.Helper()
	m := &mounts{root: t.TempDir()}
	container := pod.Containers[c]
	for _, vm := range container.VolumeMounts {
		m.paths = append(m.paths, vm.MountPath)
	}
	slices.SortFunc(m.paths, func(a, b string) int { return len(b) - len(a) })
	for _, vm := range container.VolumeMounts {
		local, _ := m.local(vm.MountPath)
		i := slices.IndexFunc(pod.Volumes, func(v podVolume) bool { return v.Name == vm.Name })
		if i < 0 {
			t.Fatalf("volumeMount %q names no volume", vm.Name)
		}
		v := pod.Volumes[i]
		var files map[string]string // key in the volume's source → content
		var items []keyToPath
		switch {
		case v.ConfigMap != nil:
			cm, ok := r["ConfigMap/"+v.ConfigMap.Name]
			if !ok {
				if err := os.MkdirAll(local, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			files = cm.Data
		case v.Secret != nil:
			items = v.Secret.Items
			if data, ok := secrets[v.Secret.SecretName]; ok {
				files = data
				break
			}
			s := r.get(t, "Secret", v.Secret.SecretName)
			files = map[string]string{}
			for k, b64 := range s.Data {
				b, err := base64.StdEncoding.DecodeString(b64)
				if err != nil {
					t.Fatalf("Secret %s key %s: %v", v.Secret.SecretName, k, err)
				}
				files[k] = string(b)
			}
		default:
			t.Fatalf("volume %q: the test knows configMap and secret volumes only", v.Name)
		}
		if items == nil {
			for k := range files {
				items = append(items, keyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			content, ok := files[it.Key]
			if !ok {
				t.Fatalf("volume %q: no key %q", v.Name, it.Key)
			}
			switch vm.SubPath {
			case "":
				writeFile(t, filepath.Join(local, it.Path), []byte(content))
			case it.Path:
				writeFile(t, local, []byte(content))
			}
		}
	}
	return m
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestChartRunsTheBinary(t *testing.T) {
	idp := startIdP(t)
	addr, metricsAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
	resource := "http://" + addr + "/mcp"

	// The scenario: ci/full-values.yaml (every optional object on), with
	// the test's IdP as the one issuer and introspection endpoint, and an
	// environment variable that shows the rendered env reaches the binary.
	overrides := map[string]any{
		"config": map[string]any{
			"server": map[string]any{"drain_delay": "0s", "shutdown_grace": "5s"},
			"auth": map[string]any{
				"resource": resource,
				"issuers":  []any{map[string]any{"issuer": idp.Issuer()}},
				"introspection": map[string]any{
					"url":       idp.IntrospectionURL(),
					"client_id": idpIntrospector,
				},
				"scopes_supported": []string{"mcp:tools", "weather:read"},
			},
		},
		"extraEnv": []any{map[string]any{"name": "PORTCULLIS_AUTH_RESOURCE_NAME", "value": "Chart test"}},
		// The helm test checks the public URL, which is config.auth.resource.
		"tests": map[string]any{"doctor": map[string]any{"url": ""}},
	}
	overridesFile := writeConfigFile(t, overrides)
	r := helmTemplate(t, filepath.Join(chartDir, "ci", "full-values.yaml"), overridesFile)

	// The Secrets full-values.yaml names as existing ones, as an operator
	// would create them.
	existingSecrets := map[string]map[string]string{
		"portcullis-request-state": {"keys": base64.StdEncoding.EncodeToString(mcp.NewRandomKey())},
		"portcullis-introspection": {"client-secret": idpIntrospectorSecret},
	}

	d := prepareDeployment(t, r, existingSecrets)
	c := d.pod.Containers[0]
	containerPorts := d.ports

	// Rewrite only the listen addresses. The config's listen ports must be
	// the container's named ports.
	server, _ := d.config["server"].(map[string]any)
	listen, _ := server["listen"].(string)
	metricsListen, _ := server["metrics_listen"].(string)
	localAddr := map[int]string{} // container port → where the test's process listens
	for name, key := range map[string]string{"http": listen, "metrics": metricsListen} {
		if got, want := hostPort(t, key), containerPorts[name]; got != want {
			t.Errorf("config listens on port %d for %q, but the container port %q is %d", got, name, name, want)
		}
	}
	localAddr[hostPort(t, listen)] = addr
	localAddr[hostPort(t, metricsListen)] = metricsAddr
	server["listen"], server["metrics_listen"] = addr, metricsAddr
	d.writeConfig(t)

	// Run the binary with exactly the rendered args and env.
	t.Logf("running portcullis %s with env %q", strings.Join(d.args, " "), d.env)
	srv := runServer(t, d.env, d.args...)
	if srv.BaseURL != "http://"+addr {
		t.Fatalf("serving at %s, want http://%s", srv.BaseURL, addr)
	}

	// The probes, on the ports they name.
	probeURL := func(p probe) string {
		port, ok := containerPorts[p.HTTPGet.Port]
		if !ok {
			t.Fatalf("probe port %q is not a container port", p.HTTPGet.Port)
		}
		return "http://" + localAddr[port] + p.HTTPGet.Path
	}
	if got := c.LivenessProbe.HTTPGet.Path; got != "/healthz" {
		t.Errorf("liveness probe path %q, want /healthz", got)
	}
	if got := c.ReadinessProbe.HTTPGet.Path; got != "/readyz" {
		t.Errorf("readiness probe path %q, want /readyz", got)
	}
	waitStatus(t, probeURL(c.LivenessProbe), http.StatusOK, 10*time.Second)
	waitStatus(t, probeURL(c.ReadinessProbe), http.StatusOK, 20*time.Second)

	// A connector's view: the metadata (its name set by the rendered env),
	// a JWT from the issuer, an opaque token through introspection with
	// the mounted client secret.
	prm := getJSON(t, srv.BaseURL+"/.well-known/oauth-protected-resource/mcp")
	if prm["resource"] != resource || prm["resource_name"] != "Chart test" {
		t.Errorf("Protected Resource Metadata resource %v, resource_name %v; want %s and \"Chart test\" (from extraEnv)", prm["resource"], prm["resource_name"], resource)
	}
	jwt := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource)
	if names := toolNames(t, callOK(t, resource, modernToolsList(2), modernHeaders(jwt, "tools/list", ""))); !slices.Contains(names, "whoami") {
		t.Errorf("tools/list with a JWT: %v, want whoami among them", names)
	}
	opaque := idp.OpaqueToken(t, resource)
	if names := toolNames(t, callOK(t, resource, modernToolsList(2), modernHeaders(opaque, "tools/list", ""))); len(names) == 0 {
		t.Error("tools/list with an opaque token (introspection): no tools")
	}

	// Prometheus's view: the ServiceMonitor's port, through the Service, to
	// the container port, at its path.
	var sm struct {
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	}
	r.get(t, "ServiceMonitor", "portcullis").decodeSpec(t, &sm)
	var svc struct {
		Ports []servicePort `yaml:"ports"`
	}
	r.get(t, "Service", "portcullis").decodeSpec(t, &svc)
	if len(sm.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Endpoints))
	}
	ep := sm.Endpoints[0]
	sp := slices.IndexFunc(svc.Ports, func(p servicePort) bool { return p.Name == ep.Port })
	if sp < 0 {
		t.Fatalf("ServiceMonitor port %q is not a Service port", ep.Port)
	}
	cport, ok := containerPorts[svc.Ports[sp].TargetPort]
	if !ok {
		t.Fatalf("Service port %q targets %q, which is not a container port", ep.Port, svc.Ports[sp].TargetPort)
	}
	status, body := get(t, "http://"+localAddr[cport]+ep.Path)
	if status != http.StatusOK {
		t.Fatalf("scrape %s: status %d", ep.Path, status)
	}
	for _, want := range []string{
		"portcullis_build_info{",
		`portcullis_auth_requests_total{outcome="allowed",reason=""}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape of %s lacks %s", ep.Path, want)
		}
	}
	listed := regexp.MustCompile(`(?m)^mcp_server_operation_duration_seconds_count\{error_type="",[^}]*mcp_method_name="tools/list",[^}]*\} 2$`)
	if !listed.MatchString(body) {
		t.Errorf("scrape of %s lacks two successful tools/list operations", ep.Path)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}

	// `helm test`'s view: the test pod's `portcullis doctor`, with its token
	// Secret (as an operator would create it) laid out like the server's.
	var doctorPod podSpec
	r.get(t, "Pod", "portcullis-doctor").decodeSpec(t, &doctorPod)
	dm := layOut(t, r, doctorPod, 0, map[string]map[string]string{
		"portcullis-doctor-token": {"token": jwt},
	})
	dargs := slices.Clone(doctorPod.Containers[0].Args)
	for i, a := range dargs {
		dargs[i], _ = dm.local(a)
	}
	if len(dargs) < 2 || dargs[0] != "doctor" || dargs[1] != resource {
		t.Fatalf("the helm test pod runs %q, want doctor %s …", dargs, resource)
	}
	doctor := exec.CommandContext(t.Context(), binary, dargs...)
	doctor.Env = serverEnv()
	out, err := doctor.CombinedOutput()
	if err != nil {
		t.Errorf("portcullis %s: %v\n%s", strings.Join(dargs, " "), err, out)
	} else {
		t.Logf("portcullis %s:\n%s", strings.Join(dargs, " "), out)
	}
}

// get GETs url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// getJSON GETs url and decodes its JSON object.
func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	status, body := get(t, url)
	if status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", url, status, body)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return v
}

// waitStatus polls url until it answers want, failing after timeout.
func waitStatus(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	var (
		status int
		body   string
	)
	if !poll(timeout, 200*time.Millisecond, func() bool {
		status, body = get(t, url)
		return status == want
	}) {
		t.Fatalf("GET %s: status %d after %v, want %d: %s", url, status, timeout, want, body)
	}
}

// selfSignedCAPEM returns a CA certificate made for the test, PEM-encoded.
func selfSignedCAPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "portcullis e2e CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
