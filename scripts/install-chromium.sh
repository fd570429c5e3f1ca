#!/usr/bin/env bash
# install-chromium.sh makes sure a headless-capable Chromium is on PATH: the
# end-to-end tests of the authorization server's consent page
# (e2e/authserver_browser_test.go) drive a real browser through it over the
# DevTools protocol (approve, deny, a cross-site POST, framing, no
# JavaScript).
#
# Usage: scripts/install-chromium.sh
#
# When `chromium` is already on PATH it only checks that it starts and
# prints its version. Otherwise it installs Debian's package (apt-get
# install -y --no-install-recommends chromium), which needs root; without
# root it fails with the command to run. A browser that is still missing or
# does not start afterwards is a failure, never a skip.
#
# The tests run it as `chromium --headless=new --no-sandbox --disable-gpu`
# (root has no user namespace sandbox here); PORTCULLIS_CHROMIUM names
# another binary.
set -euo pipefail

# shellcheck source=lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"

# The oldest Chromium whose headless mode (--headless=new) the tests use.
MIN_MAJOR=112

die() { echo "install-chromium: $*" >&2; exit 1; }

have() { command -v chromium >/dev/null 2>&1; }

if ! have; then
	if [[ "$(id -u)" != 0 ]]; then
		die "chromium not found on PATH and not running as root; install it with:
  sudo apt-get install -y --no-install-recommends chromium"
	fi
	command -v apt-get >/dev/null 2>&1 || die "chromium not found on PATH and apt-get is not available: put a Chromium (>= $MIN_MAJOR) named chromium on PATH"
	# The package has no service; apt_install_quietly is for its retry.
	apt_install_quietly install-chromium chromium chromium || die "apt-get install chromium failed"
	have || die "apt-get installed chromium but it is still not on PATH"
fi
apt_plan_done

version="$(chromium --version 2>/dev/null | sed -n 's/^Chromium \([0-9][0-9.]*\).*/\1/p')"
[[ -n "$version" ]] || die "cannot read the version of $(command -v chromium) (does it start? try chromium --version)"
major="${version%%.*}"
((major >= MIN_MAJOR)) || die "$(command -v chromium) is $version, want >= $MIN_MAJOR"
# A page it can render headless, or it is of no use to the tests.
out="$(timeout 60 chromium --headless=new --no-sandbox --disable-gpu --dump-dom 'data:text/html,<p>ok-chromium</p>' 2>/dev/null)" ||
	die "chromium --headless=new --dump-dom does not run"
[[ "$out" == *ok-chromium* ]] || die "chromium --headless=new --dump-dom printed no page: $out"

cat <<EOF2
chromium: $(command -v chromium) ($version)
EOF2
