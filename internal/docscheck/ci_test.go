package docscheck

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The GitHub Actions workflows cannot run on the project's machines;
// `make actionlint` checks their syntax and expressions, and the tests
// here check what actionlint does not: every action is pinned by commit,
// and Dependabot watches every manifest the build reads.

const (
	workflowsDir   = root + "/.github/workflows"
	dependabotPath = root + "/.github/dependabot.yml"
)

// pinnedUses is an action or reusable workflow pinned by a full commit
// SHA, with the tag it was taken from in a comment.
var pinnedUses = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)

// unpinnedActions returns, for one workflow file's YAML, every `uses:`
// that names an action by a tag or branch rather than a full commit SHA,
// or that lacks the comment saying which version the SHA is.
func unpinnedActions(name string, src []byte) ([]string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var problems []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "uses" && v.Kind == yaml.ScalarNode {
					problems = append(problems, checkUses(name, v)...)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return problems, nil
}

func checkUses(file string, v *yaml.Node) []string {
	uses := v.Value
	switch {
	case strings.HasPrefix(uses, "./"):
		return nil // an action of this repository, at the same commit
	case strings.HasPrefix(uses, "docker://"):
		if !strings.Contains(uses, "@sha256:") {
			return []string{fmt.Sprintf("%s:%d: %s: pin the image by digest", file, v.Line, uses)}
		}
		return nil
	case !pinnedUses.MatchString(uses):
		return []string{fmt.Sprintf("%s:%d: %s: pin the action by its full commit SHA", file, v.Line, uses)}
	case !strings.HasPrefix(strings.TrimSpace(v.LineComment), "# v"):
		return []string{fmt.Sprintf("%s:%d: %s: say which version the SHA is in a comment (# vX.Y.Z)", file, v.Line, uses)}
	}
	return nil
}

// TestWorkflowActionsPinned checks every workflow in .github/workflows.
func TestWorkflowActionsPinned(t *testing.T) {
	files, err := filepath.Glob(workflowsDir + "/*.y*ml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d workflows in %s, want ci and release at least", len(files), workflowsDir)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		problems, err := unpinnedActions(filepath.Base(f), src)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
}

func TestUnpinnedActions(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want int
	}{
		{name: "pinned with version", yaml: "jobs:\n  a:\n    steps:\n      - uses: actions/checkout@d23441a48e516b6c34aea4fa41551a30e30af803 # v6.1.0\n"},
		{name: "local action", yaml: "jobs:\n  a:\n    steps:\n      - uses: ./.github/actions/x\n"},
		{name: "tag", yaml: "jobs:\n  a:\n    steps:\n      - uses: actions/checkout@v4\n", want: 1},
		{name: "branch", yaml: "jobs:\n  a:\n    steps:\n      - uses: actions/checkout@main # v4\n", want: 1},
		{name: "short SHA", yaml: "jobs:\n  a:\n    steps:\n      - uses: actions/checkout@d23441a # v6\n", want: 1},
		{name: "SHA without version comment", yaml: "jobs:\n  a:\n    steps:\n      - uses: actions/checkout@d23441a48e516b6c34aea4fa41551a30e30af803\n", want: 1},
		{name: "reusable workflow by tag", yaml: "jobs:\n  a:\n    uses: org/repo/.github/workflows/x.yml@v1\n", want: 1},
		{name: "image by tag", yaml: "jobs:\n  a:\n    steps:\n      - uses: docker://alpine:3\n", want: 1},
		{name: "two steps, one bad", yaml: "jobs:\n  a:\n    steps:\n      - uses: actions/checkout@d23441a48e516b6c34aea4fa41551a30e30af803 # v6.1.0\n      - uses: actions/setup-go@v5\n", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := unpinnedActions("w.yml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Errorf("problems %q, want %d", got, tt.want)
			}
		})
	}
}

// dependabotConfig is the part of .github/dependabot.yml the check reads.
type dependabotConfig struct {
	Version int `yaml:"version"`
	Updates []struct {
		Ecosystem   string   `yaml:"package-ecosystem"`
		Directory   string   `yaml:"directory"`
		Directories []string `yaml:"directories"`
		Schedule    struct {
			Interval string `yaml:"interval"`
		} `yaml:"schedule"`
	} `yaml:"updates"`
}

