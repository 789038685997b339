#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make test-fresh: the README's two commands on a fresh Debian 12, as a new
# user runs them. A debootstrapped minbase bookworm with git, make and
# ca-certificates only (bootstrapped once, kept as a tarball in build/fresh,
# unpacked anew each run), a git clone of this checkout's committed HEAD in
# it, then, in a chroot, as root, with a clean environment:
#     cd /root/tokentap && make demo
#     cd /root/tokentap && make test
# The root gets the host's CA bundle, /etc/npmrc and Debian apt sources (the
# same archives the host reaches), /etc/resolv.conf and a stock /etc/hosts;
# proc, sys, dev, dev/pts and a tmpfs on dev/shm (Chromium needs it) are
# mounted, and unmounted on exit whatever happened.
# Prints each command's exit status and duration and the test count, and
# "fresh-tests: N passed, N failed" (the root's make test line) for .ci/run;
# ends with "fresh: PASS" (the root removed, the logs kept) or "fresh: FAIL"
# (the root kept), and exits non-zero when either command fails.
# A network failure of debootstrap may be retried once; a command that
# fails inside the root is not.
#   sh tests/fresh/run.sh            (make test-fresh; needs root)
#   REBUILD_BASE=1 sh tests/fresh/run.sh   bootstrap the base again
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$ROOT/build/fresh
BASE=$WORK/bookworm-minbase.tar.gz
RFS=$WORK/root
SRC=/root/tokentap
MIRROR=http://deb.debian.org/debian
CHROOT_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=${TERM:-dumb}"

log() { echo "fresh: $*"; }
fail() {
	log "$*" >&2
	echo "fresh: FAIL"
	exit 1
}
now() { date +%s; }

# The mount points under $RFS, deepest first.
mounts_under() {
	awk -v r="$RFS" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}

# Everything left running inside the root (a test's stray daemon) keeps its
# mounts busy: end those processes, by pid, then unmount.
teardown() {
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$RFS" ] && kill -KILL "${p#/proc/}" 2>/dev/null
	done
	for m in $(mounts_under); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m" >&2
	done
}

# A root from an earlier run: unmounted first, then removed without crossing
# into any file system mounted under it.
remove_root() {
	teardown
	[ -z "$(mounts_under)" ] || fail "still mounted under $RFS: $(mounts_under | tr '\n' ' ')"
	rm -rf --one-file-system "$RFS"
}

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, mount, chroot)"
start=$(now)
mkdir -p "$WORK" || fail "mkdir $WORK"

missing=
for c in debootstrap:debootstrap git:git; do
	command -v "${c%%:*}" >/dev/null 2>&1 || missing="$missing ${c#*:}"
done
if [ -n "$missing" ]; then
	log "installing$missing on the host"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; } \
	    >"$WORK/host-apt.log" 2>&1 ||
		{ tail -n 20 "$WORK/host-apt.log"; fail "apt-get install$missing failed"; }
fi

