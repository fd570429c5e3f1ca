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
# (see scripts/lib/go-install.sh). A failed install is a failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${PORTCULLIS_BIN:-$root/.cache/bin}"
# shellcheck source=lib/go-install.sh
. "$root/scripts/lib/go-install.sh"

go_install_pinned "$bin" cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod v1.10.0
go_install_pinned "$bin" actionlint github.com/rhysd/actionlint github.com/rhysd/actionlint/cmd/actionlint v1.7.12
