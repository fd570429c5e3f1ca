package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReleaseBuildPrunesUnusedMethods links the server as `make build`
// does and fails if the linker finds a reachable function that looks
// methods up by a name it computes (reflect's Method or MethodByName with a
// non-constant name, as text/template does). One such function makes the
// linker keep every exported method of every type that is converted to an
// interface, used or not: with golang.org/x/net/trace (gRPC's tracing, and
// its html/template) linked, the binary had 9 MB more code and data and
// 1.8 MiB more idle RSS, most of it the Redis client's hundreds of
// commands. The Makefile's BUILDTAGS (grpcnotrace) keeps it out.
func TestReleaseBuildPrunesUnusedMethods(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^BUILDTAGS[ \t]*:?=[ \t]*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no BUILDTAGS")
	}
	tags := strings.TrimSpace(string(m[1]))
	for _, target := range []string{"build", "build-stock"} {
		recipe := regexp.MustCompile(`(?m)^` + target + `:.*\n((?:\t.*\n)+)`).FindSubmatch(mk)
		if recipe == nil || !strings.Contains(string(recipe[1]), "-tags '$(BUILDTAGS)'") {
			t.Errorf("the Makefile's %s target does not build with -tags '$(BUILDTAGS)'", target)
		}
	}

	cmd := exec.Command("go", "build", "-tags", tags, "-trimpath", "-ldflags=-dumpdep", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// -dumpdep prints one "from -> to" edge a line, marking a function
	// that looks methods up by name with <ReflectMethod>.
	var found, other []string
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.Contains(l, "<ReflectMethod>"):
			from, _, _ := strings.Cut(l, " -> ")
			if strings.Contains(from, "<ReflectMethod>") && len(found) < 10 && !slices.Contains(found, from) {
				found = append(found, from)
			}
		case !strings.Contains(l, " -> ") && len(other) < 20:
			other = append(other, l)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go build -tags %q -ldflags=-dumpdep: %v\n%s", tags, err, strings.Join(other, "\n"))
	}
	if len(found) > 0 {
		t.Errorf("the release build (-tags %q) reaches a function that looks methods up by name, so the linker keeps every exported method:\n%s",
			tags, strings.Join(found, "\n"))
	}
}
