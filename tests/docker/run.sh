#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds docker/Dockerfile with podman and checks the image, without a
# Docker engine or a registry (`podman run` cannot work in this sandbox):
#   1. a Debian bookworm base image, debootstrapped once and imported into
#      podman's store as localhost/debian:bookworm{,-slim};
#   2. podman build with chroot isolation (the build stage tagged too, so
#      that no untagged image is left behind);
#   3. `podman run` cannot work here, so the image's files are mounted and
#      run with chroot, as the image's user: -V, -t on the image's config,
#      then, in a network namespace of its own (the config listens on
#      0.0.0.0:8080 and :9464), tokentap-mock as the backend, a stream
#      through tokentap compared byte for byte with the backend's, the
#      access log on stdout, the HEALTHCHECK command, and a drain on SIGTERM.
# Prints "docker: PASS" or "docker: FAIL"; exits non-zero on failure.
#   sh tests/docker/run.sh            (make test-docker)
#   REBUILD_BASE=1 sh tests/docker/run.sh   bootstrap the base image again
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SELF=$ROOT/tests/docker/run.sh
IMAGE=localhost/tokentap:test
BUILD_IMAGE=localhost/tokentap:build
BASE=localhost/debian
MIRROR=http://deb.debian.org/debian
WORK=$ROOT/build/docker
UID_IMAGE=10001

log() { echo "docker: $*"; }
fail() {
	log "$*" >&2
	echo "docker: FAIL"
	exit 1
}

# ---- inside the network namespace ------------------------------------------
# $1: the mounted image root. Everything here runs on this namespace's
# loopback only; each child is stopped by its own pid.
inner() {
	dir=$1
	out=$WORK/run
	mock_pid= tt_pid=
	rm -rf "$out" && mkdir -p "$out" || return 1
	stop_children() {
		for p in $tt_pid $mock_pid; do
			kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
		done
	}
	trap stop_children EXIT
	ip link set lo up || { echo "cannot bring up lo"; return 1; }

	# simple commands, not a function: $! must be the program's own pid
	chroot --userspec=$UID_IMAGE:$UID_IMAGE "$dir" /usr/bin/tokentap-mock \
	    -l 127.0.0.1:8000 --ttft 20ms --tpot 2ms >"$out/mock.out" 2>"$out/mock.err" &
	mock_pid=$!
	TOKENTAP_UPSTREAM=http://127.0.0.1:8000 chroot --userspec=$UID_IMAGE:$UID_IMAGE "$dir" \
	    /usr/bin/tokentap -c /etc/tokentap/tokentap.yaml \
	    >"$out/access.jsonl" 2>"$out/tokentap.err" &
	tt_pid=$!
	# a bare connect: a request to :8080 would be one more access-log line
	if ! python3 - <<-'EOF'; then
	import socket, sys, time
	for port in (8000, 8080, 9464):
	    deadline = time.monotonic() + 10
	    while True:
	        try:
	            socket.create_connection(("127.0.0.1", port), timeout=1).close()
	            break
	        except OSError:
	            if time.monotonic() > deadline:
	                sys.exit(f"nothing listens on 127.0.0.1:{port}")
	            time.sleep(0.05)
	EOF
		cat "$out/tokentap.err" "$out/mock.err"
		return 1
	fi

	# the same seeded stream, straight from the backend and through tokentap
	body='{"model":"m1","stream":true,"max_tokens":7,"messages":[{"role":"user","content":"hi"}]}'
	for target in direct:8000 proxied:8080; do
		curl -sS -N --max-time 20 -H 'Content-Type: application/json' \
		    -H 'X-Mock-Seed: 42' -d "$body" \
		    -o "$out/${target%%:*}.body" \
		    "http://127.0.0.1:${target#*:}/v1/chat/completions" || {
			echo "curl ${target%%:*} failed"; return 1; }
	done
	if ! grep -q '^data: \[DONE\]' "$out/proxied.body"; then
		echo "no [DONE] in the proxied stream:"; head -c 2000 "$out/proxied.body"; return 1
	fi
	chunks=$(grep -c '"content":"[^"]' "$out/proxied.body")
	if [ "$chunks" -ne 7 ]; then
		echo "expected 7 token chunks through tokentap, got $chunks"; return 1
	fi
	# the same but for the mock's "created" (the wall clock's second: the
	# two requests may fall on both sides of one)
	for f in direct proxied; do
		sed 's/"created":[0-9]*/"created":0/' "$out/$f.body" >"$out/$f.cmp"
	done
	if ! cmp -s "$out/direct.cmp" "$out/proxied.cmp"; then
		echo "the proxied body differs from the backend's:"
		diff "$out/direct.cmp" "$out/proxied.cmp" | head -20
		return 1
	fi

	# HEALTHCHECK exactly as the image declares it
	hc=$(podman image inspect --format '{{range $i, $a := .Config.Healthcheck.Test}}{{if $i}}{{printf "%s\n" $a}}{{end}}{{end}}' "$IMAGE")
	# printf, not echo: dash's echo would turn the script's \r\n into bytes
	hc_shell=$(printf '%s\n' "$hc" | sed -n 1p)
	hc_script=$(printf '%s\n' "$hc" | sed -n '3,$p')
	if [ -z "$hc_script" ] ||
	    ! chroot --userspec=$UID_IMAGE:$UID_IMAGE "$dir" "$hc_shell" -c "$hc_script"; then
		echo "the HEALTHCHECK command failed: $hc"; return 1
	fi

	# the access log (stdout) names the request, then a clean drain
	i=0
	until grep -q '"route":"default"' "$out/access.jsonl"; do
		i=$((i + 1))
		[ $i -gt 50 ] && { echo "no access-log line"; cat "$out/access.jsonl"; return 1; }
		sleep 0.1
	done
	python3 - "$out/access.jsonl" <<-'EOF' || return 1
	import json, sys
	recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
	if len(recs) != 1:
	    sys.exit(f"expected one access-log line, got {recs}")
	rec = recs[0]
	want = {"route": "default", "outcome": "ok", "status": 200, "stream": True,
	        "output_tokens": 7, "model": "m1"}
	bad = {k: rec.get(k) for k, v in want.items() if rec.get(k) != v}
	if bad or not rec.get("ttft_ms"):
	    sys.exit(f"access log {bad or 'ttft_ms'} in {rec}")
	EOF
	kill -TERM "$tt_pid"
	wait "$tt_pid"
	rc=$?
	tt_pid=
	if [ $rc -ne 0 ]; then
		echo "tokentap exited $rc on SIGTERM"; cat "$out/tokentap.err"; return 1
	fi
	if chroot --userspec=$UID_IMAGE:$UID_IMAGE "$dir" "$hc_shell" -c "$hc_script" 2>/dev/null; then
		echo "the HEALTHCHECK passes with tokentap stopped"; return 1
	fi
	if grep -qi "sdnotify\|error" "$out/tokentap.err"; then
		echo "tokentap complained:"; cat "$out/tokentap.err"; return 1
	fi
	return 0
}

