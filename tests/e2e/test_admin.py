# SPDX-License-Identifier: Apache-2.0
"""Admin endpoints: /stats against the access log, /metrics against promtool
and a real Prometheus, the admin token, the stats file."""
import json
import math
import os
import shutil
import socket
import tempfile
import time

from harness import CHAT, Mock, Tokentap, conf, jsonl, promtool_check, request, until
from peers import Prometheus

SANITIZER_SKIP = {"test_prometheus_scrapes_and_agrees"}
# and make check: a real Prometheus scraping for seconds is make test's
CHECK_SKIP = SANITIZER_SKIP


def post(port, first, gap=5, tokens=3, tenant="t1"):
    """A stream from tokentap-mock: its first token after first ms, then
    tokens - 1 more gap ms apart."""
    return request(port, CHAT, {"model": "m1", "stream": True},
                   {"X-Tenant-Id": tenant, "X-Mock-TTFT": f"{first}ms",
                    "X-Mock-TPOT": f"{gap}ms", "X-Mock-Tokens": str(tokens)})


def exact_quantile(values, q):
    v = sorted(values)
    return v[max(0, math.ceil(q * len(v)) - 1)]


def test_stats_match_access_log():
    with Mock() as m, Tokentap(conf(m, "tenant: {header: X-Tenant-Id}\n", "chat", "/v1/")) as t:
        for i in range(40):
            post(t.port, 5 + (i * 7) % 60, gap=2 + i % 5, tokens=4, tenant="t1" if i % 4 else "t2")
        lines = t.wait_logged(40)
        s = t.stats(window="1m", by="route,tenant")
        assert s["window"] == "1m" and s["by"] == ["route", "tenant"]
        groups = {g["tenant"]: g for g in s["groups"]}
        assert set(groups) == {"t1", "t2"}
        for tenant, g in groups.items():
            mine = [l for l in lines if l["tenant"] == tenant]
            assert g["requests"] == len(mine) and g["errors"] == 0
            assert g["output_tokens"] == sum(l["output_tokens"] for l in mine)
            for field, key in (("ttft_ms", "ttft_ms"), ("tpot_ms", "tpot_ms")):
                vals = [l[key] for l in mine]
                assert g[field]["count"] == len(vals)
                for q, name in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
                    want = exact_quantile(vals, q)
                    assert abs(g[field][name] - want) <= want * 0.01 + 0.002, (field, name, g[field], want)
                assert abs(g[field]["max"] - max(vals)) < 0.002
            assert g["itl_ms"]["count"] == 3 * len(mine)
        s = t.stats()
        assert s["by"] == ["route"] and s["groups"][0]["requests"] == 40
        assert s["groups"][0]["output_tokens_per_s"] > 0


def test_stats_by_groups_exactly_by_the_fields_asked():
    """docs/contract.md §5: by=tenant sums each tenant over every route it
    used; the key fields are the ones asked, and no other."""
    with Mock() as m, Tokentap(
            "tenant: {header: X-Tenant-Id}\nroutes:\n"
            f"  - {{name: a, match: {{path_prefix: /a/}}, upstream: {m.url()}}}\n"
            f"  - {{name: b, match: {{path_prefix: /b/}}, upstream: {m.url()}}}\n") as t:
        for path, tenant in (("/a/", "t1"), ("/b/", "t1"), ("/b/", "t1"), ("/a/", "t2")):
            request(t.port, path + "v1/chat/completions", headers={"X-Tenant-Id": tenant})
        t.wait_logged(4)
        s = t.stats(by="tenant")
        assert s["by"] == ["tenant"], s["by"]
        rows = {g["tenant"]: g for g in s["groups"]}
        assert set(rows) == {"t1", "t2"} and "route" not in rows["t1"]
        assert rows["t1"]["requests"] == 3 and rows["t2"]["requests"] == 1
        s = t.stats(by="route,tenant")
        assert sorted((g["route"], g["tenant"], g["requests"]) for g in s["groups"]) == [
            ("a", "t1", 1), ("a", "t2", 1), ("b", "t1", 2)]
        s = t.stats(by="model")
        assert s["by"] == ["model"] and sum(g["requests"] for g in s["groups"]) == 4
        assert t.get("/stats?by=").status == 400


