#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The OTLP span encoder against Debian's protobuf-c (tests/bench/otlp_encode.c):
# the measurement behind docs/alerts-and-metrics.md, "One protobuf
# writer". Needs the plain build (make) and protobuf-c-compiler and
# libprotobuf-c-dev, which make
# does not install (tokentap does not use them):
#   apt-get install protobuf-c-compiler libprotobuf-c-dev
#   sh tests/bench/otlp_encode.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/build/otlp-encode
command -v protoc-c >/dev/null || { echo "otlp_encode: protoc-c missing (protobuf-c-compiler)" >&2; exit 1; }
mkdir -p "$out"
cd "$root/tests/e2e/otlp"
protoc-c --c_out="$out" opentelemetry/proto/common/v1/common.proto \
    opentelemetry/proto/resource/v1/resource.proto opentelemetry/proto/trace/v1/trace.proto \
    opentelemetry/proto/collector/trace/v1/trace_service.proto
cd "$root"
make -s build/libproxy.a build/libtokentap.a
P=src/proxy
cc -std=c11 -D_GNU_SOURCE -O2 -DTOKENTAP_VERSION='"0"' -I"$out" -Isrc/core -I$P/conf -I$P/wire \
    -I$P/stats -I$P/otel -I/usr/share/include/llhttp $(pkg-config --cflags libevent) \
    -o "$out/otlp_encode" tests/bench/otlp_encode.c $(find "$out" -name '*.pb-c.c') \
    build/libproxy.a build/libtokentap.a -lprotobuf-c $(pkg-config --libs libevent openssl yaml-0.1 zlib libbrotlidec libzstd libevent_openssl libevent_pthreads) -lpthread -lm
"$out/otlp_encode"
