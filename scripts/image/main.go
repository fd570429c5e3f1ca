// Command image builds the Portcullis container image without a container
// engine and without pulling a base image: the static binaries `make build`
// makes, one per platform, on a layer holding what distroless static's
// nonroot variant holds (users root and nonroot, CA certificates; time
// zones are embedded in the binary), as one multi-platform OCI image index.
//
// It writes an OCI image layout folder (for `crane push`, `skopeo copy`
// or `podman load` through the archive) and the same layout as one tar
// archive, an oci-archive, and prints the index's digest. The same inputs
// give the same digest: every timestamp is -created (SOURCE_DATE_EPOCH,
// the commit's time in `make image`), files have fixed owners and modes,
// and entries are written in a fixed order.
//
//	go run . -binary linux/amd64=../../bin/image/linux-amd64/portcullis \
//	  -binary linux/arm64=../../bin/image/linux-arm64/portcullis \
//	  -version v1.2.3 -revision $(git rev-parse HEAD) -out ../../bin/image
//
// It lives in its own module (like bench/peers) so that
// go-containerregistry and its dependencies stay out of the go.mod that
// library users of Portcullis inherit.
//
// docs/image.md says how to run the result with podman.
package main

import (
	"archive/tar"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// refName is the annotation that names an image in an OCI layout's index.
const refName = "org.opencontainers.image.ref.name"

func run(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("image", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var binaries []string
	fset.Func("binary", "`OS/ARCH[/VARIANT]=PATH` of a static portcullis binary (repeat per platform)", func(s string) error {
		binaries = append(binaries, s)
		return nil
	})
	version := fset.String("version", "", "the image version label (git describe)")
	revision := fset.String("revision", "", "the image revision label (the commit)")
	source := fset.String("source", "https://github.com/portcullis-mcp/portcullis", "the image source label")
	created := fset.String("created", getenv("SOURCE_DATE_EPOCH"), "every timestamp in the image, in `seconds` since 1970 (default $SOURCE_DATE_EPOCH)")
	ca := fset.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to copy (Debian's ca-certificates)")
	ref := fset.String("ref", "", "the name to record for the index in the layout (e.g. ghcr.io/portcullis-mcp/portcullis:v1.2.3)")
	out := fset.String("out", "", "`folder` to write: oci/ (an OCI image layout), portcullis.oci.tar (the same as an oci-archive) and digest")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("image: -out is required")
	}
	o := Options{Version: *version, Revision: *revision, Source: *source, CACerts: *ca}
	if *created != "" {
		secs, err := strconv.ParseInt(*created, 10, 64)
		if err != nil {
			return fmt.Errorf("image: -created %q: %w", *created, err)
		}
		o.Created = time.Unix(secs, 0).UTC()
	}
	for _, b := range binaries {
		p, err := parsePlatform(b)
		if err != nil {
			return err
		}
		o.Platforms = append(o.Platforms, p)
	}
	idx, err := Build(o)
	if err != nil {
		return err
	}
	digest, err := write(idx, *out, *ref)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, digest)
	return nil
}

// parsePlatform parses OS/ARCH[/VARIANT]=PATH. linux/arm64 gets the
// variant v8, as registries and runtimes expect.
func parsePlatform(s string) (Platform, error) {
	spec, bin, ok := strings.Cut(s, "=")
	parts := strings.Split(spec, "/")
	if !ok || bin == "" || len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Platform{}, fmt.Errorf("image: -binary %q: want OS/ARCH[/VARIANT]=PATH", s)
	}
	p := Platform{OS: parts[0], Arch: parts[1], Binary: bin}
	if len(parts) == 3 {
		p.Variant = parts[2]
	} else if p.Arch == "arm64" {
		p.Variant = "v8"
	}
	return p, nil
}

// write writes idx as an OCI layout under out/oci, the same as a tar
// archive at out/portcullis.oci.tar, and its digest at out/digest, and
// returns the digest.
func write(idx v1.ImageIndex, out, ref string) (v1.Hash, error) {
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	dir := filepath.Join(out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{refName: ref}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	if err := tarDir(dir, filepath.Join(out, "portcullis.oci.tar")); err != nil {
		return v1.Hash{}, err
	}
	if err := os.WriteFile(filepath.Join(out, "digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	return digest, nil
}

// tarDir writes the files under dir to the tar archive dst, in lexical
// order, with fixed owners, modes and times, so the archive too is the
// same for the same image.
func tarDir(dir, dst string) (err error) {
	var paths []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	slices.Sort(paths)
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("image: %w", cerr)
		}
	}()
	tw := tar.NewWriter(f)
	for _, p := range paths {
		info, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("image: %w", err)
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case info.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return fmt.Errorf("image: %w", err)
			}
		case info.Mode().IsRegular():
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, info.Size()
			if err := tw.WriteHeader(h); err != nil {
				return fmt.Errorf("image: %w", err)
			}
			if err := copyFile(tw, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("image: %s: not a file or folder", p)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}