def test_stats_rejects_unknown_window_and_group():
    with Mock() as m, Tokentap(conf(m, "stats: {windows: [1m, 5m]}\n")) as t:
        r = t.get("/stats?window=7m")
        assert r.status == 400 and "valid: 1m, 5m" in r.text, r.text
        r = t.get("/stats?by=route,colour")
        assert r.status == 400 and "tenant" in r.text, r.text
        assert t.get("/stats?window=5m").status == 200


def test_client_bytes_keep_outputs_valid():
    """Control bytes and ill-formed UTF-8 a client sends (tenant header,
    path and query, the body's model) leave every access-log line, /stats,
    /alerts and /metrics valid JSON (or text) in valid UTF-8; ill-formed
    sequences read as U+FFFD, one per maximal subpart as Python decodes."""
    # (tenant, model, target); the last two targets are refused (400)
    sent = [(b"t\tab", b"m\x01\n\x7f\xc3\x28\xed\xa0\x80", b"/v1/chat/completions?q=%00\"\\"),
            (b"t\x80\xe2\x82z", b"\xce\xba\xe1\xbd\xb9\xc0\xaf\xf4\x90\x80\x80", b"/v1/chat/completions"),
            (b"\xed\xa0\x80", b"m\xe2\x82", b"/v1/chat/completions"),
            (b"u1", b"m1", b"/v1/chat/completions/\xc3\x28\xff"),
            (b"u2", b"m1", b"/v1/chat/completions?k=\x01\x7f")]
    # every header value names a tenant here, so client bytes reach the labels
    extra = ("tenant: {header: X-Tenant-Id, header_pattern: '.*'}\n"
             "alerts: {per_tenant: true}\n")
    with Mock() as m, Tokentap(conf(m, extra, "chat", "/v1/")) as t:
        for i, (tenant, model, target) in enumerate(sent):
            request(t.port, target.decode("latin-1"), b'{"model":"%s","stream":true}' % model,
                    [("X-Tenant-Id", tenant.decode("latin-1")), ("X-Request-Id", f"c{i}")])
        t.wait_logged(len(sent))
        with open(t.log, "rb") as f:
            data = f.read()
        assert b"\x7f" not in data
        lines = [json.loads(l.decode("utf-8"), strict=True) for l in data.splitlines()]
        # the streams in the order sent, then the two refused (whose lines
        # have ids of tokentap's own): a stream's line is written just after
        # its last byte went out, and the next request may be logged first
        lines.sort(key=lambda l: (l["status"], l["request_id"]))
        assert [l["status"] for l in lines] == [200, 200, 200, 400, 400], lines
        assert [l["request_id"] for l in lines[:3]] == ["c0", "c1", "c2"], lines
        # a tenant or model a client names is cleaned once, for every output:
        # U+FFFD for ill-formed UTF-8, '?' for control bytes and DEL
        def clean(b):
            return "".join("?" if ord(c) < 0x20 or c == "\x7f" else c
                           for c in b.decode("utf-8", "replace"))
        for (tenant, model, target), l in zip(sent[:3], lines):
            assert l["tenant"] == clean(tenant), l
            assert l["model"] == clean(model), l
            assert l["path"] == target.decode(), l
        assert lines[1]["tenant"] == "t\ufffd\ufffdz" and lines[0]["tenant"] == "t?ab"
        doc = t.get("/stats?by=route,tenant,model").body.decode("utf-8")   # strictly
        groups = json.loads(doc, strict=True)["groups"]
        assert {(g["tenant"], g["model"]) for g in groups if g["route"] == "chat"} == {
            (clean(x), clean(m)) for x, m, _ in sent[:3]}
        json.loads(t.get("/alerts").body.decode("utf-8"), strict=True)
        r = t.get("/metrics")
        assert r.status == 200 and 'tenant="t\ufffd\ufffdz"' in r.text
        promtool_check(r.text)
        t.stderr().encode("utf-8")      # the error log too (decoded strictly by Proc)
        with open(t.err.name, "rb") as f:
            f.read().decode("utf-8")


