"""Admin endpoints: /stats against the access log, /metrics against promtool
and a real Prometheus, the admin token, the stats file."""
import json
import math
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from backend import SSE_HEAD, Backend
from harness import Proc, Tokentap, free_port, raw_request, wait_port

SANITIZER_SKIP = {"test_prometheus_scrapes_and_agrees"}


def chunk(text):
    return b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % text.encode()


def delayed_backend():
    """First token after X-First ms, then X-Tokens tokens X-Gap ms apart."""
    def handle(req, c):
        first = int(req.header("X-First") or 10) / 1000
        gap = int(req.header("X-Gap") or 5) / 1000
        n = int(req.header("X-Tokens") or 3)
        c.send(SSE_HEAD)
        time.sleep(first)
        for i in range(n):
            if i:
                time.sleep(gap)
            c.chunk(chunk(f"t{i}"))
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        return "keep"
    return Backend(handle)


def cfg(port, extra=""):
    return (f"routes:\n  - name: chat\n    match: {{path_prefix: /v1/}}\n"
            f"    upstream: http://127.0.0.1:{port}\n{extra}")


def post(port, first, gap=5, tokens=3, tenant="t1"):
    body = b'{"model":"m1","stream":true}'
    return raw_request(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                       b"Connection: close\r\nX-Tenant-Id: %s\r\nX-First: %d\r\nX-Gap: %d\r\n"
                       b"X-Tokens: %d\r\nContent-Length: %d\r\n\r\n%s"
                       % (tenant.encode(), first, gap, tokens, len(body), body))


