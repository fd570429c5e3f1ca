#!/usr/bin/env bash
# install-prometheus.sh makes sure `prometheus` and `promtool` are on PATH:
# the observability end-to-end tests run a real Prometheus that scrapes the
# binary, and `make obs-check` runs `promtool check rules` and
# `promtool test rules` on helm/portcullis/files/alerts.yaml.
#
# Usage: scripts/install-prometheus.sh
#
# When both are already on PATH it only prints their versions. Otherwise it
# installs Debian's package (apt-get install -y --no-install-recommends
# prometheus; 2.42 on Debian 12), which needs root; without root it fails
# with the command to run.
#
# Debian's package registers a prometheus service and its maintainer script
# tries to start it (listening on :9090, the binary's default metrics port).
# Nothing here depends on that service: the tests start their own Prometheus
# on a free port with a temporary storage folder. So that the install does
# not start it either, the script installs with a policy-rc.d that refuses
# service starts (exit 101, the Debian convention) when the machine has
# none, and removes it afterwards; on a machine with systemd running it also
# stops and disables the unit the package enabled.
set -euo pipefail

# shellcheck source=lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"

# The oldest Prometheus whose promtool reads our rules and tests.
MIN_MAJOR=2
MIN_MINOR=42

die() { echo "install-prometheus: $*" >&2; exit 1; }

have() { command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; }

if ! have; then
	if [[ "$(id -u)" != 0 ]]; then
		die "prometheus/promtool not found on PATH and not running as root; install them with:
  sudo apt-get install -y --no-install-recommends prometheus
or put prometheus and promtool (>= $MIN_MAJOR.$MIN_MINOR) from https://prometheus.io/download/ on PATH"
	fi
	command -v apt-get >/dev/null 2>&1 || die "prometheus/promtool not found on PATH and apt-get is not available: put prometheus and promtool (>= $MIN_MAJOR.$MIN_MINOR) on PATH"

	apt_install_quietly install-prometheus prometheus prometheus || die "apt-get install prometheus failed"
	have || die "apt-get installed prometheus but prometheus/promtool are still not on PATH"
fi
apt_plan_done

version="$(prometheus --version 2>&1 | sed -n 's/^prometheus, version \([0-9][0-9.]*\).*/\1/p')"
[[ -n "$version" ]] || die "cannot read the version of $(command -v prometheus)"
IFS=. read -r major minor _ <<<"$version"
if ((major < MIN_MAJOR || (major == MIN_MAJOR && minor < MIN_MINOR))); then
	die "$(command -v prometheus) is $version, want >= $MIN_MAJOR.$MIN_MINOR"
fi
promtool --version >/dev/null 2>&1 || die "$(command -v promtool) does not run"

cat <<EOF
prometheus: $(command -v prometheus) ($version)
promtool:   $(command -v promtool)
EOF