if [ "${1:-}" = "--inner" ]; then
	inner "$2"
	exit $?
fi

# ---- outside --------------------------------------------------------------
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, network namespaces)"
start=$(date +%s)
mkdir -p "$WORK"

missing=
for c in podman:podman debootstrap:debootstrap curl:curl ip:iproute2 unshare:util-linux \
    python3:python3; do
	command -v "${c%%:*}" >/dev/null 2>&1 || missing="$missing ${c#*:}"
done
if [ -n "$missing" ]; then
	log "installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends \
	    $missing >/dev/null || fail "apt-get install$missing failed"
fi

# 1. the base image, once. bookworm-slim and the builder's bookworm are the
# same minbase system here: the builder installs what it needs.
if [ -n "${REBUILD_BASE:-}" ] || ! podman image exists "$BASE:bookworm-slim" ||
    ! podman image exists "$BASE:bookworm"; then
	rootfs=$WORK/rootfs
	log "bootstrapping Debian bookworm into $rootfs"
	rm -rf "$rootfs"
	debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
		fail "debootstrap failed, see $WORK/debootstrap.log"
	# the sources of Debian's own images: updates and security too
	rm -f "$rootfs/etc/apt/sources.list"
	cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<-EOF
	Types: deb
	URIs: http://deb.debian.org/debian
	Suites: bookworm bookworm-updates
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

	Types: deb
	URIs: http://deb.debian.org/debian-security
	Suites: bookworm-security
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	# slim as Debian's -slim images are: no docs, man pages or locales,
	# now or from later installs (copyright files stay)
	cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<-EOF
	path-exclude /usr/share/doc/*
	path-include /usr/share/doc/*/copyright
	path-exclude /usr/share/man/*
	path-exclude /usr/share/info/*
	path-exclude /usr/share/locale/*
	path-exclude /usr/share/lintian/*
	EOF
	find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
	    "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/lintian/* \
	    "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
	    "$rootfs"/var/lib/apt/lists/*
	tar -C "$rootfs" -c . | podman import -q - "$BASE:bookworm-slim" >/dev/null ||
		fail "podman import failed"
	podman tag "$BASE:bookworm-slim" "$BASE:bookworm" || fail "podman tag failed"
	rm -rf "$rootfs"
fi
log "base image ready ($(($(date +%s) - start))s)"

# 2. the image, and its build stage tagged as $BUILD_IMAGE: untagged, the
# stage's last image was left dangling by every build whose sources changed
# (389 MB each as podman counts: the compiler's layers, which it shares).
# Tagged, it keeps the layer cache the next build reuses; the images this
# build replaces are removed with their own layers, not the shared ones.
t=$(date +%s)
image_id() { podman image inspect --format '{{.Id}}' "$1" 2>/dev/null; }
dangling() { podman images -q --no-trunc --filter dangling=true | sort; }
old_image=$(image_id "$IMAGE")
old_build=$(image_id "$BUILD_IMAGE")
dangling >"$WORK/dangling.before"
: >"$WORK/build.log"
cd "$ROOT" || fail "no $ROOT"
for target in build final; do
	tag=$IMAGE
	[ $target = build ] && tag=$BUILD_IMAGE
	podman build --isolation=chroot --format docker --build-arg BASE=$BASE \
	    --ignorefile docker/Dockerfile.dockerignore \
	    $([ $target = build ] && echo --target=build) \
	    -t "$tag" -f docker/Dockerfile . >>"$WORK/build.log" 2>&1 ||
		{ tail -30 "$WORK/build.log"; fail "podman build failed, see $WORK/build.log"; }
done
log "image built ($(($(date +%s) - t))s, $(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"
for old in "$old_image:$IMAGE" "$old_build:$BUILD_IMAGE"; do
	id=${old%%:*}
	if [ -n "$id" ] && [ "$id" != "$(image_id "${old#*:}")" ]; then
		podman rmi "$id" >/dev/null 2>&1 || fail "cannot remove the replaced image $id"
	fi
done
dangling | comm -13 "$WORK/dangling.before" - >"$WORK/dangling.new"
[ ! -s "$WORK/dangling.new" ] ||
	fail "the build left untagged images: $(tr '\n' ' ' <"$WORK/dangling.new")"
log "no untagged image left by this build ($(grep -c . "$WORK/dangling.before") from before)"

# 3. its contents, through a container's writable mount
cid=$(podman create "$IMAGE") || fail "podman create failed"
cleanup() {
	podman umount "$cid" >/dev/null 2>&1
	podman rm -f "$cid" >/dev/null 2>&1
}
trap cleanup EXIT
dir=$(podman mount "$cid") || fail "podman mount failed"

user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "$user" = "$UID_IMAGE:$UID_IMAGE" ] || fail "image user is '$user', not $UID_IMAGE:$UID_IMAGE"
ports=$(podman image inspect --format '{{range $p, $v := .Config.ExposedPorts}}{{$p}} {{end}}' "$IMAGE")
case "$ports" in
*8080/tcp*9464/tcp*) ;;
*) fail "exposed ports are '$ports'" ;;
esac
version=$(chroot --userspec=$UID_IMAGE:$UID_IMAGE "$dir" /usr/bin/tokentap -V) ||
	fail "tokentap -V does not run in the image (missing libraries?)"
log "$version"
chroot "$dir" /usr/bin/tokentap-mock -V >/dev/null || fail "tokentap-mock does not run"
chroot "$dir" /usr/bin/tokentap-load -h >/dev/null || fail "tokentap-load does not run"

# the shipped config needs its upstream, and names the line when it is unset
if out=$(chroot --userspec=$UID_IMAGE:$UID_IMAGE "$dir" /usr/bin/tokentap -t \
    -c /etc/tokentap/tokentap.yaml 2>&1); then
	fail "-t passed without TOKENTAP_UPSTREAM"
fi
case "$out" in
/etc/tokentap/tokentap.yaml:*TOKENTAP_UPSTREAM*) ;;
*) fail "-t without TOKENTAP_UPSTREAM said: $out" ;;
esac
out=$(TOKENTAP_UPSTREAM=http://127.0.0.1:8000 chroot --userspec=$UID_IMAGE:$UID_IMAGE "$dir" \
    /usr/bin/tokentap -t -c /etc/tokentap/tokentap.yaml 2>&1)
[ "$out" = "configuration OK" ] || fail "tokentap -t on the image's config: $out"

unshare --net sh "$SELF" --inner "$dir" >"$WORK/inner.log" 2>&1 ||
	{ cat "$WORK/inner.log"; fail "streaming through the image failed"; }
log "streamed through the image: body identical to the backend's, access log ok"
log "took $(($(date +%s) - start))s"
echo "docker: PASS"
