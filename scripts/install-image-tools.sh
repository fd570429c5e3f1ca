#!/usr/bin/env bash
# install-image-tools.sh makes sure what `make image` and the image
# end-to-end tests (e2e/image_test.go) use is on this machine:
#
#   podman, runc           run the image with no Docker engine (podman's
#                          default runtime, crun, does not run here: the
#                          tests pass --runtime runc)
#   qemu-aarch64-static    run the linux/arm64 binary (qemu-user-static)
#   patch                  apply patches/ (scripts/sdk-patch.sh)
#   /etc/ssl/certs/ca-certificates.crt
#                          the CA bundle the image carries (ca-certificates)
#
# Usage: scripts/install-image-tools.sh
#
# Each is Debian's package (apt-get install -y --no-install-recommends),
# which needs root; without root the script fails with the command to run.
# A tool that is still missing afterwards is a failure, never a skip.
# podman's package pulls in services it does not start here (no systemd);
# apt_install_quietly keeps any from starting during the install.
set -euo pipefail

# shellcheck source=lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"

die() { echo "install-image-tools: $*" >&2; exit 1; }

# "what package": a command on PATH or a file, and the package giving it
wanted=(
	"podman podman"
	"runc runc"
	"qemu-aarch64-static qemu-user-static"
	"patch patch"
	"/etc/ssl/certs/ca-certificates.crt ca-certificates"
)

present() {
	if [[ "$1" == /* ]]; then [[ -s "$1" ]]; else command -v "$1" >/dev/null 2>&1; fi
}

missing=()
for w in "${wanted[@]}"; do
	read -r what package <<<"$w"
	present "$what" || missing+=("$package")
done

if ((${#missing[@]})); then
	if [[ "$(id -u)" != 0 ]]; then
		die "missing ${missing[*]} and not running as root; install them with:
  sudo apt-get install -y --no-install-recommends ${missing[*]}"
	fi
	command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and apt-get is not available"
	apt_install_quietly install-image-tools "${missing[*]}" "${missing[*]}" || die "apt-get install ${missing[*]} failed"
fi
apt_plan_done

for w in "${wanted[@]}"; do
	read -r what package <<<"$w"
	present "$what" || die "$what is still missing after installing $package"
done

echo "podman: $(podman --version)"
echo "runc: $(runc --version | sed -n 1p)"
echo "qemu-aarch64-static: $(qemu-aarch64-static --version | sed -n 1p)"
echo "patch: $(patch --version | sed -n 1p)"
echo "ca-certificates: $(grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt) certificates"
