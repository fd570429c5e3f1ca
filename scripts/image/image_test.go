package main

import (
	"archive/tar"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testOptions returns Options for two platforms whose binaries are small
// files made in the test, with this machine's CA bundle when it has one
// and a one-certificate bundle otherwise.
func testOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Options{
		Platforms: []Platform{
			{OS: "linux", Arch: "amd64", Binary: write("amd64", "\x7fELF amd64 binary")},
			{OS: "linux", Arch: "arm64", Variant: "v8", Binary: write("arm64", "\x7fELF arm64 binary")},
		},
		Version:  "v1.2.3",
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Source:   "https://github.com/portcullis-mcp/portcullis",
		Created:  time.Unix(1795628997, 0),
		CACerts:  write("ca.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
	}
}

// entry is one file of a layer.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Data     string
}

// layerEntries lists the files of layer l, in order.
func layerEntries(t *testing.T, l v1.Layer) []entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var out []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{Name: "/" + strings.TrimSuffix(h.Name, "/"), Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, ModTime: h.ModTime, Data: string(data)})
	}
}

// platformImages returns the images of idx by "os/arch[/variant]".
func platformImages(t *testing.T, idx v1.ImageIndex) map[string]v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.String()] = img
	}
	return out
}

func digest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestBuildIsReproducible(t *testing.T) {
	o := testOptions(t)
	a, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, a) != digest(t, b) {
		t.Errorf("two builds of the same inputs: %s and %s", digest(t, a), digest(t, b))
	}
	// Each input changes the digest (the test above could not fail if the
	// digest ignored them).
	for _, tc := range []struct {
		name   string
		change func(*Options)
	}{
		{name: "time", change: func(o *Options) { o.Created = o.Created.Add(time.Second) }},
		{name: "revision", change: func(o *Options) { o.Revision = "fedcba9876543210fedcba9876543210fedcba98" }},
		{name: "binary", change: func(o *Options) {
			p := filepath.Join(t.TempDir(), "other")
			if err := os.WriteFile(p, []byte("\x7fELF other"), 0o644); err != nil {
				t.Fatal(err)
			}
			o.Platforms = slices.Clone(o.Platforms)
			o.Platforms[1].Binary = p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := o
			tc.change(&c)
			idx, err := Build(c)
			if err != nil {
				t.Fatal(err)
			}
			if digest(t, idx) == digest(t, a) {
				t.Errorf("changing the %s left the digest %s", tc.name, digest(t, a))
			}
		})
	}
}

