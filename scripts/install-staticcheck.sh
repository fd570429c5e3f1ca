#!/usr/bin/env bash
# install-staticcheck.sh installs staticcheck (honnef.co/go/tools/cmd/staticcheck),
# which `make lint` runs over every package.
#
# Usage: scripts/install-staticcheck.sh
#
# Environment:
#   PORTCULLIS_BIN  install folder (default: <repo>/.cache/bin)
#   GO              go command to use (default: go on PATH)
#
# The pin is a release that understands the Go version in go.mod: an older
# staticcheck refuses, or misreads, code for a newer Go. A second run with
# the same pin only checks the binary (see scripts/lib/go-install.sh). Only
# the Go module proxy is needed.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/go-install.sh
. "$repo_root/scripts/lib/go-install.sh"

go_install_pinned "${PORTCULLIS_BIN:-$repo_root/.cache/bin}" staticcheck \
	honnef.co/go/tools honnef.co/go/tools/cmd/staticcheck v0.8.2
