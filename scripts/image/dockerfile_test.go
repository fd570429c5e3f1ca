package main

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfilePath is the repository's Dockerfile, from this package.
const dockerfilePath = "../../Dockerfile"

// distrolessBase is what the Dockerfile's final stage gets from its base
// image, gcr.io/distroless/static-debian12:nonroot, which cannot be pulled
// here: its config and its files, as GoogleContainerTools/distroless
// documents and builds them. The engine-less build must give the same.
var distrolessBase = struct {
	Ref        string
	User       string
	WorkingDir string
	Env        []string
	// Files the base holds that the binary or its users rely on.
	Files []string
	// Zoneinfo is the base's time-zone database, which the engine-less
	// build replaces with the binary's embedded copy (time/tzdata).
	Zoneinfo string
}{
	Ref:        "gcr.io/distroless/static-debian12:nonroot",
	User:       "65532", // the tag's "nonroot"; the Dockerfile sets USER 65532:65532 itself
	WorkingDir: "/home/nonroot",
	Env: []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	},
	Files: []string{
		"/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
		"/etc/ssl/certs/ca-certificates.crt",
		"/home/nonroot", "/tmp",
	},
	Zoneinfo: "/usr/share/zoneinfo",
}

// stage is the final stage of a Dockerfile: its base and instructions.
type stage struct {
	From         string
	Args         map[string]string // ARG name → default
	Labels       map[string]string // after ARG substitution
	Copies       [][]string        // COPY arguments, flags included
	User         string
	Expose       []string
	Entrypoint   []string
	Cmd          []string
	Env          []string
	Runs         []string // RUN lines of every stage
	Instructions []string // the final stage's instruction keywords, in order
}

// parseDockerfile reads what the check needs of a Dockerfile: line
// continuations joined, comments dropped, the final stage's instructions.
// It knows the instructions the Portcullis Dockerfile uses and fails on
// any other in the final stage, so a new one is looked at, not ignored.
func parseDockerfile(t *testing.T, text string, args map[string]string) stage {
	t.Helper()
	var lines []string
	var cur strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	var s stage
	for _, line := range lines {
		kw, rest, _ := strings.Cut(line, " ")
		kw, rest = strings.ToUpper(kw), strings.TrimSpace(rest)
		if kw == "FROM" {
			s = stage{From: strings.Fields(rest)[0], Args: map[string]string{}, Labels: map[string]string{}, Runs: s.Runs}
			continue
		}
		if s.From == "" {
			continue // ARGs before the first FROM
		}
		s.Instructions = append(s.Instructions, kw)
		switch kw {
		case "RUN":
			s.Runs = append(s.Runs, rest)
		case "ARG":
			name, def, _ := strings.Cut(rest, "=")
			s.Args[name] = def
		case "LABEL":
			for _, m := range regexp.MustCompile(`([A-Za-z0-9._-]+)="([^"]*)"`).FindAllStringSubmatch(rest, -1) {
				s.Labels[m[1]] = expandArgs(m[2], s.Args, args)
			}
		case "COPY":
			s.Copies = append(s.Copies, strings.Fields(rest))
		case "USER":
			s.User = rest
		case "EXPOSE":
			s.Expose = strings.Fields(rest)
		case "ENV":
			s.Env = append(s.Env, rest)
		case "ENTRYPOINT":
			s.Entrypoint = execForm(t, kw, rest)
		case "CMD":
			s.Cmd = execForm(t, kw, rest)
		}
	}
	known := []string{"RUN", "ARG", "LABEL", "COPY", "USER", "EXPOSE", "ENV", "ENTRYPOINT", "CMD"}
	for _, kw := range s.Instructions {
		if !slices.Contains(known, kw) {
			t.Errorf("the Dockerfile's final stage uses %s, which this check does not compare: teach it (and scripts/image) first", kw)
		}
	}
	return s
}

// expandArgs replaces ${NAME} and $NAME with the build argument's value
// from given, or its default.
func expandArgs(v string, defaults, given map[string]string) string {
	return os.Expand(v, func(name string) string {
		if g, ok := given[name]; ok {
			return g
		}
		return defaults[name]
	})
}

// execForm decodes an exec-form (JSON array) ENTRYPOINT or CMD; the shell
// form would need a shell, which neither image has.
func execForm(t *testing.T, kw, rest string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(rest), &v); err != nil {
		t.Errorf("%s %s: not the exec form (a JSON array): the image has no shell to run the shell form", kw, rest)
	}
	return v
}

