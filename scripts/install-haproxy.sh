#!/usr/bin/env bash
# install-haproxy.sh makes sure `haproxy` is on PATH: the replica
# end-to-end tests (e2e/replicas_test.go) put a real load balancer in front
# of several portcullis processes, as a Kubernetes Service or an ingress
# does: round robin, no affinity, health checks on /readyz. Each test runs
# its own haproxy process with its own configuration file on free ports of
# 127.0.0.1 and stops it by its PID; none uses the system service.
#
# Usage: scripts/install-haproxy.sh
#
# When haproxy is already on PATH it only prints its version. Otherwise it
# installs Debian's package (2.6 on Debian 12), which needs root, without
# leaving the service the package registers running.
set -euo pipefail

# shellcheck source=lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"

die() { echo "install-haproxy: $*" >&2; exit 1; }

# Debian installs it in /usr/sbin, which a non-root PATH may lack.
have() { command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]]; }

if ! have; then
	[[ "$(id -u)" == 0 ]] || die "haproxy not found and not running as root; install it with:
  sudo apt-get install -y --no-install-recommends haproxy"
	command -v apt-get >/dev/null 2>&1 || die "haproxy not found on PATH and apt-get is not available: put an haproxy (2.4 or later) on PATH"
	apt_install_quietly install-haproxy haproxy haproxy || die "apt-get install haproxy failed"
	if [[ ! -d /run/systemd/system && -r /run/haproxy.pid ]]; then
		kill "$(cat /run/haproxy.pid)" 2>/dev/null || true
	fi
	have || die "apt-get installed haproxy but it is not there"
fi
apt_plan_done

bin="$(command -v haproxy || echo /usr/sbin/haproxy)"
echo "haproxy: $bin ($("$bin" -v | sed -n 1p))"
