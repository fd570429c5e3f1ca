#!/usr/bin/env bash
# install-valgrind.sh makes sure `valgrind` is on PATH: the call budget
# (make budget, budget_test.go) counts the instructions one call costs the
# server under valgrind's callgrind tool, a count that the machine's load
# does not move.
#
# Usage: scripts/install-valgrind.sh
#
# When valgrind is already on PATH it only prints its version. Otherwise
# it installs Debian's package (3.19 on Debian 12), which needs root; the
# package registers no service. scripts/install-debian-tools.sh installs
# it with the other Debian packages, in one apt-get.
set -euo pipefail

# shellcheck source=lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"

die() { echo "install-valgrind: $*" >&2; exit 1; }

have() { command -v valgrind >/dev/null 2>&1; }

if ! have; then
	[[ "$(id -u)" == 0 ]] || die "valgrind not found on PATH and not running as root; install it with:
  sudo apt-get install -y --no-install-recommends valgrind"
	command -v apt-get >/dev/null 2>&1 || die "valgrind not found on PATH and apt-get is not available: put a valgrind (3.16 or later) on PATH"
	apt_install_quietly install-valgrind valgrind "" || die "apt-get install valgrind failed"
	have || die "apt-get installed valgrind but it is not on PATH"
fi
apt_plan_done

echo "valgrind: $(command -v valgrind) ($(valgrind --version))"
