package portcullis

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/portcullis-mcp/portcullis/observability"
)

// Set by the linker: -ldflags "-X github.com/portcullis-mcp/portcullis.version=…"
// and the same for revision (see the Makefile's LDFLAGS), sdkPatches to
// the names of the patches/go-sdk patches the binary was built with and
// fositePatches to those of patches/fosite (make build,
// scripts/sdk-patch.sh).
var (
	version       = "dev"
	revision      = ""
	sdkPatches    = ""
	fositePatches = ""
)

func versionString() string {
	deps := "go-sdk " + depVersion("github.com/modelcontextprotocol/go-sdk")
	if sdkPatches != "" {
		deps += " patched: " + sdkPatches
	}
	if fositePatches != "" {
		deps += ", fosite " + depVersion("github.com/ory/fosite") + " patched: " + fositePatches
	}
	return fmt.Sprintf("portcullis %s (revision %s, %s, %s)", version, revisionString(), runtime.Version(), deps)
}

// buildInfo is what portcullis_build_info says of this build: its
// version and revision, and the patches of the SDK and of fosite it was
// built with.
func buildInfo() observability.BuildInfo {
	return observability.BuildInfo{Version: version, Revision: revisionString(), SDKPatches: sdkPatches, FositePatches: fositePatches}
}

// depVersion is the version of the module path in the build info.
func depVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

// revisionString is the VCS revision: stamped by the linker, else read from
// the build info, else "unknown".
func revisionString() string {
	rev := revision
	if rev == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					rev = s.Value
				}
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return rev
}
