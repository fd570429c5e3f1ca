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
# golang.org/x/exp has no tags, so the pin is a pseudo-version. It is
# idempotent: <folder>/apidiff.stamp records the pin, and a second run with
# the same pin only checks that the binary is there. Only the Go module
# proxy is needed.
set -euo pipefail

APIDIFF_MODULE="golang.org/x/exp/cmd/apidiff"
APIDIFF_VERSION="v0.0.0-20261014143641-f0251eb4aa3e"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${PORTCULLIS_BIN:-$repo_root/.cache/bin}"
go_cmd="${GO:-go}"
apidiff="$bin_dir/apidiff"
stamp="$apidiff.stamp"
want_stamp="$APIDIFF_MODULE@$APIDIFF_VERSION"

die() { echo "install-apidiff: $*" >&2; exit 1; }

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" && -x "$apidiff" ]]; then
	echo "apidiff: $apidiff ($APIDIFF_VERSION, up to date)"
	exit 0
fi

command -v "$go_cmd" >/dev/null 2>&1 || die "$go_cmd not found: install Go (https://go.dev/dl/)"
mkdir -p "$bin_dir"
# GOFLAGS is cleared: the repository's own flags (e.g. -mod) are not for
# installing a tool.
GOBIN="$bin_dir" GOFLAGS= "$go_cmd" install "$want_stamp" || die "go install $want_stamp failed"
[[ -x "$apidiff" ]] || die "go install did not produce $apidiff"
echo "$want_stamp" >"$stamp"
echo "apidiff: $apidiff ($APIDIFF_VERSION, installed)"