def get(port, path, token=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def exact_quantile(values, q):
    v = sorted(values)
    return v[max(0, math.ceil(q * len(v)) - 1)]


def test_stats_match_access_log():
    with delayed_backend() as b, Tokentap(cfg(b.port, "tenant: {header: X-Tenant-Id}\n")) as t:
        for i in range(40):
            post(t.port, 5 + (i * 7) % 60, gap=2 + i % 5, tokens=4, tenant="t1" if i % 4 else "t2")
        lines = t.access(40)
        status, body = get(t.admin, "/stats?window=1m&by=route,tenant")
        assert status == 200, body
        s = json.loads(body)
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
        status, body = get(t.admin, "/stats")
        s = json.loads(body)
        assert s["by"] == ["route"] and s["groups"][0]["requests"] == 40
        assert s["groups"][0]["output_tokens_per_s"] > 0


def test_stats_by_groups_exactly_by_the_fields_asked():
    """SPEC §5: by=tenant sums each tenant over every route it used; the
    key fields are the ones asked, and no other."""
    conf = ("tenant: {header: X-Tenant-Id}\nroutes:\n"
            "  - {name: a, match: {path_prefix: /a/}, upstream: http://127.0.0.1:{up}}\n"
            "  - {name: b, match: {path_prefix: /b/}, upstream: http://127.0.0.1:{up}}\n")
    with delayed_backend() as b, Tokentap(conf.replace("{up}", str(b.port))) as t:
        for path, tenant in (("/a/", "t1"), ("/b/", "t1"), ("/b/", "t1"), ("/a/", "t2")):
            raw_request(t.port, b"POST %sv1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"X-Tenant-Id: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
                        % (path.encode(), tenant.encode()))
        t.access(4)
        s = json.loads(get(t.admin, "/stats?by=tenant")[1])
        assert s["by"] == ["tenant"], s["by"]
        rows = {g["tenant"]: g for g in s["groups"]}
        assert set(rows) == {"t1", "t2"} and "route" not in rows["t1"]
        assert rows["t1"]["requests"] == 3 and rows["t2"]["requests"] == 1
        s = json.loads(get(t.admin, "/stats?by=route,tenant")[1])
        assert sorted((g["route"], g["tenant"], g["requests"]) for g in s["groups"]) == [
            ("a", "t1", 1), ("a", "t2", 1), ("b", "t1", 2)]
        s = json.loads(get(t.admin, "/stats?by=model")[1])
        assert s["by"] == ["model"] and sum(g["requests"] for g in s["groups"]) == 4
        assert get(t.admin, "/stats?by=")[0] == 400


def test_stats_rejects_unknown_window_and_group():
    with delayed_backend() as b, Tokentap(cfg(b.port, "stats: {windows: [1m, 5m]}\n")) as t:
        status, body = get(t.admin, "/stats?window=7m")
        assert status == 400 and "valid: 1m, 5m" in body, body
        status, body = get(t.admin, "/stats?by=route,colour")
        assert status == 400 and "tenant" in body, body
        assert get(t.admin, "/stats?window=5m")[0] == 200


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
    with delayed_backend() as b, Tokentap(cfg(b.port, extra)) as t:
        for tenant, model, target in sent:
            body = b'{"model":"%s","stream":true}' % model
            raw_request(t.port, b"POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                        b"X-Tenant-Id: %s\r\nContent-Length: %d\r\n\r\n%s"
                        % (target, tenant, len(body), body))
        deadline = time.monotonic() + 5
        while True:
            with open(t.log, "rb") as f:
                data = f.read()
            if data.count(b"\n") >= len(sent) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert b"\x7f" not in data
        lines = [json.loads(l.decode("utf-8"), strict=True) for l in data.splitlines()]
        assert [l["status"] for l in lines] == [200, 200, 200, 400, 400]
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
        status, doc = get(t.admin, "/stats?by=route,tenant,model")   # decodes strictly
        groups = json.loads(doc, strict=True)["groups"]
        assert {(g["tenant"], g["model"]) for g in groups if g["route"] == "chat"} == {
            (clean(x), clean(m)) for x, m, _ in sent[:3]}
        json.loads(get(t.admin, "/alerts")[1], strict=True)
        status, text = get(t.admin, "/metrics")
        assert status == 200 and 'tenant="t\ufffd\ufffdz"' in text
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        t.stderr().encode("utf-8")      # the error log too (decoded strictly by Proc)
        with open(t.err.name, "rb") as f:
            f.read().decode("utf-8")


def test_metrics_pass_promtool():
    with delayed_backend() as b, Tokentap(cfg(b.port, "alerts: {thresholds: {ttft_warning: 30ms}}\n")) as t:
        for i in range(5):
            post(t.port, 10 + 10 * i)
        status, text = get(t.admin, "/metrics")
        assert status == 200
        assert 'le="0.030000"' in text          # the threshold is a bucket bound
        up = f'upstream="http://127.0.0.1:{b.port}"'
        assert f'tokentap_threshold_exceeded_total{{route="chat",tenant="-",model="m1",{up},threshold="ttft_warning"}} 3' in text, text
        assert f'tokentap_requests_total{{route="chat",tenant="-",model="m1",{up},outcome="ok",code="2xx"}} 5' in text
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr


def test_admin_token_enforced():
    extra = "admin:\n  address: 127.0.0.1:{admin}\n  token: s3cret\n"
    with delayed_backend() as b, Tokentap(cfg(b.port, extra)) as t:
        assert get(t.admin, "/healthz") == (200, "ok\n")
        assert get(t.admin, "/stats")[0] == 401
        assert get(t.admin, "/metrics", token="wrong")[0] == 401
        assert get(t.admin, "/metrics", token="s3cret")[0] == 200
        assert get(t.admin, "/stats", token="s3cret")[0] == 200


def test_stats_file_grows_on_schedule():
    d = tempfile.mkdtemp()
    path = os.path.join(d, "stats.jsonl")
    extra = f"stats:\n  file: {path}\n  interval: 200ms\n"
    with delayed_backend() as b, Tokentap(cfg(b.port, extra)) as t:
        post(t.port, 5)
        time.sleep(1.1)
        with open(path) as f:
            lines = [json.loads(l) for l in f]
        assert 4 <= len(lines) <= 6, len(lines)
        assert lines[-1]["groups"][0]["requests"] == 1
        os.rename(path, path + ".1")
        t.p.send_signal(10)              # SIGUSR1
        time.sleep(0.5)
        assert os.path.exists(path)
    shutil.rmtree(d)


def test_prometheus_scrapes_and_agrees():
    """A real Prometheus scrapes tokentap; its p95 from the buckets lies in
    the bucket that holds /stats' p95."""
    prom_port = free_port()
    d = tempfile.mkdtemp()
    with delayed_backend() as b, Tokentap(cfg(b.port)) as t:
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write(f"global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n"
                    f"scrape_configs:\n  - job_name: tokentap\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{t.admin}']\n")
        with Proc(["prometheus", f"--config.file={d}/prometheus.yml",
                   f"--storage.tsdb.path={d}/data", f"--web.listen-address=127.0.0.1:{prom_port}"]):
            wait_port(prom_port, 20)
            time.sleep(2.5)
            for i in range(30):
                post(t.port, 20 + (i * 37) % 400)
            time.sleep(3)
            q = ("histogram_quantile(0.95, sum by (le) "
                 "(rate(tokentap_time_to_first_token_seconds_bucket[1m])))")
            deadline = time.monotonic() + 20
            value = None
            while time.monotonic() < deadline:
                _, body = get(prom_port, "/api/v1/query?query=" + urllib.parse.quote(q))
                res = json.loads(body)["data"]["result"]
                if res and res[0]["value"][1] not in ("NaN",):
                    value = float(res[0]["value"][1]) * 1000
                    break
                time.sleep(1)
            assert value is not None, "Prometheus has no quantile"
            stats = json.loads(get(t.admin, "/stats")[1])["groups"][0]["ttft_ms"]["p95"]
            bounds = [1, 5, 10, 20, 40, 60, 80, 100, 250, 500, 750, 1000, 2500]
            lo = max([0] + [x for x in bounds if x < stats])
            hi = min(x for x in bounds if x >= stats)
            assert lo <= value <= hi, (value, stats, lo, hi)
    shutil.rmtree(d, ignore_errors=True)


def test_admin_bounds():
    """The admin listener takes no more from a client than a scrape needs:
    a huge head is refused at 16 KiB (RSS 5 -> 221 MB on a 200 MiB head
    before), and a connection that sends nothing is closed after
    timeouts.client_header (held 130 s before)."""
    with delayed_backend() as b, Tokentap(cfg(b.port, "timeouts: {client_header: 1s}\n"
                                             "admin:\n  address: 127.0.0.1:{admin}\n"
                                             "  token: s3cret\n")) as t:
        with open(f"/proc/{t.p.pid}/status") as f:
            base = int([l for l in f if l.startswith("VmRSS")][0].split()[1])
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
        with open(f"/proc/{t.p.pid}/status") as f:
            now = int([l for l in f if l.startswith("VmRSS")][0].split()[1])
        assert now - base < 4096, (base, now)
        silent = socket.create_connection(("127.0.0.1", t.admin), timeout=5)
        start = time.monotonic()
        assert silent.recv(1) == b""
        assert time.monotonic() - start < 3
        silent.close()
        # a scrape with the token still works
        req = urllib.request.Request(f"http://127.0.0.1:{t.admin}/stats",
                                     headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200
