# apt-install.sh is sourced by the install-*.sh scripts that take a tool
# from a Debian package whose maintainer script would start a service.
#
# apt_install_quietly NAME PACKAGE SERVICE installs PACKAGE with apt-get
# (needs root; the caller checks) without leaving SERVICE running: it
# installs with a policy-rc.d that refuses service starts (exit 101, the
# Debian convention) when the machine has none, and removes it afterwards;
# on a machine with systemd running it also stops and disables the unit the
# package enabled. A failed install is retried once after apt-get update.
# NAME prefixes its messages on stderr.

apt_install_quietly() {
	local name=$1 package=$2 service=$3
	local policy=/usr/sbin/policy-rc.d added_policy=false
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\n# Added by portcullis scripts/%s.sh for the duration of one install.\nexit 101\n' "$name" >"$policy"
		chmod 0755 "$policy"
		added_policy=true
	fi
	echo "$name: apt-get install -y --no-install-recommends $package" >&2
	local ok=true
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$package" >&2; then
		echo "$name: install failed; running apt-get update and retrying once" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$package" >&2 || ok=false
	fi
	if $added_policy; then rm -f "$policy"; fi
	$ok || return 1
	if [[ -d /run/systemd/system ]]; then
		systemctl disable --now "$service.service" >/dev/null 2>&1 || true
	fi
}
