#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the stream fuzzer (clang libFuzzer + ASan + UBSan), seeds its
# corpus from the recorded fixtures and runs it for SECONDS (default 20).
# Exits non-zero, and says "fuzz: FAIL", on a crash or a build failure.
# With load_read: tokentap-load's saved documents instead (report and
# compare), seeded from tests/fixtures/load.
#   tests/fuzz/run.sh [SECONDS [stream|load_read]]
set -u

secs=${1:-20}
what=${2:-stream}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/build/fuzz
fixtures=${TOKENTAP_FIXTURES:-$root/tests/fixtures/streams}
cc=${FUZZ_CC:-clang}

fail() {
	echo "fuzz: FAIL${1:+ ($1)}"
	exit 1
}

if [ "$what" = load_read ]; then
	mkdir -p "$out/corpus-load" "$out/artifacts" || fail "mkdir"
	make -s -C "$root" CC="$cc" SANITIZER=fuzzer-no-link,address,undefined \
	    build/fuzz/fuzz_load_read || fail "build"
	cp "$root"/tests/fixtures/load/*.json "$out/corpus-load/" || fail "seeds"
	"$out/fuzz_load_read" -max_total_time="$secs" -max_len=262144 -timeout=20 \
	    -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix="$out/artifacts/" "$out/corpus-load" \
	    > "$out/fuzz-load.log" 2>&1
	rc=$?
	tail -n 20 "$out/fuzz-load.log"
	[ $rc -eq 0 ] || fail "exit $rc, crash input in $out/artifacts, log $out/fuzz-load.log"
	echo "fuzz: PASS"
	exit 0
fi
[ "$what" = stream ] || fail "unknown fuzzer $what (stream, load_read)"

mkdir -p "$out/corpus" "$out/artifacts" || fail "mkdir"

# Built by the Makefile's own rules (build/fuzz: the core compiled with
# clang and -fsanitize=fuzzer-no-link,address,undefined).
make -s -C "$root" CC="$cc" SANITIZER=fuzzer-no-link,address,undefined \
    build/fuzz/fuzz_stream || fail "build"

# Seeds: each fixture behind the 3 parameter bytes (max_event_bytes 1 MiB,
# then 64 KiB; cut points 0x0101 and 0x2a00).
n=0
for f in "$fixtures"/*/*; do
	case $(basename "$f") in LICENSE|COMMIT|README*) continue ;; esac
	[ -f "$f" ] || continue
	n=$((n + 1))
	{ printf '\024\001\001'; cat "$f"; } > "$out/corpus/seed-$n-a"
	{ printf '\020\000\052'; cat "$f"; } > "$out/corpus/seed-$n-b"
done
printf '\005\003\000event: e\r\ndata: 1\r\n\r\n' > "$out/corpus/seed-crlf"
[ "$n" -gt 0 ] || echo "fuzz: no fixtures under $fixtures, built-in seed only"

"$out/fuzz_stream" -max_total_time="$secs" -max_len=65536 -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/" "$out/corpus" \
    > "$out/fuzz.log" 2>&1
rc=$?
tail -n 20 "$out/fuzz.log"
[ $rc -eq 0 ] || fail "exit $rc, crash input in $out/artifacts, log $out/fuzz.log"
echo "fuzz: PASS"
