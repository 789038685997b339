# SPDX-License-Identifier: Apache-2.0
"""/metrics size and scrape time at N groups: N requests, each its own
tenant (X-Tenant-Id: tN), through tokentap to tokentap-mock; then the best
of 5 scrapes as text, text with gzip, and protobuf with gzip.

  python3 tests/bench/metrics_scrape.py build/tokentap 1000 [EXTRA_YAML]

TX (environment) is added inside the tenant mapping, e.g.
TX=", header_pattern: 't[0-9]+'" to name every tenant."""
import gzip
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "e2e"))
from harness import ROOT, Mock, Tokentap, completion, conf, get, parallel  # noqa: E402

PROTO = ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
         "encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3")


def scrape(t, headers):
    best = None
    for _ in range(5):
        st = time.monotonic()
        r = get(t, "/metrics", headers=headers, timeout=60)
        el = time.monotonic() - st
        best = el if best is None or el < best else best
    enc, ct = r.headers.get("Content-Encoding"), r.headers.get("Content-Type")
    raw = gzip.decompress(r.body) if enc == "gzip" else r.body
    series = sum(1 for l in raw.splitlines() if l and not l.startswith(b"#")) \
        if ct.startswith("text") else None
    return len(r.body), len(raw), best, series, ct.split(";")[0], enc


def main():
    binary, n = sys.argv[1], int(sys.argv[2])
    extra = sys.argv[3] if len(sys.argv) > 3 else ""
    os.environ["TOKENTAP_BUILD"] = os.path.relpath(os.path.dirname(os.path.abspath(binary)), ROOT)
    tenant = f"tenant: {{header: X-Tenant-Id, max_tenants: 100000{os.environ.get('TX', '')}}}\n"
    with Mock("--ttft", "1ms", "--tpot", "1ms", "--tokens", "5") as m, \
            Tokentap(conf(m, extra, "chat", "/v1/", "workers: 1\n" + tenant)) as t:
        parallel(lambda i: completion(t.port, model="m1", headers={"X-Tenant-Id": f"t{i}"}),
                 range(n), 16)
        t.wait_logged(n, timeout=120)
        print(f"{n} groups; RSS {t.rss_kib()} kB")
        for h in ({}, {"Accept-Encoding": "gzip"}, {"Accept": PROTO, "Accept-Encoding": "gzip"}):
            sent, raw, el, series, ct, enc = scrape(t, h)
            print(f"  {ct:30s} {enc or '-':5s} sent {sent:>10,} B  body {raw:>10,} B  "
                  f"series {series}  best of 5: {el * 1000:.1f} ms")


if __name__ == "__main__":
    main()
