package docscheck

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis"
)

const (
	root          = "../.."
	referencePath = root + "/docs/configuration.md"
)

// TestConfigReferenceKeys checks that the committed reference lists
// exactly the keys, with their variables, that `portcullis check-config
// --keys` prints: the command line runs in process, through the same
// function the binary calls.
func TestConfigReferenceKeys(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := portcullis.Run(context.Background(), []string{"check-config", "--keys"},
		portcullis.Environ([]string{}), portcullis.Streams(nil, &stdout, &stderr))
	if err != nil {
		t.Fatalf("check-config --keys: %v\n%s", err, stderr.String())
	}
	printed := parseKeys(t, stdout.String())
	if len(printed) < 50 {
		t.Fatalf("check-config --keys printed %d keys, want dozens:\n%s", len(printed), stdout.String())
	}
	md, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range compareKeys(printed, referenceKeys(md)) {
		t.Errorf("%s: %s", referencePath, p)
	}
}

// parseKeys reads the output of check-config --keys: a key path, then its
// environment variable unless the key is set only in the file.
func parseKeys(t *testing.T, out string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch len(f) {
		case 1:
			keys[f[0]] = ""
		case 2:
			keys[f[0]] = f[1]
		default:
			t.Fatalf("check-config --keys: cannot read line %q", sc.Text())
		}
	}
	return keys
}

// refRow is a row of a table of the reference.
type refRow struct {
	key, typ, env string
}

var rowRE = regexp.MustCompile("^\\| `([^`]+)` \\|([^|]*)\\|([^|]*)\\|")

// referenceKeys returns the rows of the reference's tables.
func referenceKeys(md []byte) []refRow {
	var rows []refRow
	for line := range strings.Lines(string(md)) {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows = append(rows, refRow{key: m[1], typ: strings.TrimSpace(m[2]), env: strings.Trim(strings.TrimSpace(m[3]), "`")})
	}
	return rows
}

// compareKeys returns what differs between the keys check-config prints
// (path → variable, empty for a key set only in the file) and the rows of
// the reference. A row of type section, and a row inside a list
// ("upstreams[].name"), is not a key check-config prints; a list row must
// sit under a key it does print.
func compareKeys(printed map[string]string, rows []refRow) []string {
	var problems []string
	seen := map[string]bool{}
	for _, r := range rows {
		switch {
		case r.typ == "section":
			continue
		case strings.Contains(r.key, "[]"):
			list, _, _ := strings.Cut(r.key, "[]")
			if _, ok := printed[list]; !ok {
				problems = append(problems, fmt.Sprintf("%s: its list %s is not a key check-config --keys prints", r.key, list))
			}
			continue
		}
		if seen[r.key] {
			problems = append(problems, fmt.Sprintf("%s is listed twice", r.key))
		}
		seen[r.key] = true
		env, ok := printed[r.key]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is not a key check-config --keys prints", r.key))
			continue
		}
		if want := env; want != "" && r.env != want || want == "" && r.env != "(file only)" {
			problems = append(problems, fmt.Sprintf("%s: variable %q, check-config --keys prints %q", r.key, r.env, env))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(printed)) {
		if !seen[k] {
			problems = append(problems, fmt.Sprintf("%s (printed by check-config --keys) is missing", k))
		}
	}
	return problems
}

