package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is, in one place: the Dockerfile's final stage describes
// the same (dockerfile_test.go checks it).
const (
	// binaryPath is where the server binary is, and the entrypoint.
	binaryPath = "/portcullis"
	// nonroot is the user and group the image runs as: distroless's
	// "nonroot", which the chart's securityContext names by number.
	nonroot     = 65532
	nonrootName = "nonroot"
	nonrootHome = "/home/nonroot"
	// caFile is where Go's crypto/x509 looks first on Linux.
	caFile = "/etc/ssl/certs/ca-certificates.crt"

	labelSource   = "org.opencontainers.image.source"
	labelRevision = "org.opencontainers.image.revision"
	labelVersion  = "org.opencontainers.image.version"
	labelLicenses = "org.opencontainers.image.licenses"
	labelTitle    = "org.opencontainers.image.title"
)

// entrypoint, cmd, user, exposed ports and env of the image's config.
var (
	entrypoint   = []string{binaryPath}
	cmd          = []string{"serve"}
	user         = fmt.Sprintf("%d:%d", nonroot, nonroot)
	exposedPorts = []string{"8080/tcp", "9090/tcp"}
	env          = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=" + caFile,
	}
)

// Platform is one architecture of the image and the binary built for it.
type Platform struct {
	OS, Arch, Variant string
	Binary            string // path of the static binary on this machine
}

// Options describes the image to build. Every field is required.
type Options struct {
	Platforms []Platform
	// Version, Revision and Source become the OCI labels of the same names.
	Version, Revision, Source string
	// Created is every timestamp in the image: the config's, the history's
	// and every file's (SOURCE_DATE_EPOCH, the commit's time).
	Created time.Time
	// CACerts is the CA bundle copied to /etc/ssl/certs/ca-certificates.crt.
	CACerts string
}

// Labels returns the image's OCI labels.
func (o Options) Labels() map[string]string {
	return map[string]string{
		labelSource:   o.Source,
		labelRevision: o.Revision,
		labelVersion:  o.Version,
		labelLicenses: "Apache-2.0",
		labelTitle:    "portcullis",
	}
}

func (o Options) validate() error {
	var problems []string
	if len(o.Platforms) == 0 {
		problems = append(problems, "no platform (-binary OS/ARCH=PATH)")
	}
	for name, v := range map[string]string{"version": o.Version, "revision": o.Revision, "source": o.Source, "CA bundle": o.CACerts} {
		if v == "" {
			problems = append(problems, "no "+name)
		}
	}
	if o.Created.IsZero() {
		problems = append(problems, "no creation time (SOURCE_DATE_EPOCH)")
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("image: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Build returns the image index: one image per platform, each a shared
// base layer (users, CA certificates, /tmp, the home folder)
// under a layer holding only the binary. The same inputs give the same
// bytes, so the same digest.
func Build(o Options) (v1.ImageIndex, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	base, err := baseLayer(o)
	if err != nil {
		return nil, err
	}
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range o.Platforms {
		img, err := platformImage(o, p, base)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: p.OS, Architecture: p.Arch, Variant: p.Variant},
			},
		})
	}
	return idx, nil
}

func platformImage(o Options, p Platform, base v1.Layer) (v1.Image, error) {
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: %s/%s binary: %w", p.OS, p.Arch, err)
	}
	t := newLayerTar(o.Created)
	t.file(binaryPath, 0o755, 0, bin)
	binLayer, err := t.layer()
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: o.Created.UTC()}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "portcullis scripts/image: users, CA certificates", Comment: "like gcr.io/distroless/static-debian12:nonroot",
		}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "portcullis scripts/image: COPY portcullis " + binaryPath,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Arch, p.Variant
	cf.Created = created
	cf.Author = ""
	cf.Config = v1.Config{
		User:         user,
		Entrypoint:   entrypoint,
		Cmd:          cmd,
		Env:          env,
		WorkingDir:   nonrootHome,
		Labels:       o.Labels(),
		ExposedPorts: map[string]struct{}{},
	}
	for _, port := range exposedPorts {
		cf.Config.ExposedPorts[port] = struct{}{}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// baseLayer is what distroless static's nonroot variant gives the
// Dockerfile, less its /usr/share/zoneinfo: /etc/passwd and /etc/group
// with root and nonroot, an nsswitch.conf, the CA bundle, /tmp and
// nonroot's home folder. No shell, no package manager, nothing else.
//
// Time zones come from the binary: internal/toolsets imports time/tzdata (the
// time tool must know every IANA zone), and Go falls back to that copy when
// /usr/share/zoneinfo is absent. Copying this machine's tzdata as well
// would duplicate it and tie the digest to the build machine's tzdata
// package, which Debian updates several times a year.
func baseLayer(o Options) (v1.Layer, error) {
	t := newLayerTar(o.Created)
	t.dir("/etc", 0o755, 0)
	t.file("/etc/passwd", 0o644, 0, []byte(fmt.Sprintf(
		"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", nonrootName, nonroot, nonroot, nonrootName, nonrootHome)))
	t.file("/etc/group", 0o644, 0, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", nonrootName, nonroot)))
	t.file("/etc/nsswitch.conf", 0o644, 0, []byte("hosts: files dns\n"))
	t.dir("/etc/ssl", 0o755, 0)
	t.dir("/etc/ssl/certs", 0o755, 0)
	ca, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: CA bundle: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("image: CA bundle %s holds no PEM certificate", o.CACerts)
	}
	t.file(caFile, 0o644, 0, ca)
	t.dir("/home", 0o755, 0)
	t.dir(nonrootHome, 0o700, nonroot)
	t.dir("/tmp", 0o777|fs.ModeSticky, 0)
	return t.layer()
}

// layerTar writes a layer's tar with fixed metadata: every entry owned by
// root (or nonroot where asked), timestamped at mtime, no user or group
// names, in the order written (callers write parents first and trees in
// lexical order).
type layerTar struct {
	mtime time.Time
	buf   bytes.Buffer
	tw    *tar.Writer
	err   error
}

func newLayerTar(mtime time.Time) *layerTar {
	t := &layerTar{mtime: mtime.UTC()}
	t.tw = tar.NewWriter(&t.buf)
	return t
}

func (t *layerTar) header(h *tar.Header) {
	if t.err != nil {
		return
	}
	h.Name = strings.TrimPrefix(h.Name, "/")
	h.ModTime = t.mtime
	h.Format = tar.FormatPAX
	t.err = t.tw.WriteHeader(h)
}

func (t *layerTar) dir(name string, mode fs.FileMode, owner int) {
	perm := int64(mode.Perm())
	if mode&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	t.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: perm, Uid: owner, Gid: owner})
}

func (t *layerTar) file(name string, mode fs.FileMode, owner int, data []byte) {
	t.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(mode.Perm()), Uid: owner, Gid: owner, Size: int64(len(data))})
	if t.err == nil {
		_, t.err = t.tw.Write(data)
	}
}

// layer closes the tar and returns it as an OCI layer (gzip, whose header
// carries no time or name, so the bytes depend on the content only).
func (t *layerTar) layer() (v1.Layer, error) {
	if t.err == nil {
		t.err = t.tw.Close()
	}
	if t.err != nil {
		return nil, fmt.Errorf("image: layer: %w", t.err)
	}
	data := t.buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return l, nil
}