# 1. the base system, once: debootstrap --variant=minbase, plus git, make
# and ca-certificates, as a tarball
if [ -n "${REBUILD_BASE:-}" ] || [ ! -s "$BASE" ]; then
	boot=$WORK/bootstrap
	t=$(now)
	for try in 1 2; do
		rm -rf --one-file-system "$boot"
		log "debootstrap --variant=minbase bookworm (try $try)"
		if debootstrap --variant=minbase --include=git,make,ca-certificates bookworm \
		    "$boot" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
			break
		fi
		tail -n 5 "$WORK/debootstrap.log"
		[ $try = 2 ] && fail "debootstrap failed twice, see $WORK/debootstrap.log"
		sleep 10
	done
	rm -rf "$boot"/var/cache/apt/archives/*.deb "$boot"/var/lib/apt/lists/*
	tar -C "$boot" -czf "$BASE.tmp" . && mv "$BASE.tmp" "$BASE" || fail "tar of the base failed"
	rm -rf --one-file-system "$boot"
	log "base bootstrapped ($(($(now) - t)) s, $(du -h "$BASE" | cut -f1))"
fi

# 2. a new root from it
remove_root
trap teardown EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$RFS" && tar -C "$RFS" -xzf "$BASE" || fail "unpacking $BASE failed"

# the archives the host reaches: its Debian sources only (a nodesource or
# other third-party source would defeat the point), its CA bundle (the
# archives may sit behind a proxy with its own CA) and npm's config
rm -f "$RFS/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	grep -Eq '^[^#]*(debian\.org|/debian(-security)?/?( |$))' "$f" || continue
	grep -Eq '^[^#]*(nodesource|packages\.cloud\.google)' "$f" && continue
	mkdir -p "$RFS$(dirname "$f")" && cp "$f" "$RFS$f" || fail "copy $f"
done
[ -n "$(find "$RFS/etc/apt" -name 'sources.list' -o -name '*.list' -o -name '*.sources')" ] ||
	fail "no Debian apt source found on the host to copy"
cp /etc/ssl/certs/ca-certificates.crt "$RFS/etc/ssl/certs/ca-certificates.crt" ||
	fail "no /etc/ssl/certs/ca-certificates.crt on the host"
[ -f /etc/npmrc ] && { cp /etc/npmrc "$RFS/etc/npmrc" || fail "copy /etc/npmrc"; }
cp /etc/resolv.conf "$RFS/etc/resolv.conf" || fail "copy /etc/resolv.conf"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$RFS/etc/hosts"

# the repository as a user's clone: the committed HEAD, the user's umask
rev=$(git -C "$ROOT" rev-parse HEAD) || fail "$ROOT is not a git checkout"
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no | wc -l)
[ "$dirty" -gt 0 ] && log "note: $dirty uncommitted changes in $ROOT are not tested"
(umask 022 && git clone -q --no-hardlinks "$ROOT" "$RFS$SRC" &&
    git -C "$RFS$SRC" checkout -q --detach "$rev") || fail "git clone failed"
log "cloned $(git -C "$RFS$SRC" log -1 --format='%h %s' | cut -c1-70)"

mount -t proc proc "$RFS/proc" &&
    mount --rbind /sys "$RFS/sys" && mount --make-rslave "$RFS/sys" &&
    mount --bind /dev "$RFS/dev" &&
    mount --bind /dev/pts "$RFS/dev/pts" &&
    mount -t tmpfs -o mode=1777,nosuid,nodev shm "$RFS/dev/shm" || fail "mounting failed"

# 3. the two commands, each once
status=0
summary=
run_in_root() {
	name=$1
	out=$WORK/$2.log
	t=$(now)
	# shellcheck disable=SC2086
	chroot "$RFS" /usr/bin/env -i $CHROOT_ENV sh -c "cd $SRC && $name" </dev/null >"$out" 2>&1
	rc=$?
	secs=$(($(now) - t))
	installed=$(sed -n 's/^deps: installing//p' "$out" | tr '\n' ' ')
	log "$name: exit $rc, $secs s${installed:+; installed:$installed}"
	summary="$summary
fresh:   $name: exit $rc, $secs s"
	[ $rc -eq 0 ] || status=1
	return $rc
}

log "make demo (log: $WORK/demo.log)"
run_in_root "make demo" demo
sed 's/^/  | /' "$WORK/demo.log"

log "make test (log: $WORK/test.log)"
run_in_root "make test" test
grep -E '^(FAIL|deps:|# )' "$WORK/test.log" | sed 's/^/  | /'
count=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/test.log" | tail -n 1)
if [ -z "$count" ]; then
	tail -n 30 "$WORK/test.log" | sed 's/^/  | /'
	log "make test printed no 'N passed, N failed' line"
	status=1
	count="0 passed, 1 failed"
fi
log "make test: $count"
# the count .ci/run adds up: the root's own tests, plus one per command
echo "fresh-tests: $count"

log "took $(($(now) - start)) s:$summary"
if [ $status -ne 0 ]; then
	log "the root stays in $RFS for a look (chroot $RFS), until the next run"
	echo "fresh: FAIL"
	exit 1
fi
remove_root
echo "fresh: PASS"
