//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serviceSpec is the part of a Service's spec that the kubelet turns into
// service-link variables.
type serviceSpec struct {
	Type      string        `yaml:"type"`
	ClusterIP string        `yaml:"clusterIP"`
	Ports     []servicePort `yaml:"ports"`
}

// serviceLinks returns, as KEY=value, the variables the kubelet injects
// into a container for the Service name with cluster IP ip when service
// links are on: SVC_SERVICE_HOST, SVC_SERVICE_PORT, SVC_SERVICE_PORT_NAME
// for each named port, SVC_PORT for the first port, and SVC_PORT_N_PROTO
// with its _PROTO, _PORT and _ADDR for each port. SVC is name upper-cased
// with '-' turned into '_'. A Service without a cluster IP (headless, or
// ExternalName) gets none.
func serviceLinks(name, ip string, spec serviceSpec) []string {
	if ip == "" || ip == "None" || spec.Type == "ExternalName" || len(spec.Ports) == 0 {
		return nil
	}
	varName := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
	svc := varName(name)
	env := []string{
		svc + "_SERVICE_HOST=" + ip,
		svc + "_SERVICE_PORT=" + strconv.Itoa(spec.Ports[0].Port),
	}
	for _, p := range spec.Ports {
		if p.Name != "" {
			env = append(env, svc+"_SERVICE_PORT_"+varName(p.Name)+"="+strconv.Itoa(p.Port))
		}
	}
	for i, p := range spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, strconv.Itoa(p.Port))
		if i == 0 {
			env = append(env, svc+"_PORT="+url)
		}
		pre := fmt.Sprintf("%s_PORT_%d_%s", svc, p.Port, strings.ToUpper(proto))
		env = append(env,
			pre+"="+url,
			pre+"_PROTO="+strings.ToLower(proto),
			pre+"_PORT="+strconv.Itoa(p.Port),
			pre+"_ADDR="+ip,
		)
	}
	return env
}

// TestChartStartsBesideServiceLinks runs the chart's Deployment in a
// namespace that holds three releases of the chart, with the service-link
// variables a kubelet would inject for their Services and for the API
// server's: what an older chart, or a cluster that forces service links
// on, puts into the container. Releases named portcullis and portcullis-*
// name Services whose variables carry the PORTCULLIS_ config prefix; the
// server must ignore them, log each by name at debug level, and become
// ready. The rendered pod spec must also turn service links off.
func TestChartStartsBesideServiceLinks(t *testing.T) {
	idp := startIdP(t)
	overrides := writeConfigFile(t, map[string]any{
		"config": map[string]any{
			"log":    map[string]any{"level": "debug"},
			"server": map[string]any{"drain_delay": "0s", "shutdown_grace": "5s"},
			"auth":   map[string]any{"issuers": []any{map[string]any{"issuer": idp.Issuer()}}},
		},
	})
	values := []string{filepath.Join(chartDir, "ci", "minimal-values.yaml"), overrides}
	releases := []string{"portcullis", "mcp-gw", "portcullis-edge"}

	// The namespace: the API server's Service, which every pod sees even
	// with service links off, then each release's Services, each with a
	// cluster IP as the cluster would assign it.
	links := serviceLinks("kubernetes", "10.96.0.1", serviceSpec{Ports: []servicePort{{Name: "https", Port: 443, Protocol: "TCP"}}})
	renders := map[string]rendered{}
	nextIP := 10
	for _, release := range releases {
		r := helmTemplateRelease(t, release, values...)
		renders[release] = r
		for _, key := range slices.Sorted(maps.Keys(r)) {
			m := r[key]
			if m.Kind != "Service" {
				continue
			}
			var spec serviceSpec
			m.decodeSpec(t, &spec)
			ip := spec.ClusterIP
			if ip == "" {
				ip = fmt.Sprintf("10.96.0.%d", nextIP)
				nextIP++
			}
			links = append(links, serviceLinks(m.Metadata.Name, ip, spec)...)
		}
	}
	// The variables that carry the config prefix: without them the test
	// could not fail.
	var prefixed []string
	for _, kv := range links {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PORTCULLIS_") {
			prefixed = append(prefixed, name)
		}
	}
	slices.Sort(prefixed)
	for _, want := range []string{"PORTCULLIS_SERVICE_HOST", "PORTCULLIS_PORT", "PORTCULLIS_EDGE_SERVICE_PORT_HTTP"} {
		if !slices.Contains(prefixed, want) {
			t.Fatalf("the namespace's Services give no %s; service-link variables with the prefix: %q", want, prefixed)
		}
	}

	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			d := prepareDeployment(t, renders[release], nil)
			if e := d.pod.EnableServiceLinks; e == nil || *e {
				t.Error("the pod spec does not set enableServiceLinks to false")
			}

			// Only the listen addresses change: the ports are the test's.
			addr, metricsAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
			server, _ := d.config["server"].(map[string]any)
			if server == nil {
				t.Fatalf("the rendered config has no server section: %v", d.config)
			}
			server["listen"], server["metrics_listen"] = addr, metricsAddr
			d.writeConfig(t)

			// The kubelet puts the service links first; the container's own
			// env wins over them.
			env := append(slices.Clone(links), d.env...)
			srv := runServer(t, env, d.args...)
			waitStatus(t, srv.BaseURL+"/readyz", http.StatusOK, 20*time.Second)

			var logged []string
			for line := range strings.Lines(srv.Stderr()) {
				var rec struct{ Level, Msg, Variable string }
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "ignoring a Kubernetes service-link variable" {
					if rec.Level != "DEBUG" {
						t.Errorf("logged at %s, want DEBUG: %s", rec.Level, line)
					}
					logged = append(logged, rec.Variable)
				}
				if strings.Contains(line, "10.96.0.") {
					t.Errorf("a service-link value is logged: %s", line)
				}
			}
			if !slices.Equal(logged, prefixed) {
				t.Errorf("logged ignored variables %q\nwant one line for each of %q", logged, prefixed)
			}
		})
	}
}
