//go:build e2e

package e2e

// The image test: the image `make image` builds (no Docker engine, no base
// image), loaded into podman and run under runc exactly as the rendered
// chart's Deployment runs it: its image, args, env, mounted ConfigMap and
// Secrets, user, read-only root, no capabilities. It must become ready,
// answer tool calls (a token from a configured issuer; a --dev token), and
// drain on `podman stop` (SIGTERM) within the pod's
// terminationGracePeriodSeconds, exiting 0. The arm64 variant's binary
// runs under qemu-user-static.
//
// podman, runc and qemu-aarch64-static come from `make image-tools`
// (scripts/install-image-tools.sh); the test fails, never skips, without
// them. The runtime flags are the ones this machine allows (TESTING.md):
// runc, not crun, and ulimits no higher than the current ones.

import (
	"bytes"
	"fmt"
	"io/fs"
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

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// imageTool returns the path of a command the image test needs, failing
// the test with how to install it when it is missing.
func imageTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make image-tools` (scripts/install-image-tools.sh)", name)
	}
	return p
}

// imageArchive returns the oci-archive of the image under test:
// $PORTCULLIS_E2E_IMAGE (make go-test sets it after make image), or what
// `make image` builds now.
func imageArchive(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PORTCULLIS_E2E_IMAGE"); p != "" {
		return p
	}
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-C", "..", "image")
	cmd.Env = serverEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	p, err := filepath.Abs(filepath.Join("..", "bin", "image", "portcullis.oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podman runs podman with args and returns its stdout, failing the test
// on an error.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), imageTool(t, "podman"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// loadImage loads the oci-archive into podman and returns the name it
// was loaded as.
func loadImage(t *testing.T, archive string) string {
	t.Helper()
	out := podman(t, "load", "--input", archive)
	m := regexp.MustCompile(`(?m)^Loaded image(?:\(s\))?: (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("podman load printed no image name:\n%s", out)
	}
	return m[1]
}

