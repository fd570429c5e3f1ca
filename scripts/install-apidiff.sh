#!/usr/bin/env bash
# install-apidiff.sh installs apidiff (golang.org/x/exp/cmd/apidiff), which
# `make api-check` uses to compare the public API against api/base.
#
# Usage: scripts/install-apidiff.sh
#
# Environment:
#   PORTCULLIS_BIN  install folder (default: <repo>/.cache/bin)
#   GO              go command to use (default: go on PATH)
#
# golang.org/x/exp has no tags, so the pin is a pseudo-version. A second run
# with the same pin only checks the binary (see scripts/lib/go-install.sh).
# Only the Go module proxy is needed.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/go-install.sh
. "$repo_root/scripts/lib/go-install.sh"

go_install_pinned "${PORTCULLIS_BIN:-$repo_root/.cache/bin}" apidiff \
	golang.org/x/exp golang.org/x/exp/cmd/apidiff v0.0.0-20261014143641-f0251eb4aa3e
