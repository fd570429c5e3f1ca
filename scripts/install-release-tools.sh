#!/usr/bin/env bash
# install-release-tools.sh installs the supply-chain tools, pinned, into
# .cache/bin (built from the Go module proxy; nothing else is downloaded):
#
#   .cache/bin/cyclonedx-gomod  github.com/CycloneDX/cyclonedx-gomod v1.10.0
#                               (make sbom: the CycloneDX SBOM of the binaries)
#   .cache/bin/actionlint       github.com/rhysd/actionlint v1.7.12
#                               (make actionlint: the GitHub Actions workflows)
#
# Each is skipped when the binary there was built from the pinned version
# (read from the build info Go stamps into it), so a second run takes well
# under a second. A failed install is a failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${PORTCULLIS_BIN:-$root/.cache/bin}"
go_cmd="${GO:-go}"
mkdir -p "$bin"

CYCLONEDX_GOMOD_VERSION=v1.10.0
ACTIONLINT_VERSION=v1.7.12

die() { echo "install-release-tools: $*" >&2; exit 1; }

# install NAME MODULE PACKAGE VERSION
install() {
	local name=$1 module=$2 pkg=$3 version=$4
	if [[ -x "$bin/$name" ]] && "$go_cmd" version -m "$bin/$name" 2>/dev/null |
		grep -qE "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|$)"; then
		echo "$name $version: installed"
		return
	fi
	echo "$name $version: building"
	# GOFLAGS is cleared: the repository's own flags are not for a tool.
	GOBIN="$bin" GOFLAGS= "$go_cmd" install "$pkg@$version" || die "go install $pkg@$version failed"
	[[ -x "$bin/$name" ]] || die "go install did not produce $bin/$name"
}

install cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod "$CYCLONEDX_GOMOD_VERSION"
install actionlint github.com/rhysd/actionlint github.com/rhysd/actionlint/cmd/actionlint "$ACTIONLINT_VERSION"