// containerSpec is what the test reads of the rendered Deployment besides
// what prepareDeployment does: the image and the security settings.
type containerSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
		RunAsGroup   *int  `yaml:"runAsGroup"`
	} `yaml:"securityContext"`
	Containers []struct {
		Image           string `yaml:"image"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	} `yaml:"containers"`
}

// runFlags turns the rendered pod's security settings into podman run
// flags, failing the test where the chart asks for less than the issue
// requires (non-root, read-only root, every capability dropped).
func (c containerSpec) runFlags(t *testing.T) []string {
	t.Helper()
	sc, pc := c.Containers[0].SecurityContext, c.SecurityContext
	if pc.RunAsNonRoot == nil || !*pc.RunAsNonRoot || pc.RunAsUser == nil || *pc.RunAsUser == 0 || pc.RunAsGroup == nil {
		t.Fatalf("the pod's securityContext does not run as a non-root user and group: %+v", pc)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Fatal("the container's securityContext has no readOnlyRootFilesystem: true")
	}
	if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Fatalf("the container drops capabilities %q, want [ALL]", sc.Capabilities.Drop)
	}
	flags := []string{
		"--user", fmt.Sprintf("%d:%d", *pc.RunAsUser, *pc.RunAsGroup),
		"--read-only",
		"--cap-drop=all",
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		flags = append(flags, "--security-opt", "no-new-privileges")
	}
	return flags
}

// TestImageRunsAsTheChartSays: see the top of this file.
func TestImageRunsAsTheChartSays(t *testing.T) {
	podmanPath := imageTool(t, "podman")
	imageTool(t, "runc")
	archive := imageArchive(t)
	name := loadImage(t, archive)
	t.Logf("loaded %s as %s", archive, name)
	repo, tag, ok := cutLast(name, ":")
	if !ok {
		t.Fatalf("loaded image %q has no tag", name)
	}

	for _, tc := range []struct {
		name string
		dev  bool
	}{
		{name: "issuer"},
		{name: "dev", dev: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, metricsAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
			resource := "http://" + addr + "/mcp"
			key := oidctest.NewECKey("image-e2e")
			idp := oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{key}, Claims: map[string]any{"client_id": "image-e2e"}})

			// The minimal install (one issuer, the public URL) with the
			// test's issuer and URL, and the loaded image.
			overrides := writeConfigFile(t, map[string]any{
				"image": map[string]any{"repository": repo, "tag": tag},
				"config": map[string]any{"auth": map[string]any{
					"resource": resource,
					"issuers":  []any{map[string]any{"issuer": idp.URL()}},
				}},
			})
			r := helmTemplate(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"), overrides)
			d := prepareDeployment(t, r, nil)
			var spec containerSpec
			var dep struct {
				Template struct {
					Spec yaml.Node `yaml:"spec"`
				} `yaml:"template"`
			}
			r.only(t, "Deployment").decodeSpec(t, &dep)
			if err := dep.Template.Spec.Decode(&spec); err != nil {
				t.Fatal(err)
			}
			c := spec.Containers[0]
			if c.Image != name {
				t.Fatalf("the Deployment runs image %q, want the loaded %q", c.Image, name)
			}

			// The host's network is the pod's: only the listen addresses
			// change, to free loopback ports. Everything else, paths
			// included, is as rendered: the volumes are mounted where the
			// pod mounts them.
			server, _ := d.config["server"].(map[string]any)
			server["listen"], server["metrics_listen"] = addr, metricsAddr
			text, err := yaml.Marshal(d.config)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, d.configPath, text)
			// The kubelet writes ConfigMap and Secret files 0644 (the
			// volumes' defaultMode) in folders anyone may enter.
			kubeletModes(t, d.mounts.root)

			cname := fmt.Sprintf("portcullis-e2e-%d-%s", os.Getpid(), tc.name)
			argv := []string{"--runtime", "runc", "run", "--rm", "--name", cname,
				"--network=host",
				"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
			}
			argv = append(argv, spec.runFlags(t)...)
			for _, vm := range c.VolumeMounts {
				local := filepath.Join(d.mounts.root, vm.MountPath)
				opt := ""
				if vm.ReadOnly {
					opt = ":ro"
				}
				argv = append(argv, "--volume", local+":"+vm.MountPath+opt)
			}
			for _, e := range d.env {
				argv = append(argv, "--env", e)
			}
			argv = append(argv, c.Image)
			args := d.pod.Containers[0].Args
			if tc.dev {
				args = append(slices.Clone(args), "--dev")
			}
			argv = append(argv, args...)
			t.Cleanup(func() {
				_ = exec.Command(podmanPath, "rm", "--force", "--ignore", cname).Run()
			})
			t.Logf("podman %s", strings.Join(argv, " "))
			srv := runBinary(t, podmanPath, nil, argv...)
			if srv.BaseURL != "http://"+addr {
				t.Fatalf("serving at %s, want http://%s", srv.BaseURL, addr)
			}
			awaitReady(t, srv, 30*time.Second)

			// A token: the configured issuer's, or --dev's own.
			var token string
			if tc.dev {
				token = devToken(t, srv, "alice")
			} else {
				now := time.Now()
				token = key.Sign(idp.Claims(map[string]any{
					"sub": "alice", "aud": resource,
					"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
				}))
			}
			call := func(tool, args string) toolResult {
				t.Helper()
				res, _ := toolCallResult(t, resource, modernToolCall(2, tool, args), modernHeaders(token, "tools/call", tool), 30*time.Second)
				if res.IsError {
					t.Fatalf("%s returned an error result: %s", tool, res.text())
				}
				return res
			}
			whoami := call("whoami", `{}`)
			if !strings.Contains(string(whoami.StructuredContent), `"alice"`) {
				t.Errorf("whoami: %s, want subject alice", whoami.StructuredContent)
			}
			// A zone from the binary's embedded tzdata: the image has no
			// /usr/share/zoneinfo.
			tokyo := call("time", `{"timezone":"Asia/Tokyo"}`)
			if !strings.Contains(string(tokyo.StructuredContent), `"utc_offset":"+09:00"`) {
				t.Errorf("time in Asia/Tokyo: %s, want utc_offset +09:00", tokyo.StructuredContent)
			}

			// podman stop sends SIGTERM and waits the pod's grace period
			// before SIGKILL, as the kubelet does.
			grace := spec.TerminationGracePeriodSeconds
			if grace <= 0 {
				t.Fatalf("terminationGracePeriodSeconds %d", grace)
			}
			start := time.Now()
			stop := exec.CommandContext(t.Context(), podmanPath, "stop", "--time", strconv.Itoa(grace), cname)
			if out, err := stop.CombinedOutput(); err != nil {
				t.Fatalf("podman stop: %v\n%s", err, out)
			}
			select {
			case <-srv.Done():
			case <-time.After(time.Duration(grace+10) * time.Second):
				t.Fatalf("podman run did not return within %ds of podman stop", grace+10)
			}
			took := time.Since(start)
			if err := srv.ExitErr(); err != nil {
				t.Errorf("the container exited with %v after podman stop, want 0", err)
			}
			if took >= time.Duration(grace)*time.Second {
				t.Errorf("the drain took %v, at or over the grace period of %ds: the runtime killed it", took, grace)
			}
			logs := srv.Stderr()
			for _, msg := range []string{`"msg":"draining"`, `"msg":"stopped"`} {
				if !strings.Contains(logs, msg) {
					t.Errorf("the container's log lacks %s", msg)
				}
			}
			t.Logf("drained and exited 0 in %v (grace %ds)", took.Round(time.Millisecond), grace)
		})
	}
}

// TestImageArm64Binary runs the arm64 variant's binary under qemu's user
// mode emulation: `portcullis version` must name the commit it was built
// from, like the amd64 one.
func TestImageArm64Binary(t *testing.T) {
	qemu := imageTool(t, "qemu-aarch64-static")
	archive := imageArchive(t)
	bin := filepath.Join(filepath.Dir(archive), "linux-arm64", "portcullis")
	file, err := os.ReadFile(bin)
	if err != nil {
		t.Fatalf("the arm64 binary make image builds: %v", err)
	}
	// ELF, 64-bit, little-endian, e_machine 183 (AArch64).
	if len(file) < 20 || string(file[:4]) != "\x7fELF" || file[4] != 2 || file[18] != 183 || file[19] != 0 {
		t.Fatalf("%s is not a 64-bit arm64 ELF binary", bin)
	}
	out, err := exec.CommandContext(t.Context(), qemu, bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-aarch64-static %s version: %v\n%s", bin, err, out)
	}
	amd64, err := exec.CommandContext(t.Context(), filepath.Join(filepath.Dir(archive), "linux-amd64", "portcullis"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("amd64 portcullis version: %v\n%s", err, amd64)
	}
	if string(out) != string(amd64) {
		t.Errorf("arm64 portcullis version:\n%s\nwant what the amd64 one says:\n%s", out, amd64)
	}
	t.Logf("arm64 (qemu): %s", out)
}

// kubeletModes gives the files under root mode 0644 and the folders 0755.
func kubeletModes(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// TestImageReproducible builds the image a second time, into another
// folder, and expects the digest of the image under test: the same commit
// gives the same image. It also checks the binary's build information
// holds no absolute path (a replaced module named by where the checkout
// lives would make the digest depend on it).
func TestImageReproducible(t *testing.T) {
	archive := imageArchive(t)
	want, err := os.ReadFile(filepath.Join(filepath.Dir(archive), "digest"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("bin", fmt.Sprintf("image-repro-%d", os.Getpid()))
	t.Cleanup(func() { os.RemoveAll(filepath.Join("..", dir)) })
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-C", "..", "image", "IMAGE_DIR="+dir)
	cmd.Env = serverEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image IMAGE_DIR=%s: %v\n%s", dir, err, out)
	}
	got, err := os.ReadFile(filepath.Join("..", dir, "digest"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("a second make image gives %s; the image under test is %s (is the work tree changing, or is something in the build not fixed?)", strings.TrimSpace(string(got)), strings.TrimSpace(string(want)))
	}
	for _, platform := range []string{"linux-amd64", "linux-arm64"} {
		bin := filepath.Join(filepath.Dir(archive), platform, "portcullis")
		info, err := exec.CommandContext(t.Context(), "go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatalf("go version -m %s: %v", bin, err)
		}
		for line := range strings.Lines(string(info)) {
			if strings.Contains(line, "\t/") {
				t.Errorf("%s: build information names an absolute path: %q", bin, strings.TrimSpace(line))
			}
		}
		for _, want := range []string{"-trimpath=true", "-tags=grpcnotrace", "CGO_ENABLED=0"} {
			if !strings.Contains(string(info), want) {
				t.Errorf("%s: build information lacks %s", bin, want)
			}
		}
	}
}