def test_metrics_pass_promtool():
    with Mock() as m, Tokentap(conf(m, "alerts: {thresholds: {ttft_warning: 150ms}}\n",
                                    "chat", "/v1/")) as t:
        # two under the threshold by far, three over it by causality
        for first in (10, 20, 200, 300, 400):
            post(t.port, first)
        t.wait_logged(5)            # the last request's statistics are in
        text = t.get("/metrics").text
        assert 'le="0.150000"' in text          # the threshold is a bucket bound
        up = f'upstream="{m.url()}"'
        assert f'tokentap_threshold_exceeded_total{{route="chat",tenant="-",model="m1",{up},threshold="ttft_warning"}} 3' in text, text
        assert f'tokentap_requests_total{{route="chat",tenant="-",model="m1",{up},outcome="ok",code="2xx"}} 5' in text
        promtool_check(text)


def test_admin_token_enforced():
    extra = "admin:\n  address: 127.0.0.1:{admin}\n  token: s3cret\n"
    with Mock() as m, Tokentap(conf(m, extra)) as t:
        r = t.get("/healthz")
        assert (r.status, r.body) == (200, b"ok\n")
        assert t.get("/stats").status == 401
        assert t.get("/metrics", token="wrong").status == 401
        assert t.get("/metrics", token="s3cret").status == 200
        assert t.get("/stats", token="s3cret").status == 200


def test_stats_file_grows_on_schedule():
    """A snapshot every stats.interval (200 ms): no more of them than that
    allows since the start; the request in the last one; SIGUSR1 reopens
    the file."""
    d = tempfile.mkdtemp()
    path = os.path.join(d, "stats.jsonl")
    extra = f"stats:\n  file: {path}\n  interval: 200ms\n"
    began = time.monotonic()
    with Mock() as m, Tokentap(conf(m, extra)) as t:
        post(t.port, 5)
        t.wait_logged(1)

        def snapshots():
            with open(path) as f:
                return jsonl(f)
        lines = until(lambda: (x := snapshots()) and x[-1]["groups"] and
                      x[-1]["groups"][0]["requests"] == 1 and len(x) >= 4 and x, 10,
                      "four snapshots, the last with the request")
        assert len(lines) <= (time.monotonic() - began) / 0.2 + 1, len(lines)
        os.rename(path, path + ".1")
        t.p.send_signal(10)              # SIGUSR1
        until(lambda: os.path.exists(path), 5, "the stats file reopened")
    shutil.rmtree(d)


def test_prometheus_scrapes_and_agrees():
    """A real Prometheus scrapes tokentap; its p95 from the buckets lies in
    the bucket that holds /stats' p95."""
    with Mock() as m, Tokentap(conf(m, "", "chat", "/v1/")) as t, Prometheus(t) as prom:
        time.sleep(2.5)
        for i in range(30):
            post(t.port, 20 + (i * 37) % 400)
        t.wait_logged(30)
        q = ("histogram_quantile(0.95, sum by (le) "
             "(rate(tokentap_time_to_first_token_seconds_bucket[1m])))")
        value = until(lambda: prom.values(q).get(None), 25, "Prometheus's quantile",
                      every=1) * 1000
        stats = t.stats()["groups"][0]["ttft_ms"]["p95"]
        bounds = [1, 5, 10, 20, 40, 60, 80, 100, 250, 500, 750, 1000, 2500]
        lo = max([0] + [x for x in bounds if x < stats])
        hi = min(x for x in bounds if x >= stats)
        assert lo <= value <= hi, (value, stats, lo, hi)


