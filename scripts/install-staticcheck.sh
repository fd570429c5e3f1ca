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
# staticcheck refuses, or misreads, code for a newer Go. It is idempotent:
# <folder>/staticcheck.stamp records the pin, and a second run with the
# same pin only checks that the binary is there. Only the Go module proxy
# is needed.
set -euo pipefail

STATICCHECK_MODULE="honnef.co/go/tools/cmd/staticcheck"
STATICCHECK_VERSION="v0.8.2"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${PORTCULLIS_BIN:-$repo_root/.cache/bin}"
go_cmd="${GO:-go}"
staticcheck="$bin_dir/staticcheck"
stamp="$staticcheck.stamp"
want_stamp="$STATICCHECK_MODULE@$STATICCHECK_VERSION"

die() { echo "install-staticcheck: $*" >&2; exit 1; }

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" && -x "$staticcheck" ]]; then
	echo "staticcheck: $staticcheck ($STATICCHECK_VERSION, up to date)"
	exit 0
fi

command -v "$go_cmd" >/dev/null 2>&1 || die "$go_cmd not found: install Go (https://go.dev/dl/)"
mkdir -p "$bin_dir"
# GOFLAGS is cleared: the repository's own flags (e.g. -mod) are not for
# installing a tool.
GOBIN="$bin_dir" GOFLAGS= "$go_cmd" install "$want_stamp" || die "go install $want_stamp failed"
[[ -x "$staticcheck" ]] || die "go install did not produce $staticcheck"
echo "$want_stamp" >"$stamp"
echo "staticcheck: $staticcheck ($STATICCHECK_VERSION, installed)"