// manifestEcosystems maps the file a Dependabot ecosystem reads to the
// ecosystem.
var manifestEcosystems = map[string]string{
	"go.mod":            "gomod",
	"package-lock.json": "npm",
}

// dependabotProblems returns every manifest among paths (repository
// paths) that no update of the config watches, every watched folder
// without its manifest, and a config without GitHub Actions updates while
// workflows exist.
func dependabotProblems(src []byte, paths []string) ([]string, error) {
	var cfg dependabotConfig
	if err := yaml.Unmarshal(src, &cfg); err != nil {
		return nil, fmt.Errorf("dependabot.yml: %w", err)
	}
	var problems []string
	if cfg.Version != 2 {
		problems = append(problems, fmt.Sprintf("version %d, want 2", cfg.Version))
	}
	watched := map[string]bool{} // ecosystem + " " + folder
	for i, u := range cfg.Updates {
		if u.Schedule.Interval == "" {
			problems = append(problems, fmt.Sprintf("updates[%d] (%s): no schedule.interval", i, u.Ecosystem))
		}
		dirs := u.Directories
		if u.Directory != "" {
			dirs = append(dirs, u.Directory)
		}
		for _, d := range dirs {
			watched[u.Ecosystem+" "+path.Clean(d)] = true
		}
	}
	want := map[string]bool{}
	workflows := false
	for _, p := range paths {
		if strings.HasPrefix(p, ".github/workflows/") {
			workflows = true
		}
		if eco, ok := manifestEcosystems[path.Base(p)]; ok {
			want[eco+" "+path.Clean("/"+path.Dir(p))] = true
		}
	}
	if workflows {
		want["github-actions /"] = true
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !watched[k] {
			eco, dir, _ := strings.Cut(k, " ")
			problems = append(problems, fmt.Sprintf("%s in %s is not watched: add it to the %s update", eco, dir, eco))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(watched)) {
		if !want[k] {
			eco, dir, _ := strings.Cut(k, " ")
			problems = append(problems, fmt.Sprintf("%s update names %s, which holds no manifest", eco, dir))
		}
	}
	return problems, nil
}

// TestDependabotWatchesEveryManifest checks .github/dependabot.yml
// against the manifests the repository tracks.
func TestDependabotWatchesEveryManifest(t *testing.T) {
	src, err := os.ReadFile(dependabotPath)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range trackedFiles(t, root) {
		paths = append(paths, f.path)
	}
	problems, err := dependabotProblems(src, paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestDependabotProblems(t *testing.T) {
	const cfg = `version: 2
updates:
  - package-ecosystem: gomod
    directories: [/, /tools]
    schedule: {interval: weekly}
  - package-ecosystem: github-actions
    directory: /
    schedule: {interval: weekly}
`
	tests := []struct {
		name  string
		cfg   string
		paths []string
		want  []string // substrings, one per problem
	}{
		{name: "all watched", cfg: cfg, paths: []string{"go.mod", "tools/go.mod", ".github/workflows/ci.yml"}},
		{name: "new module", cfg: cfg, paths: []string{"go.mod", "tools/go.mod", "examples/x/go.mod", ".github/workflows/ci.yml"},
			want: []string{"gomod in /examples/x is not watched"}},
		{name: "npm lockfile", cfg: cfg, paths: []string{"go.mod", "tools/go.mod", "e2e/idp/package-lock.json", ".github/workflows/ci.yml"},
			want: []string{"npm in /e2e/idp is not watched"}},
		{name: "stale folder", cfg: cfg, paths: []string{"go.mod", ".github/workflows/ci.yml"},
			want: []string{"gomod update names /tools"}},
		{name: "actions unwatched", cfg: "version: 2\nupdates:\n  - package-ecosystem: gomod\n    directory: /\n    schedule: {interval: weekly}\n",
			paths: []string{"go.mod", ".github/workflows/ci.yml"}, want: []string{"github-actions in / is not watched"}},
		{name: "no schedule, version 1", cfg: "version: 1\nupdates:\n  - package-ecosystem: gomod\n    directory: /\n",
			paths: []string{"go.mod"}, want: []string{"version 1", "no schedule"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dependabotProblems([]byte(tt.cfg), tt.paths)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
