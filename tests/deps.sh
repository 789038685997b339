#!/bin/sh
# Installs the Debian packages the build and the tests need, when missing.
# Quiet when everything is there, so `make` stays fast.
pkgs="gcc make pkg-config libevent-dev libssl-dev libyaml-dev node-llhttp libjsmn-dev
      libcmocka-dev curl python3 nginx-light prometheus prometheus-alertmanager openssl
      valgrind strace iproute2 clang libclang-rt-14-dev logrotate mandoc systemd man-db groff-base chromium"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# node and npm may come from elsewhere than Debian (nodesource): check the commands.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null || exit 1
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null || exit 1
