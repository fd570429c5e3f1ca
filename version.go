package portcullis

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker: -ldflags "-X github.com/portcullis-mcp/portcullis.version=…"
// and the same for revision (see the Makefile's LDFLAGS), and sdkPatches
// to the names of the patches/go-sdk patches the binary was built with
// (make build, scripts/sdk-patch.sh).
var (
	version    = "dev"
	revision   = ""
	sdkPatches = ""
)

func versionString() string {
	sdk := "go-sdk " + sdkVersion()
	if sdkPatches != "" {
		sdk += " patched: " + sdkPatches
	}
	return fmt.Sprintf("portcullis %s (revision %s, %s, %s)", version, revisionString(), runtime.Version(), sdk)
}

// sdkVersion is the version of the MCP Go SDK in the build info.
func sdkVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/modelcontextprotocol/go-sdk" {
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
