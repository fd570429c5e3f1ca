#!/usr/bin/env bash
# install-redis.sh makes sure `redis-server` and `redis-cli` are on PATH:
# the Redis end-to-end tests (tasks, internal/limits/redisrate,
# internal/redisconn, internal/authserver, all behind the e2e build tag)
# start their own redis-server, one per test, on a free port of 127.0.0.1
# with persistence off, and stop it by its PID. The Redis Sentinel tests
# run `redis-server FILE --sentinel` (the same binary), and the Redis
# Cluster tests join their nodes with `redis-cli --cluster create`
# (Debian's redis-tools, which redis-server depends on).
#
# Usage: scripts/install-redis.sh
#
# When redis-server is already on PATH it only prints its version.
# Otherwise it installs Debian's package (apt-get install -y
# --no-install-recommends redis-server; 7.0 on Debian 12), which needs root;
# without root it fails with the command to run.
#
# Debian's package registers a redis-server service and its maintainer
# script tries to start it, listening on 127.0.0.1:6379. No test depends
# on that service, and none may: a test that passed only because a Redis
# happened to listen on 6379 would fail on a clean machine. So the script
# installs with a policy-rc.d that refuses service starts (exit 101, the
# Debian convention) when the machine has none, and removes it afterwards;
# on a machine with systemd running it also stops and disables the unit
# the package enabled. It then checks that nothing it started listens on
# 6379.
set -euo pipefail

# shellcheck source=lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"

# The oldest Redis the task store runs on: it uses SET … PXAT and
# PEXPIREAT … GT (7.0).
MIN_MAJOR=7
MIN_MINOR=0

die() { echo "install-redis: $*" >&2; exit 1; }

have() { command -v redis-server >/dev/null 2>&1; }

if ! have; then
	if [[ "$(id -u)" != 0 ]]; then
		die "redis-server not found on PATH and not running as root; install it with:
  sudo apt-get install -y --no-install-recommends redis-server
(then stop the service the package starts: sudo systemctl disable --now redis-server)
or put a redis-server (>= $MIN_MAJOR.$MIN_MINOR) from https://redis.io/downloads/ on PATH"
	fi
	command -v apt-get >/dev/null 2>&1 || die "redis-server not found on PATH and apt-get is not available: put a redis-server (>= $MIN_MAJOR.$MIN_MINOR) on PATH"

	apt_install_quietly install-redis redis-server redis-server || die "apt-get install redis-server failed"
	if [[ ! -d /run/systemd/system && -r /run/redis/redis-server.pid ]]; then
		# No systemd but the service started anyway (a policy-rc.d that
		# allowed it): stop the daemon the init script started.
		kill "$(cat /run/redis/redis-server.pid)" 2>/dev/null || true
	fi
	have || die "apt-get installed redis-server but it is still not on PATH"
fi
apt_plan_done

version="$(redis-server --version 2>&1 | sed -n 's/.* v=\([0-9][0-9.]*\).*/\1/p')"
[[ -n "$version" ]] || die "cannot read the version of $(command -v redis-server)"
IFS=. read -r major minor _ <<<"$version"
if ((major < MIN_MAJOR || (major == MIN_MAJOR && minor < MIN_MINOR))); then
	die "$(command -v redis-server) is $version, want >= $MIN_MAJOR.$MIN_MINOR"
fi

# The tests never use 6379; say so when something listens there, since a
# developer's own Redis there is fine but one the package left behind is not.
if command -v ss >/dev/null 2>&1 && ss -ltnH 'sport = :6379' 2>/dev/null | grep -q .; then
	echo "install-redis: note: something listens on port 6379; the tests do not use it (each starts its own redis-server on a free port)" >&2
fi

command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found on PATH (Debian's redis-tools package; the Cluster tests need it)"

cat <<EOF
redis-server: $(command -v redis-server) ($version)
redis-cli: $(command -v redis-cli)
EOF
