"""Fleet metrics: a real Prometheus 2.42 (native histograms on, so it
scrapes the protobuf format) agrees with /stats within 3 % on TTFT and
TPOT quantiles per route under a tokentap-load run, and one without them
(the text format's classic buckets) within 25 %; random keys and models
stay within metrics.max_series; gzip; process metrics."""
import gzip
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from harness import Mock, Proc, Tokentap, binary, free_port, raw_request, wait_port
from test_alert_rules import rules_for
from test_grafana import check_board

# Prometheus under the sanitizer build adds nothing but minutes
SANITIZER_SKIP = {"test_prometheus_quantiles_agree_with_stats"}

PROTO_ACCEPT = ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                "encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")


def get(port, path, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, dict(r.headers), r.read()


def query(port, expr):
    _, _, body = get(port, "/api/v1/query?query=" + urllib.parse.quote(expr))
    return json.loads(body)["data"]["result"]


def series_count(text):
    return sum(1 for l in text.splitlines() if l and not l.startswith("#"))


def promtool_check(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def prometheus(d, name, target, native):
    port = free_port()
    os.makedirs(os.path.join(d, name))
    conf = os.path.join(d, name, "prometheus.yml")
    with open(conf, "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n  - job_name: tokentap\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{target}']\n")
    args = ["prometheus", f"--config.file={conf}", f"--storage.tsdb.path={d}/{name}/data",
            f"--web.listen-address=127.0.0.1:{port}"]
    if native:
        args.append("--enable-feature=native-histograms")
    p = Proc(args)
    p.port = port
    return p


def load(url, seconds, extra=()):
    r = subprocess.run([binary("tokentap-load"), "-c", "8", "-d", f"{seconds}s",
                        "--max-tokens", "12", "--model", "m1", *extra, url],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def wait_scraped(prom, expr, want, timeout=30):
    """Until Prometheus's latest sample of expr (a count) reaches want."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = query(prom.port, expr)
        if res and sum(float(r["value"][1]) for r in res) >= want:
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus did not see {want} for {expr}: {res}")


def test_prometheus_quantiles_agree_with_stats():
    """Two routes with different TTFT and TPOT, loaded by tokentap-load:
    histogram_quantile over the native histograms is within 3 % of /stats
    for TTFT p50/p95/p99 and TPOT p50/p95 of each route (within 25 % over
    the classic buckets). Before, the buckets jumped 0.1 -> 0.25 -> 0.5 s:
    a p95 of 150 ms read as 242 ms, and there were no native histograms."""
    routes = {"fast": ("90ms", "14ms", "normal:15ms"), "slow": ("350ms", "33ms", "normal:60ms")}
    conf = "tenant: {header_values: [t1]}\nstats: {windows: [1h]}\nroutes:\n"
    with Mock("--tokens", "12") as m:
        for name, (ttft, tpot, jitter) in routes.items():
            conf += (f"  - name: {name}\n    match: {{path_prefix: /{name}/}}\n"
                     f"    strip_prefix: true\n    upstream: http://127.0.0.1:{m.port}\n"
                     f"    set_headers: {{X-Mock-TTFT: {ttft}, X-Mock-TPOT: {tpot}, "
                     f"X-Mock-Jitter: '{jitter}'}}\n")
        d = tempfile.mkdtemp(prefix="tt-prom-")
        with Tokentap(conf) as t, prometheus(d, "native", t.admin, True) as pn, \
                prometheus(d, "classic", t.admin, False) as pc:
            wait_port(pn.port, 20)
            wait_port(pc.port, 20)
            # client bytes that are not UTF-8 reach a label (the model): the
            # protobuf scrape must stay valid
            body = b'{"model":"m\xff\xc3(","stream":true}'
            raw_request(t.port, b"POST /fast/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"X-Tenant-Id: t1\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(body), body), timeout=10)
            with ThreadPoolExecutor(2) as ex:
                list(ex.map(lambda r: load(f"http://127.0.0.1:{t.port}/{r}/v1/chat/completions",
                                           6, ("-H", "X-Tenant-Id: t1")), routes))
            stats = {g["route"]: g for g in
                     json.loads(get(t.admin, "/stats?window=1h&by=route")[2])["groups"]}
            total = sum(g["ttft_ms"]["count"] for g in stats.values())
            assert all(stats[r]["ttft_ms"]["count"] >= 50 for r in routes), stats
            wait_scraped(pn, "sum(histogram_count(tokentap_time_to_first_token_seconds))", total)
            wait_scraped(pc, "sum(tokentap_time_to_first_token_seconds_count)", total)
            checks = (("ttft_ms", "tokentap_time_to_first_token_seconds", (0.5, 0.95, 0.99)),
                      ("tpot_ms", "tokentap_time_per_output_token_seconds", (0.5, 0.95)))
            worst = {"native": 0, "classic": 0}
            for field, metric, qs in checks:
                for q in qs:
                    native = {r["metric"]["route"]: float(r["value"][1]) * 1000 for r in query(
                        pn.port, f"histogram_quantile({q}, sum by (route) ({metric}))")}
                    classic = {r["metric"]["route"]: float(r["value"][1]) * 1000 for r in query(
                        pc.port, f"histogram_quantile({q}, sum by (route, le) ({metric}_bucket))")}
                    for route in routes:
                        want = stats[route][field]["p%d" % round(q * 100)]
                        en = abs(native[route] - want) / want
                        ec = abs(classic[route] - want) / want
                        worst["native"] = max(worst["native"], en)
                        worst["classic"] = max(worst["classic"], ec)
                        print(f"{route} {field} p{round(q * 100)}: /stats {want:.3f}, native "
                              f"{native[route]:.3f} ({en:+.2%}), classic {classic[route]:.3f} "
                              f"({ec:+.2%})")
                        assert en <= 0.03, (route, field, q, native[route], want)
                        assert ec <= 0.25, (route, field, q, classic[route], want)
            print(f"worst relative error vs /stats: native {worst['native']:.2%}, "
                  f"classic {worst['classic']:.2%}")
            with open(rules_for(d, open(t.conf).read())) as f:
                exprs = [e for e in re.findall(r"record: \S+:(?:p95_rate|count_increase)1m\n"
                                               r"        expr: \|-\n((?:          .*\n)+)", f.read())]
            assert len(exprs) == 4, exprs
            instance = re.search(r'alert_instance="([^"]+)"',
                                 get(t.admin, "/metrics")[2].decode()).group(1)
            for p in (pn, pc):
                _, _, body = get(p.port, "/api/v1/targets")
                target = json.loads(body)["data"]["activeTargets"][0]
                assert target["health"] == "up" and not target["lastError"], target
                # the board's queries run on either, and it says which it plots
                check_board(p.port)
                which = query(p.port, "clamp_max(count(histogram_count("
                              "tokentap_time_to_first_token_seconds)), 1) or vector(0)")
                assert float(which[0]["value"][1]) == (1 if p is pn else 0)
                # the rules' quantiles and counts read either kind, and name
                # the instance as tokentap's notifiers do
                for expr in exprs:
                    got = {(r["metric"]["route"], r["metric"]["instance"]) for r in query(
                        p.port, expr) if r["value"][1] != "NaN"}
                    assert {r for r, _ in got} == set(routes), (p is pn, expr, got)
                    assert {i for _, i in got} == {instance}, (p is pn, expr, got)


def test_random_keys_and_models_stay_within_the_budget():
    """1,000 requests with random API keys and random models (and keys
    hashed into labels, the operator's opt-in) add no more series than
    metrics.max_series; the rest counts as folded. Before, 400 such
    requests made 37,161 series. Requests the backend answers 401 mint no
    tenant at all."""
    budget = 3000
    conf = (f"metrics: {{max_series: {budget}, tenants: hashed}}\nroutes:\n"
            "  - {name: chat, match: {path_prefix: /v1/}, upstream: http://127.0.0.1:%d}\n")
    with Mock("--ttft", "1ms", "--tpot", "1ms", "--tokens", "3") as m, \
            Tokentap(conf % m.port) as t:
        before = series_count(get(t.admin, "/metrics")[2].decode())

        def one(i):
            body = b'{"model":"model-%d-%s","stream":true}' % (i, os.urandom(4).hex().encode())
            raw_request(t.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"Authorization: Bearer sk-%s\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n%s" % (os.urandom(12).hex().encode(),
                                                          len(body), body), timeout=10)
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(one, range(1000)))
        t.access(1000, timeout=30)
        text = get(t.admin, "/metrics")[2].decode()
        after = series_count(text)
        assert after - before <= budget, (before, after)
        folded = float(re.search(r"^tokentap_metrics_folded_requests_total (\S+)$", text,
                                 re.M).group(1))
        assert folded > 900, folded
        assert 'tenant="_other",model="_other"' in text
        promtool_check(text)
        # 401s: no tenant from them, whatever the budget
        tenants = set(re.findall(r'tenant="([^"]*)"', text))
        for i in range(20):
            raw_request(t.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"X-Mock-Fault: status:401\r\nAuthorization: Bearer bad-%d\r\n"
                        b"Content-Length: 2\r\nConnection: close\r\n\r\n{}" % i, timeout=10)
        t.access(1020, timeout=30)
        text = get(t.admin, "/metrics")[2].decode()
        assert set(re.findall(r'tenant="([^"]*)"', text)) == tenants
        assert 'code="4xx"' in text


def test_gzip_and_process_metrics():
    """A scraper that takes gzip gets it (the same exposition); the four
    process metrics of every exporter are there and plausible; the
    protobuf format is served to a scraper that asks for it. With both
    name sets on and bytes that are not UTF-8 in the tenant header and the
    model, promtool still passes the exposition."""
    conf = ("tenant: {header: X-Tenant-Id, header_pattern: '.*'}\n"
            "metrics: {names: both}\nroutes:\n  - {name: chat, match: {path_prefix: /v1/}, "
            "upstream: http://127.0.0.1:%d}\n")
    with Mock("--ttft", "1ms", "--tpot", "1ms", "--tokens", "3") as m, \
            Tokentap(conf % m.port) as t:
        body = b'{"model":"m\\/\xed\xa0\x80\x01","stream":true}'
        raw_request(t.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    b"X-Tenant-Id: t\x80\xff\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n%s" % (len(body), body))
        t.access(1)
        _, h, plain = get(t.admin, "/metrics")
        assert "Content-Encoding" not in h and h["Content-Type"].startswith("text/plain")
        _, h, z = get(t.admin, "/metrics", {"Accept-Encoding": "gzip"})
        assert h["Content-Encoding"] == "gzip"
        text = gzip.decompress(z).decode()
        # the same series (the process's own values move between scrapes)
        strip = lambda s: [l for l in s.splitlines() if not l.startswith("process_")]
        assert strip(text) == strip(plain.decode())
        v = {k: float(x) for k, x in re.findall(r"^(process_\w+) (\S+)$", text, re.M)}
        assert v["process_resident_memory_bytes"] > 1 << 20
        assert 3 <= v["process_open_fds"] < v["process_max_fds"]
        assert abs(v["process_start_time_seconds"] - time.time()) < 120
        assert 0 < v["process_cpu_seconds_total"] < 60
        promtool_check(text)
        assert 'gen_ai_request_model="m/\ufffd\ufffd\ufffd?"' in text and 'tenant="t\ufffd\ufffd"' in text
        assert 'gen_ai_client_token_usage_count{' in text
        _, h, body = get(t.admin, "/metrics", {"Accept": PROTO_ACCEPT})
        assert h["Content-Type"].startswith("application/vnd.google.protobuf"), h
        assert b"tokentap_requests_total" in body and b"# TYPE" not in body