// TestCompareKeys shows that compareKeys finds a missing key, an extra
// key, a wrong variable and a list row under an unknown list.
func TestCompareKeys(t *testing.T) {
	printed := map[string]string{"a.b": "P_A_B", "a.c": "P_A_C", "l": ""}
	md := "| key | type | environment variable | description |\n|---|---|---|---|\n" +
		"| `a` | section | | A. |\n" +
		"| `a.b` | string | `P_A_B` | ok |\n" +
		"| `a.x` | string | `P_A_X` | not printed |\n" +
		"| `l` | list of objects | (file only) | ok |\n" +
		"| `l[].n` | string | | ok |\n" +
		"| `m[].n` | string | | no list m |\n" +
		"| `a.b` | string | `P_A_Y` | twice, wrong variable |\n"
	got := compareKeys(printed, referenceKeys([]byte(md)))
	want := []string{
		"a.x is not a key check-config --keys prints",
		"m[].n: its list m is not a key check-config --keys prints",
		"a.b is listed twice",
		`a.b: variable "P_A_Y", check-config --keys prints "P_A_B"`,
		"a.c (printed by check-config --keys) is missing",
	}
	if !slices.Equal(got, want) {
		t.Errorf("compareKeys:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// docFiles returns the Markdown files whose links are checked: those at
// the root of the repository and in docs/.
func docFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// pending are pages other work in progress writes, which the docs link
// to already: a link to one of them is not reported while it is missing.
// Once a page exists, TestDocLinks fails until it leaves this list.
var pending = map[string]string{}

// TestDocLinks checks every relative link of README.md, the other
// Markdown files at the root and docs/*.md.
func TestDocLinks(t *testing.T) {
	for page := range pending {
		if _, err := os.Stat(filepath.Join(root, page)); err == nil {
			t.Errorf("%s exists now: remove it from pending", page)
		}
	}
	files := docFiles(t, root)
	if !slices.Contains(files, filepath.Join(root, "README.md")) || len(files) < 5 {
		t.Fatalf("found only %v: are the docs still where the test looks?", files)
	}
	links := 0
	for _, f := range files {
		n, problems := checkLinks(f, pending)
		links += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	if links < 20 {
		t.Errorf("checked %d relative links, want more: does the link pattern still match?", links)
	}
}

// TestCheckLinks shows that checkLinks finds a missing file, a missing
// heading in another file and in the same one, and leaves alone external
// links and links inside code.
func TestCheckLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/other.md", "# Other page\n\n## Checking a deployment: `portcullis doctor`\n\n## Twice\n\n## Twice\n\n<a id=\"custom\"></a>\n")
	write("src/main.go", "package main\n")
	write("README.md", "# Title\n\n## Start here\n\n"+
		"[ok](docs/other.md) [ok](docs/other.md#checking-a-deployment-portcullis-doctor) [ok](docs/other.md#twice-1)\n"+
		"[ok](docs/other.md#custom) [ok](src/main.go) [ok](src/) [ok](#start-here) [ok](https://example.com/x.md)\n"+
		"[ok][ref] `[not a link](nowhere.md)` [ok, pending](docs/soon.md)\n\n"+
		"```md\n[not a link](nowhere.md)\n```\n\n"+
		"[missing](docs/gone.md) [bad anchor](docs/other.md#nope) [bad local](#nope) [missing ref][bad]\n\n"+
		"[ref]: docs/other.md \"Other\"\n[bad]: ../outside.md\n")
	n, problems := checkLinks(filepath.Join(dir, "README.md"), map[string]string{"docs/soon.md": "a page on its way"})
	if n != 13 {
		t.Errorf("checked %d links, want 13", n)
	}
	want := []string{
		"README.md:13: docs/gone.md: no such file",
		"README.md:13: docs/other.md#nope: no heading or anchor nope in docs/other.md",
		"README.md:13: #nope: no heading or anchor nope in README.md",
		"README.md:16: ../outside.md: outside the repository",
	}
	var got []string
	for _, p := range problems {
		got = append(got, strings.TrimPrefix(p, dir+string(filepath.Separator)))
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

var (
	fenceRE    = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	inlineRE   = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	anchorRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// checkLinks checks the relative links of the Markdown file at path,
// outside code blocks and code spans, and returns how many it checked and
// what is wrong, by line. The repository is the folder that holds go.mod
// above path; a link may not leave it. A link to a missing file that
// pending names (by its path in the repository) is not reported.
func checkLinks(path string, pending map[string]string) (int, []string) {
	md, err := os.ReadFile(path)
	if err != nil {
		return 0, []string{err.Error()}
	}
	repo := repoRoot(path)
	var (
		n        int
		problems []string
		inFence  bool
	)
	for i, line := range strings.Split(string(md), "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		var targets []string
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		} else {
			for _, m := range inlineRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
				targets = append(targets, m[1])
			}
		}
		for _, target := range targets {
			if schemeRE.MatchString(target) {
				continue // http:, https:, mailto:: not this test's business
			}
			n++
			if p := checkLink(path, repo, target, pending); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", path, i+1, target, p))
			}
		}
	}
	return n, problems
}

// checkLink returns what is wrong with the relative link target of the
// Markdown file at from, or "".
func checkLink(from, repo, target string, pending map[string]string) string {
	file, frag, _ := strings.Cut(target, "#")
	dest := from
	if file != "" {
		dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(file))
		abs, err := filepath.Abs(dest)
		if err != nil {
			return err.Error()
		}
		rel, err := filepath.Rel(repo, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "outside the repository"
		}
		if _, err := os.Stat(dest); err != nil {
			if _, ok := pending[filepath.ToSlash(rel)]; ok {
				return ""
			}
			return "no such file"
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	md, err := os.ReadFile(dest)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors(md), frag) {
		name, _ := filepath.Rel(filepath.Dir(from), dest)
		return fmt.Sprintf("no heading or anchor %s in %s", frag, filepath.ToSlash(name))
	}
	return ""
}

// anchors returns the fragments a Markdown file offers, as GitHub makes
// them: each heading's slug (lower case, punctuation dropped, spaces as
// hyphens, "-1", "-2" on repeats) and each <a id> or <a name>.
func anchors(md []byte) []string {
	var out []string
	count := map[string]int{}
	inFence := false
	for line := range strings.Lines(string(md)) {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range anchorRE.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		s := slug(strings.TrimSpace(text))
		if c := count[s]; c > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, c))
		} else {
			out = append(out, s)
		}
		count[s]++
	}
	return out
}

// slug is GitHub's anchor for a heading's text.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool {
	return strings.ToUpper(string(r)) != strings.ToLower(string(r))
}

// repoRoot returns the folder above path that holds go.mod, or path's
// folder when none does.
func repoRoot(path string) string {
	dir, _ := filepath.Abs(filepath.Dir(path))
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}