def test_admin_bounds():
    """The admin listener takes no more from a client than a scrape needs:
    a huge head is refused at 16 KiB (RSS 5 -> 221 MB on a 200 MiB head
    before), and a connection that sends nothing is closed after
    timeouts.client_header (1 s here; held 130 s before; the default 10 s)."""
    with Mock() as m, Tokentap(conf(m, "timeouts: {client_header: 1s}\n"
                                       "admin:\n  address: 127.0.0.1:{admin}\n"
                                       "  token: s3cret\n")) as t:
        base = t.rss_kib()
        s = socket.create_connection(("127.0.0.1", t.admin), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        try:
            while sent < 64 * 1024 * 1024:
                s.sendall(b"a" * 65536)
                sent += 65536
        except OSError:
            pass                      # refused: closed while we sent
        s.close()
        assert sent < 64 * 1024 * 1024, "a 64 MiB head was read"
        assert t.rss_kib() - base < 4096, (base, t.rss_kib())
        silent = socket.create_connection(("127.0.0.1", t.admin), timeout=20)
        start = time.monotonic()
        assert silent.recv(1) == b""
        assert 0.9 < time.monotonic() - start < 5
        silent.close()
        # a scrape with the token still works
        assert t.get("/stats", token="s3cret").status == 200


EVERY_FEATURE = """tenant: {{header: X-Tenant-Id, header_values: [t1, t2]}}
stats: {{windows: [10s, 1m], history: [{{step: 1s, keep: 1m}}]}}
routes:
  - name: chat
    match: {{path_prefix: /c/}}
    strip_prefix: true
    upstream: http://127.0.0.1:{mock}
    thresholds: {{ttft_warning: 5ms, ttft_critical: 10ms, tpot_warning: 1ms, stall: 1s}}
  - name: pool
    match: {{path_prefix: /p/}}
    strip_prefix: true
    upstreams: [{{url: 'http://127.0.0.1:{mock}'}}, {{url: 'http://127.0.0.1:{dead}'}}]
    min_healthy: 2
    health: {{path: /healthz, interval: 200ms, timeout: 500ms}}
slos:
  - {{name: fast, match: {{route: chat}}, ttft: 5ms, objective: 0.99}}
alerts:
  evaluate_every: 200ms
  window: 10s
  min_samples: 1
  burn_rates: [{{severity: critical, long: 10s, short: 5s, rate: 2}}]
  burn_min_requests: 1
  notify: [{{type: log}}]
otel:
  endpoint: {otel}
  traces: {{delay: 100ms}}
  metrics: {{interval: 1s}}
"""


def test_exposition_valid_with_every_feature_on():
    """/metrics with every feature on at once (tenants, pools with health
    checks and a dead replica, SLOs and burn rates, alerts firing, the
    history, OTLP export of spans and metrics) passes promtool: no family
    twice, no HELP or TYPE out of place (#41: the otel families had two
    blocks each with OTel on). OpenMetrics does not apply: tokentap
    answers an Accept of it with the text format."""
    from harness import free_port, get
    from otlp_collector import Collector
    with Collector() as col, Mock() as m, Tokentap(EVERY_FEATURE.format(
            mock=m.port, dead=free_port(), otel=col.url())) as t:
        for tenant in ("t1", "t2", "t3"):
            request(t.port, "/c" + CHAT, {"model": "m1", "stream": True},
                    {"X-Tenant-Id": tenant, "X-Mock-TTFT": "20ms", "X-Mock-Tokens": "3"})
            request(t.port, "/p" + CHAT, {"model": "m2", "stream": True},
                    {"X-Tenant-Id": tenant, "X-Mock-Tokens": "2"})
        t.wait_logged(6)
        # the alerts fire, the pool is short, an OTLP export went out
        until(lambda: any(r["state"] == "firing" for r in t.get("/alerts", json=True)["rules"]),
              10, "an alert firing")
        until(lambda: "tokentap_otel_exports_total{" in t.get("/metrics").text, 10,
              "an OTLP export counted")
        text = t.get("/metrics").text
        for family in ("tokentap_slo_requests_total", "tokentap_upstream_up",
                       "tokentap_alert_instance_info", "tokentap_otel_exports_total"):
            assert family in text, family
        promtool_check(text)
        # tokentap serves no OpenMetrics text: asked for it, the text format
        om = get(t.admin, "/metrics", headers={"Accept": "application/openmetrics-text"})
        assert om.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"), \
            om.headers
