#!/usr/bin/env bash
# install-rsyslog.sh makes sure `rsyslogd` is on PATH: the audit
# end-to-end test (e2e/audit_test.go) starts its own rsyslogd in the
# foreground (-n) with a configuration of its own, listening for RFC 5424
# over TCP on a free port of 127.0.0.1, and stops it by its PID.
#
# Usage: scripts/install-rsyslog.sh
#
# When rsyslogd is already on PATH (or in /usr/sbin) it only prints its
# version. Otherwise it installs Debian's package (apt-get install -y
# --no-install-recommends rsyslog), which needs root; without root it
# fails with the command to run. Debian's package registers an rsyslog
# service; the install leaves it stopped (scripts/lib/apt-install.sh), and
# no test depends on it.
set -euo pipefail

# shellcheck source=lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"

die() { echo "install-rsyslog: $*" >&2; exit 1; }

PATH="$PATH:/usr/sbin:/sbin"
have() { command -v rsyslogd >/dev/null 2>&1; }

if ! have; then
	if [[ "$(id -u)" != 0 ]]; then
		die "rsyslogd not found on PATH and not running as root; install it with:
  sudo apt-get install -y --no-install-recommends rsyslog
(then stop the service the package starts: sudo systemctl disable --now rsyslog)"
	fi
	command -v apt-get >/dev/null 2>&1 || die "rsyslogd not found and apt-get is not available: install rsyslog"
	apt_install_quietly install-rsyslog rsyslog rsyslog || die "apt-get install rsyslog failed"
	if [[ ! -d /run/systemd/system && -r /run/rsyslogd.pid ]]; then
		kill "$(cat /run/rsyslogd.pid)" 2>/dev/null || true
	fi
	have || die "apt-get installed rsyslog but rsyslogd is still not found"
fi
apt_plan_done

echo "rsyslogd: $(command -v rsyslogd) ($(rsyslogd -v 2>/dev/null | head -1))"