func TestBuildContent(t *testing.T) {
	o := testOptions(t)
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", mt, types.OCIImageIndex)
	}
	images := platformImages(t, idx)
	if got := slices.Sorted(maps.Keys(images)); !slices.Equal(got, []string{"linux/amd64", "linux/arm64/v8"}) {
		t.Fatalf("platforms %q, want linux/amd64 and linux/arm64/v8", got)
	}
	var baseDigests []v1.Hash
	for platform, img := range images {
		t.Run(platform, func(t *testing.T) {
			if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
				t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS+"/"+cf.Architecture+strings.TrimSuffix("/"+cf.Variant, "/") != platform {
				t.Errorf("config platform %s/%s/%s under index platform %s", cf.OS, cf.Architecture, cf.Variant, platform)
			}
			if !cf.Created.Time.Equal(o.Created) {
				t.Errorf("created %v, want %v", cf.Created.Time, o.Created)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 2 {
				t.Fatalf("%d layers (%v), want 2: the base and the binary", len(layers), err)
			}
			d, _ := layers[0].Digest()
			baseDigests = append(baseDigests, d)
			var all []entry
			for _, l := range layers {
				all = append(all, layerEntries(t, l)...)
			}
			for _, e := range all {
				if !e.ModTime.Equal(o.Created) {
					t.Errorf("%s: time %v, want %v", e.Name, e.ModTime, o.Created)
				}
				if base := filepath.Base(e.Name); base == "sh" || base == "bash" || base == "busybox" || strings.HasPrefix(e.Name, "/bin") {
					t.Errorf("the image holds %s: it must have no shell", e.Name)
				}
			}
			bin := layerEntries(t, layers[1])
			wantBin := strings.TrimSuffix(strings.TrimPrefix(platform, "linux/"), "/v8") // amd64, arm64
			if len(bin) != 1 || bin[0].Name != binaryPath || bin[0].Mode != 0o755 || bin[0].UID != 0 || !strings.Contains(bin[0].Data, wantBin) {
				t.Errorf("binary layer %+v, want only %s (0755, root) holding the %s binary", bin, binaryPath, wantBin)
			}
			passwd := findEntry(t, all, "/etc/passwd")
			if !strings.Contains(passwd.Data, "\nnonroot:x:65532:65532:") || strings.Contains(passwd.Data, "/bin/sh") {
				t.Errorf("/etc/passwd:\n%s\nwant nonroot as 65532:65532 and no login shell", passwd.Data)
			}
			if home := findEntry(t, all, nonrootHome); home.UID != nonroot || home.GID != nonroot {
				t.Errorf("%s owned by %d:%d, want %d:%d", nonrootHome, home.UID, home.GID, nonroot, nonroot)
			}
			if tmp := findEntry(t, all, "/tmp"); tmp.Mode != 0o1777 {
				t.Errorf("/tmp mode %o, want 1777", tmp.Mode)
			}
			if ca := findEntry(t, all, caFile); !strings.Contains(ca.Data, "BEGIN CERTIFICATE") {
				t.Errorf("%s holds no certificate", caFile)
			}
		})
	}
	if len(baseDigests) == 2 && baseDigests[0] != baseDigests[1] {
		t.Errorf("the platforms' base layers differ (%s, %s): they must be one shared layer", baseDigests[0], baseDigests[1])
	}
}

// TestWriteLayout checks the folder `make image` writes: an OCI layout
// whose one index is the built one, named by -ref, and an archive that is
// byte for byte the same on a second run.
func TestWriteLayout(t *testing.T) {
	idx, err := Build(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	out1, out2 := t.TempDir(), t.TempDir()
	d1, err := write(idx, out1, "ghcr.io/portcullis-mcp/portcullis:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := write(idx, out2, "ghcr.io/portcullis-mcp/portcullis:v1.2.3"); err != nil {
		t.Fatal(err)
	}
	a1, _ := os.ReadFile(filepath.Join(out1, "portcullis.oci.tar"))
	a2, _ := os.ReadFile(filepath.Join(out2, "portcullis.oci.tar"))
	if len(a1) == 0 || string(a1) != string(a2) {
		t.Errorf("two archives of one image differ (%d and %d bytes)", len(a1), len(a2))
	}
	if got, _ := os.ReadFile(filepath.Join(out1, "digest")); strings.TrimSpace(string(got)) != d1.String() {
		t.Errorf("digest file %q, want %s", got, d1)
	}
	p, err := layout.FromPath(filepath.Join(out1, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != d1 || m.Manifests[0].Annotations[refName] != "ghcr.io/portcullis-mcp/portcullis:v1.2.3" {
		t.Errorf("layout index %+v, want the one index %s named by -ref", m.Manifests, d1)
	}
}

func TestRunRefusesMissingInputs(t *testing.T) {
	var stderr strings.Builder
	err := run(t.Context(), []string{"-out", t.TempDir()}, func(string) string { return "" }, io.Discard, &stderr)
	if err == nil {
		t.Fatal("run with no binary, version, revision or time: no error")
	}
	for _, want := range []string{"no platform", "no version", "no revision", "no creation time"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func findEntry(t *testing.T, entries []entry, name string) entry {
	t.Helper()
	i := slices.IndexFunc(entries, func(e entry) bool { return e.Name == name })
	if i < 0 {
		t.Fatalf("the image has no %s", name)
	}
	return entries[i]
}
