//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestRenderedAlertsSelectTheirRelease renders the chart's PrometheusRule
// for several release names, a nameOverride and a custom selector, and
// runs `promtool test rules` on each rendering against series labelled as
// the Prometheus Operator labels that release's targets: its alerts must
// fire for its own targets and stay quiet for another release's.
func TestRenderedAlertsSelectTheirRelease(t *testing.T) {
	promtool := obsBinary(t, "promtool")
	tests := []struct {
		name      string
		release   string
		namespace string
		set       []string
		// labels are the labels a scraped target of the release carries,
		// empty to take the operator's from the rendered Service.
		labels string
	}{
		{name: "default release", release: "portcullis", namespace: "portcullis"},
		{name: "another release and a nameOverride", release: "mcp-prod", namespace: "team-a", set: []string{"nameOverride=gate"}},
		{
			name: "custom selector", release: "edge", namespace: "infra",
			set:    []string{`prometheusRule.selector=job="kubernetes-pods"\, app_kubernetes_io_instance="edge"`},
			labels: `job="kubernetes-pods", app_kubernetes_io_instance="edge"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"template", tt.release, chartDir, "--namespace", tt.namespace,
				"--set", "prometheusRule.enabled=true", "--set", "config.auth.insecure_allow_unauthenticated=true",
				"-s", "templates/prometheusrule.yaml", "-s", "templates/service.yaml"}
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			out, err := exec.CommandContext(t.Context(), helmBinary(t), args...).Output()
			if err != nil {
				t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
			}
			var groups any
			own, other := tt.labels, ""
			dec := yaml.NewDecoder(bytes.NewReader(out))
			for {
				var doc struct {
					Kind     string `yaml:"kind"`
					Metadata struct {
						Name   string            `yaml:"name"`
						Labels map[string]string `yaml:"labels"`
					} `yaml:"metadata"`
					Spec struct {
						Groups any `yaml:"groups"`
					} `yaml:"spec"`
				}
				if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				switch doc.Kind {
				case "PrometheusRule":
					groups = doc.Spec.Groups
				case "Service":
					// The operator's labels: job from the ServiceMonitor's
					// jobLabel (app.kubernetes.io/name), namespace, service.
					job := doc.Metadata.Labels["app.kubernetes.io/name"]
					if own == "" {
						own = fmt.Sprintf(`job=%q, namespace=%q, service=%q`, job, tt.namespace, doc.Metadata.Name)
					}
					other = fmt.Sprintf(`job=%q, namespace=%q, service=%q`, job, tt.namespace, "other-"+doc.Metadata.Name)
				}
			}
			if groups == nil || own == "" {
				t.Fatalf("the rendering has no PrometheusRule or no Service:\n%s", out)
			}
			rules, err := yaml.Marshal(map[string]any{"groups": groups})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), []byte(renderedAlertTests(own, other)), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), promtool, "test", "rules", "rules_test.yaml")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool test rules: %v\n%s\nrules:\n%s", err, out, rules)
			}
		})
	}
}

// renderedAlertTests is a promtool test file for a rendered rules.yaml:
// own are the labels of the release's targets, other another release's.
func renderedAlertTests(own, other string) string {
	// exp_labels of an alert on up keep every label of the series.
	var expLabels strings.Builder
	for _, kv := range strings.Split(own, ", ") {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&expLabels, "%s: %s, ", k, v)
	}
	job, jobName := "", ""
	for _, kv := range strings.Split(own, ", ") {
		if k, v, _ := strings.Cut(kv, "="); k == "job" {
			job, jobName = "job: "+v+", ", strings.Trim(v, `"`)
		}
	}
	return fmt.Sprintf(`rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - name: this release's target down fires, another release's does not
    interval: 1m
    input_series:
      - series: 'up{%[1]s, instance="10.0.0.1:9090"}'
        values: '0x20'
      - series: 'up{%[2]s, instance="10.0.0.2:9090"}'
        values: '0x20'
    alert_rule_test:
      - eval_time: 10m
        alertname: PortcullisTargetDown
        exp_alerts:
          - exp_labels: {%[3]sinstance: "10.0.0.1:9090", severity: critical}
            exp_annotations:
              summary: "Portcullis instance 10.0.0.1:9090 is down"
              description: "Prometheus has not been able to scrape 10.0.0.1:9090 (job %[5]s) for 5 minutes: the process is down, restarting, or its metrics listener is unreachable."
              runbook: "https://github.com/portcullis-mcp/portcullis/blob/main/docs/runbook.md#portcullistargetdown"
      - eval_time: 20m
        alertname: PortcullisTargetMissing
        exp_alerts: []
  - name: this release's tool errors fire
    interval: 1m
    input_series:
      - series: 'mcp_server_operation_duration_seconds_count{%[1]s, instance="10.0.0.1:9090", mcp_method_name="tools/call", gen_ai_tool_name="echo", error_type=""}'
        values: '0+48x30'
      - series: 'mcp_server_operation_duration_seconds_count{%[1]s, instance="10.0.0.1:9090", mcp_method_name="tools/call", gen_ai_tool_name="echo", error_type="tool_error"}'
        values: '0+12x30'
      - series: 'up{%[1]s, instance="10.0.0.1:9090"}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 25m
        alertname: PortcullisToolErrorRatioHigh
        exp_alerts:
          - exp_labels: {%[4]sgen_ai_tool_name: echo, severity: warning}
            exp_annotations:
              summary: "Tool echo fails 20%% of its calls"
              description: "More than 10%% of tools/call requests for echo failed (tool errors or JSON-RPC errors) over the last 5 minutes, for 10 minutes."
              runbook: "https://github.com/portcullis-mcp/portcullis/blob/main/docs/runbook.md#portcullistoolerrorratiohigh"
  - name: another release's tool errors do not fire here
    interval: 1m
    input_series:
      - series: 'mcp_server_operation_duration_seconds_count{%[2]s, instance="10.0.0.2:9090", mcp_method_name="tools/call", gen_ai_tool_name="echo", error_type="tool_error"}'
        values: '0+60x30'
    alert_rule_test:
      - eval_time: 25m
        alertname: PortcullisToolErrorRatioHigh
        exp_alerts: []
`, own, other, expLabels.String(), job, jobName)
}
