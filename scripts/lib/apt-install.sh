# apt-install.sh is sourced by the install-*.sh scripts that take a tool
# from a Debian package whose maintainer script would start a service.
#
# apt_install_quietly NAME PACKAGES SERVICES installs PACKAGES (one or
# more, separated by spaces) with one apt-get (needs root; the caller
# checks) without leaving any of SERVICES running: it installs with a
# policy-rc.d that refuses service starts (exit 101, the Debian
# convention) when the machine has none, and removes it afterwards; on a
# machine with systemd running it also stops and disables the units the
# packages enabled. A failed install is retried once after apt-get update.
# NAME prefixes its messages on stderr.
#
# With PORTCULLIS_APT_PLAN set to a file, it installs nothing: it appends
# "PACKAGES|SERVICES" to that file and ends the calling script with
# success, so that scripts/install-debian-tools.sh can learn what every
# install script would install and install it all in one apt-get.

apt_install_quietly() {
	local name=$1 packages=$2 services=$3
	if [[ -n "${PORTCULLIS_APT_PLAN:-}" ]]; then
		echo "$packages|$services" >>"$PORTCULLIS_APT_PLAN"
		exit 0
	fi
	local policy=/usr/sbin/policy-rc.d added_policy=false
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\n# Added by portcullis scripts/%s.sh for the duration of one install.\nexit 101\n' "$name" >"$policy"
		chmod 0755 "$policy"
		added_policy=true
	fi
	local -a list
	read -r -a list <<<"$packages"
	echo "$name: apt-get install -y --no-install-recommends ${list[*]}" >&2
	local ok=true
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${list[@]}" >&2; then
		echo "$name: install failed; running apt-get update and retrying once" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${list[@]}" >&2 || ok=false
	fi
	if $added_policy; then rm -f "$policy"; fi
	$ok || return 1
	if [[ -d /run/systemd/system ]]; then
		local service
		for service in $services; do
			systemctl disable --now "$service.service" >/dev/null 2>&1 || true
		done
	fi
}

# apt_plan_done ends the calling script with success when
# PORTCULLIS_APT_PLAN is set: its tool is there, and the checks that
# follow are for the run that installs.
apt_plan_done() {
	[[ -z "${PORTCULLIS_APT_PLAN:-}" ]] || exit 0
}