// TestDockerfileAgrees checks that the Dockerfile's final stage and the
// engine-less build describe the same image: base files, user, working
// folder, environment, entrypoint, command, ports, labels, and the one
// file the stage copies, built the same way.
func TestDockerfileAgrees(t *testing.T) {
	text, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	df := parseDockerfile(t, string(text), map[string]string{"VERSION": o.Version, "REVISION": o.Revision})
	base := distrolessBase

	if df.From != base.Ref {
		t.Fatalf("the Dockerfile's final stage is FROM %s; this check (and scripts/image) knows what %s holds: update both", df.From, base.Ref)
	}

	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	for platform, img := range platformImages(t, idx) {
		t.Run(platform, func(t *testing.T) {
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			wantUser := df.User
			if wantUser == "" {
				wantUser = base.User
			}
			if c.User != wantUser {
				t.Errorf("user %q, the Dockerfile's %q", c.User, wantUser)
			}
			if !slices.Equal(c.Entrypoint, df.Entrypoint) {
				t.Errorf("entrypoint %q, the Dockerfile's %q", c.Entrypoint, df.Entrypoint)
			}
			if !slices.Equal(c.Cmd, df.Cmd) {
				t.Errorf("cmd %q, the Dockerfile's %q", c.Cmd, df.Cmd)
			}
			var wantPorts []string
			for _, p := range df.Expose {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				wantPorts = append(wantPorts, p)
			}
			slices.Sort(wantPorts)
			if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, wantPorts) {
				t.Errorf("exposed ports %q, the Dockerfile's %q", got, wantPorts)
			}
			if !maps.Equal(c.Labels, df.Labels) {
				t.Errorf("labels %v,\nthe Dockerfile's %v", c.Labels, df.Labels)
			}
			for _, k := range []string{labelSource, labelRevision, labelVersion, labelLicenses} {
				if c.Labels[k] == "" {
					t.Errorf("no label %s", k)
				}
			}
			if c.Labels[labelLicenses] != "Apache-2.0" {
				t.Errorf("licenses label %q, want Apache-2.0", c.Labels[labelLicenses])
			}
			wantEnv := append(slices.Clone(base.Env), df.Env...)
			if !slices.Equal(c.Env, wantEnv) {
				t.Errorf("env %q, the Dockerfile's (its base's and its own) %q", c.Env, wantEnv)
			}
			if c.WorkingDir != base.WorkingDir {
				t.Errorf("working folder %q, the Dockerfile's (its base's) %q", c.WorkingDir, base.WorkingDir)
			}

			// Files: the base layer holds the base's files, the layer
			// above holds exactly what the final stage copies.
			layers, err := img.Layers()
			if err != nil || len(layers) != 2 {
				t.Fatalf("%d layers (%v), want 2", len(layers), err)
			}
			baseFiles := map[string]bool{}
			for _, e := range layerEntries(t, layers[0]) {
				baseFiles[e.Name] = true
			}
			for _, f := range base.Files {
				if !baseFiles[f] {
					t.Errorf("the base layer lacks %s, which %s holds", f, base.Ref)
				}
			}
			var copied []string
			for _, cp := range df.Copies {
				if len(cp) != 3 || cp[0] != "--from=build" || cp[1] != "/out/portcullis" {
					t.Errorf("COPY %s: the check knows only COPY --from=build /out/portcullis DEST", strings.Join(cp, " "))
					continue
				}
				copied = append(copied, cp[2])
			}
			var added []string
			for _, e := range layerEntries(t, layers[1]) {
				added = append(added, e.Name)
			}
			if !slices.Equal(added, copied) {
				t.Errorf("files above the base %q, the Dockerfile copies %q", added, copied)
			}
		})
	}

	// The binary: the Dockerfile's build stage runs `make build` (the
	// patched SDK, the build tags, CGO_ENABLED=0), as make image does.
	if !slices.ContainsFunc(df.Runs, func(r string) bool { return strings.Contains(r, "make build BIN=/out/portcullis") }) {
		t.Errorf("no RUN … make build BIN=/out/portcullis in the Dockerfile (RUN lines: %q): it must build what make image does", df.Runs)
	}
	// Time zones: the base has /usr/share/zoneinfo, the engine-less image
	// relies on the binary's embedded copy; check that it has one.
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-tags", makefileBuildTags(t), "./cmd/server")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/server: %v", err)
	}
	if !slices.Contains(strings.Fields(string(out)), "time/tzdata") {
		t.Errorf("the server does not import time/tzdata: the engine-less image, which lacks %s, would know no time zone but UTC", base.Zoneinfo)
	}
}

// makefileBuildTags returns the Makefile's BUILDTAGS.
func makefileBuildTags(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^BUILDTAGS[ \t]*:?=[ \t]*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no BUILDTAGS")
	}
	return strings.TrimSpace(string(m[1]))
}

// TestParseDockerfileCatchesDrift feeds the check's parser Dockerfiles that
// differ from the build in one way each, so the agreement test above can
// fail.
func TestParseDockerfileCatchesDrift(t *testing.T) {
	good, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]string{"VERSION": "v1", "REVISION": "r"}
	ref := parseDockerfile(t, string(good), args)
	for _, tc := range []struct {
		name, old, new string
		differs        func(s stage) bool
	}{
		{"user", "USER 65532:65532", "USER 0:0", func(s stage) bool { return s.User != ref.User }},
		{"entrypoint", `ENTRYPOINT ["/portcullis"]`, `ENTRYPOINT ["/bin/portcullis"]`, func(s stage) bool { return !slices.Equal(s.Entrypoint, ref.Entrypoint) }},
		{"cmd", `CMD ["serve"]`, `CMD ["serve", "--dev"]`, func(s stage) bool { return !slices.Equal(s.Cmd, ref.Cmd) }},
		{"port", "EXPOSE 8080 9090", "EXPOSE 8080", func(s stage) bool { return !slices.Equal(s.Expose, ref.Expose) }},
		{"label", `licenses="Apache-2.0"`, `licenses="MIT"`, func(s stage) bool { return !maps.Equal(s.Labels, ref.Labels) }},
		{"copy", "/out/portcullis /portcullis", "/out/portcullis /usr/bin/portcullis", func(s stage) bool { return !slices.EqualFunc(s.Copies, ref.Copies, slices.Equal) }},
		{"base", "static-debian12:nonroot", "static-debian12:latest", func(s stage) bool { return s.From != ref.From }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.old) {
				t.Fatalf("the Dockerfile has no %q", tc.old)
			}
			s := parseDockerfile(t, strings.Replace(string(good), tc.old, tc.new, 1), args)
			if !tc.differs(s) {
				t.Errorf("replacing %q by %q changed nothing the check compares", tc.old, tc.new)
			}
		})
	}
	if ref.Labels[labelVersion] != "v1" || ref.Labels[labelRevision] != "r" {
		t.Errorf("labels %v: the build arguments VERSION and REVISION are not substituted", ref.Labels)
	}
}
