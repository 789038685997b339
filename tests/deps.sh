#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages named in the given lists that are missing.
# Quiet when everything is there. The Makefile runs it before it reads the
# rules that need the packages (see "Packages" in the Makefile):
#   sh tests/deps.sh tests/deps/build.list                        make, make demo
#   sh tests/deps.sh tests/deps/build.list tests/deps/test.list   make test, bench, fuzz
# A list has one package a line, '#' comments, and optionally a command after
# the package that stands for it when found (node from elsewhere than Debian).
# apt-get's output goes to build/deps.log; its tail is shown when it fails.
set -u
[ $# -gt 0 ] || { echo "usage: sh tests/deps.sh LIST..." >&2; exit 2; }

missing=""
for list in "$@"; do
	[ -r "$list" ] || { echo "deps: cannot read $list" >&2; exit 1; }
	while read -r pkg cmd _; do
		case $pkg in '' | '#'*) continue ;; esac
		if [ -n "$cmd" ] && command -v "$cmd" >/dev/null 2>&1; then
			continue
		fi
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" ||
			missing="$missing $pkg"
	done <"$list"
done
[ -z "$missing" ] && exit 0

SUDO=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		{ echo "deps: need root or sudo to install:$missing" >&2; exit 1; }
	SUDO="sudo"
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/build"
log=$root/build/deps.log
apt="$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"
start=$(date +%s)
echo "deps: installing$missing"
# shellcheck disable=SC2086
if ! { $apt update -q && $apt install -y -q --no-install-recommends $missing; } \
    >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	echo "deps: apt-get failed, see $log" >&2
	exit 1
fi
echo "deps: installed in $(($(date +%s) - start))s (log: $log)"
