#!/usr/bin/env bash
# install-debian-tools.sh installs the test tools that come from Debian
# packages in one apt-get: whatever install-prometheus.sh,
# install-redis.sh, install-rsyslog.sh, install-haproxy.sh,
# install-chromium.sh, install-image-tools.sh and install-valgrind.sh would
# each install (Prometheus, redis-server, rsyslog, haproxy, Chromium,
# podman, runc, qemu-user-static, patch, ca-certificates, valgrind), so
# that the package lists are read, the package database loaded and the
# triggers run once, not once per script. Then it runs each script, which
# finds its tool, checks it and prints its version.
#
# Usage: scripts/install-debian-tools.sh   (as root when a package is missing)
#
# Each script is first run with PORTCULLIS_APT_PLAN set (scripts/lib/
# apt-install.sh): it says what it would install, and installs nothing.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/apt-install.sh
source "$repo_root/scripts/lib/apt-install.sh"

scripts=(install-prometheus install-redis install-rsyslog install-haproxy install-chromium install-image-tools install-valgrind)

plan="$(mktemp)"
trap 'rm -f "$plan"' EXIT
for s in "${scripts[@]}"; do
	PORTCULLIS_APT_PLAN="$plan" bash "$repo_root/scripts/$s.sh"
done

packages=() services=()
while IFS='|' read -r p s; do
	read -r -a ps <<<"$p"
	read -r -a ss <<<"$s"
	packages+=("${ps[@]}")
	services+=("${ss[@]}")
done <"$plan"
if ((${#packages[@]})); then
	apt_install_quietly install-debian-tools "${packages[*]}" "${services[*]}" ||
		{ echo "install-debian-tools: apt-get install ${packages[*]} failed" >&2; exit 1; }
fi

for s in "${scripts[@]}"; do
	bash "$repo_root/scripts/$s.sh"
done
