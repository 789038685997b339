"""Threshold alerts end to end: slow streams through the real proxy make a
webhook receiver get "firing", fast ones "resolved"; the log line, /alerts
and /metrics agree; a real Alertmanager shows the alert; dead webhooks
neither slow the proxy nor go uncounted; the Prometheus rules file is
valid and fires on the same thresholds."""
import calendar
import contextlib
import http.server
import json
import os
import re
import signal
import socket
import ssl
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

from harness import Mock, Proc, Tokentap, free_port, raw_request, wait_port

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
PROMTOOL = "/usr/bin/promtool"
RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TOKEN = re.compile(rb'"content":"[^"]')
EVERY = 0.5          # alerts.evaluate_every of these tests


class Hook:
    """A webhook receiver: each POST's arrival time, path, headers, body."""

    def __init__(self, status=200, delay=0.0, tls=None):
        self.got = []
        self.cond = threading.Condition()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(delay)
                with hook.cond:
                    hook.got.append((time.monotonic(), self.path, dict(self.headers),
                                     json.loads(body)))
                    hook.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.srv.socket = tls.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def wait(self, pred, timeout):
        """The first delivery (time, path, headers, body) whose body matches."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for g in self.got:
                    if pred(g[3]):
                        return g
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching webhook within {timeout}s: {self.got}")
                self.cond.wait(left)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()


def config(mock_port, notify, thresholds="{ttft_warning: 150ms, ttft_critical: 10s}",
           routes=""):
    return f"""routes:
  - name: llm
    upstream: http://127.0.0.1:{mock_port}
{routes}stats: {{windows: [10s]}}
alerts:
  evaluate_every: {int(EVERY * 1000)}ms
  window: 10s
  min_samples: 3
  thresholds: {thresholds}
  notify:
{notify}"""


def stream(port, ttft="20ms", tokens=2, tpot="2ms"):
    """One streamed completion; returns the client-side TTFT in seconds."""
    body = b'{"model":"m","stream":true}'
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
           b"Content-Type: application/json\r\nX-Mock-TTFT: %s\r\nX-Mock-TPOT: %s\r\n"
           b"X-Mock-Tokens: %d\r\nContent-Length: %d\r\n\r\n%s"
           % (ttft.encode(), tpot.encode(), tokens, len(body), body))
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.monotonic()
    s.sendall(req)
    buf, first = b"", None
    while True:
        d = s.recv(65536)
        if not d:
            break
        buf += d
        if first is None and TOKEN.search(buf):
            first = time.monotonic() - t0
    s.close()
    assert b"[DONE]" in buf and first is not None, buf[-300:]
    return first


def burst(port, n, threads=8, **kw):
    todo = list(range(n))
    lock = threading.Lock()
    errors = []

    def run():
        while True:
            with lock:
                if not todo:
                    return
                todo.pop()
            try:
                stream(port, **kw)
            except Exception as e:          # reported below, in this thread
                errors.append(e)

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def alerts(t):
    return json.loads(get(t.admin, "/alerts"))


def rule(js, name, severity, route="llm"):
    for r in js["rules"]:
        if (r["alertname"], r["severity"], r["route"]) == (name, severity, route):
            return r
    raise AssertionError(f"no rule {name} {severity} {route} in {js['rules']}")


def metric(t, prefix):
    """The value of the /metrics sample whose line starts with prefix."""
    for line in get(t.admin, "/metrics").splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {prefix} in /metrics")


def wait_for(fn, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


WEBHOOK_KEYS = {"status", "alertname", "severity", "route", "tenant", "metric", "quantile",
                "value_ms", "threshold_ms", "samples", "window_s", "starts_at", "ends_at",
                "instance"}


def test_webhook_fires_and_resolves_and_alerts_endpoint_agrees():
    with Mock() as m, Hook() as h:
        url = f"http://127.0.0.1:{h.port}/hooks/latency"
        notify = f"    - {{type: log}}\n    - {{type: webhook, url: '{url}', headers: {{X-Token: sekrit}}}}\n"
        with Tokentap(config(m.port, notify)) as t:
            wait_port(t.admin)
            burst(t.port, 4, ttft="300ms")
            done = time.monotonic()
            at, path, headers, body = h.wait(lambda b: b["status"] == "firing", EVERY + 3)
            assert at - done < EVERY + 1.5, at - done
            assert path == "/hooks/latency" and headers["X-Token"] == "sekrit"
            assert headers["Content-Type"] == "application/json"
            assert set(body) == WEBHOOK_KEYS, body
            assert (body["alertname"], body["severity"], body["route"], body["metric"]) == \
                ("TTFTHigh", "warning", "llm", "ttft"), body
            assert body["tenant"] is None and body["ends_at"] is None
            assert body["quantile"] == 0.95 and body["window_s"] == 10
            assert 290 < body["value_ms"] < 600 and body["threshold_ms"] == 150, body
            assert body["samples"] >= 3
            assert RFC3339_MS.match(body["starts_at"]), body
            assert body["instance"].endswith(f"/127.0.0.1:{t.port}"), body
            assert len(h.got) == 1                      # critical (10s) stays quiet

            line = wait_for(lambda: re.search(
                r"alert firing: TTFTHigh severity=warning route=llm p95=\d+ms > 150ms "
                r"\(n=\d+, window 10s\)", t.stderr()), 2, "log line")
            assert line

            js = alerts(t)
            w = rule(js, "TTFTHigh", "warning")
            assert w["state"] == "firing" and w["threshold"] == 150 and w["tenant"] is None
            assert w["value"] > 150 and w["samples"] >= 3 and RFC3339_MS.match(w["since"])
            assert rule(js, "TTFTHigh", "critical")["state"] == "ok"
            assert rule(js, "TPOTHigh", "warning")["state"] == "ok"
            tr = js["transitions"]
            assert len(tr) == 1 and tr[0]["status"] == "firing" and tr[0]["alertname"] == "TTFTHigh"
            assert tr[0]["at"] == body["starts_at"] and tr[0]["threshold"] == 150
            assert metric(t, 'tokentap_alert_firing{alertname="TTFTHigh",severity="warning",route="llm"}') == 1
            assert metric(t, 'tokentap_alert_firing{alertname="TTFTHigh",severity="critical",route="llm"}') == 0

            # a reload that adds a route keeps the firing alert as it is
            t.write_conf(open(t.conf).read().replace("routes:\n", (
                "routes:\n  - name: other\n    upstream: http://127.0.0.1:9\n"
                "    match: {path_prefix: /other/}\n"), 1))
            t.p.send_signal(signal.SIGHUP)
            wait_for(lambda: any(r["route"] == "other" for r in alerts(t)["rules"]), 3, "reload")
            js = alerts(t)
            assert rule(js, "TTFTHigh", "warning")["state"] == "firing"
            assert len(js["transitions"]) == 1

            # traffic turns fast: the p95 falls below 150ms * (1 - 0.1)
            burst(t.port, 120, ttft="5ms")
            _, _, _, res = h.wait(lambda b: b["status"] == "resolved", EVERY + 5)
            assert set(res) == WEBHOOK_KEYS
            assert res["value_ms"] < 135 and res["starts_at"] == body["starts_at"], res
            assert RFC3339_MS.match(res["ends_at"]) and res["ends_at"] >= res["starts_at"]
            wait_for(lambda: "alert resolved: TTFTHigh severity=warning route=llm" in t.stderr(),
                     2, "resolved log line")
            js = alerts(t)
            assert rule(js, "TTFTHigh", "warning")["state"] == "ok"
            assert [x["status"] for x in js["transitions"]] == ["resolved", "firing"]
            assert metric(t, f'tokentap_notify_sent_total{{notifier="webhook",url="{url}"}}') == 2
            assert metric(t, f'tokentap_notify_dropped_total{{notifier="webhook",url="{url}"}}') == 0
            r = subprocess.run([PROMTOOL, "check", "metrics"], input=get(t.admin, "/metrics"),
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stdout + r.stderr


def iso_seconds(ts):
    """Seconds since the epoch of an RFC 3339 time (Alertmanager's or ours)."""
    m = re.match(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z$", ts)
    assert m, ts
    whole = calendar.timegm(tuple(int(x) for x in m.groups()[:6]))
    return whole + float(m.group(7) or 0)


def test_alertmanager_shows_the_alert():
    am_port = free_port()
    d = tempfile.mkdtemp(prefix="tt-am-")
    with open(os.path.join(d, "am.yml"), "w") as f:
        f.write('route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n')
    am_args = [ALERTMANAGER, f"--config.file={d}/am.yml", f"--storage.path={d}/data",
               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="]
    amurl = f"http://127.0.0.1:{am_port}"
    sent = f'tokentap_notify_sent_total{{notifier="alertmanager",url="{amurl}"}}'
    with Proc(am_args) as am, Mock() as m:
        wait_port(am_port, timeout=15)
        notify = f"    - {{type: alertmanager, url: '{amurl}', repeat_interval: 1m}}\n"
        with Tokentap(config(m.port, notify)) as t:
            api = "/api/v2/alerts"
            burst(t.port, 4, ttft="300ms")
            got = wait_for(lambda: json.loads(get(am_port, api)), EVERY + 5, "alert in Alertmanager")
            assert len(got) == 1, got
            a = got[0]
            labels = dict(a["labels"])
            instance = labels.pop("instance")
            assert labels == {"alertname": "TTFTHigh", "severity": "warning", "route": "llm"}, a
            assert instance.endswith(f"/127.0.0.1:{t.port}")
            assert a["status"]["state"] == "active"
            assert a["generatorURL"] == f"http://127.0.0.1:{t.admin}/alerts"
            assert "route llm" in a["annotations"]["summary"]
            assert "150ms" in a["annotations"]["description"]
            # kept for three repeat intervals unless re-sent
            assert 170 < iso_seconds(a["endsAt"]) - iso_seconds(a["startsAt"]) < 190, a
            assert metric(t, sent) == 1

            # a reload to a short repeat_interval: re-sent every second, same counter
            t.write_conf(open(t.conf).read().replace("repeat_interval: 1m", "repeat_interval: 1s"))
            reloaded = time.time()
            t.p.send_signal(signal.SIGHUP)
            wait_for(lambda: metric(t, sent) >= 3, 5, "re-sends")
            a = json.loads(get(am_port, api))[0]
            assert iso_seconds(a["updatedAt"]) > reloaded + 0.9, (reloaded, a)

            # resolved: Alertmanager lists active alerts only
            burst(t.port, 120, ttft="5ms")
            wait_for(lambda: json.loads(get(am_port, api)) == [], EVERY + 6, "resolved in Alertmanager")
            assert metric(t, f'tokentap_notify_dropped_total{{notifier="alertmanager",url="{amurl}"}}') == 0
        assert am.p.poll() is None, am.stderr()[-2000:]


def test_dead_or_slow_webhooks_neither_slow_the_proxy_nor_go_uncounted():
    hole = socket.socket()            # listens, never accepts: requests time out
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    refused = free_port()             # nothing listens: connections are refused
    hole_url = f"http://127.0.0.1:{hole.getsockname()[1]}/hole"
    down_url = f"http://127.0.0.1:{refused}/down"
    thresholds = "{ttft_warning: 10ms, ttft_critical: 15ms}"
    try:
        with Hook(delay=1.5) as lazy, Mock() as m:
            lazy_url = f"http://127.0.0.1:{lazy.port}/lazy"
            dead = (f"    - {{type: webhook, url: '{hole_url}', timeout: 300ms}}\n"
                    f"    - {{type: webhook, url: '{down_url}', timeout: 300ms}}\n"
                    f"    - {{type: webhook, url: '{lazy_url}'}}\n")
            with Tokentap(config(m.port, "    - {type: log}\n", thresholds)) as base, \
                    Tokentap(config(m.port, dead, thresholds)) as slow:
                wait_port(slow.admin)
                burst(slow.port, 5, ttft="20ms")
                fired = time.monotonic()
                wait_for(lambda: rule(alerts(slow), "TTFTHigh", "critical")["state"] == "firing",
                         EVERY + 3, "alerts firing")
                # the main loop answers at once while every notifier waits
                worst = 0.0
                while time.monotonic() - fired < 2.0:
                    t0 = time.monotonic()
                    alerts(slow)
                    worst = max(worst, time.monotonic() - t0)
                    time.sleep(0.02)
                assert worst < 0.3, worst
                # alternate so that drift hits both proxies alike
                a, b = [], []
                for _ in range(25):
                    a.append(stream(base.port, ttft="20ms"))
                    b.append(stream(slow.port, ttft="20ms"))
                ma, mb = statistics.median(a), statistics.median(b)
                assert mb < ma + 0.010, (ma, mb)
                assert 0.015 < ma < 0.2 and 0.015 < mb < 0.2, (ma, mb)

                # the slow one gets both transitions, in order
                lazy.wait(lambda x: x["severity"] == "critical", 5)
                assert [g[3]["severity"] for g in lazy.got] == ["warning", "critical"]
                # 5 attempts: 0.5 + 1 + 2 + 4 s of backoff (plus 5 timeouts for the hole)
                for url in (down_url, hole_url):
                    prefix = f'tokentap_notify_dropped_total{{notifier="webhook",url="{url}"}}'
                    wait_for(lambda: metric(slow, prefix) >= 1, 15, f"drop counted for {url}")
                    assert metric(slow, f'tokentap_notify_sent_total{{notifier="webhook",url="{url}"}}') == 0
                    assert f"notify: webhook {url}: dropped" in slow.stderr()
                assert time.monotonic() - fired > 7.0     # not before the retries ran out
                assert metric(slow, f'tokentap_notify_sent_total{{notifier="webhook",url="{lazy_url}"}}') == 2
    finally:
        hole.close()


def tls_server(cn, san):
    """A self-signed certificate (its file, for SSL_CERT_FILE) and a server
    context that presents it."""
    d = tempfile.mkdtemp(prefix="tt-tls-")
    cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", f"/CN={cn}",
                    "-addext", f"subjectAltName={san}"], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return cert, ctx


@contextlib.contextmanager
def tls_webhooks(cert, ctx, *urls):
    """tokentap with a webhook per URL (PORT: the receiver's), trusting cert,
    and three slow streams: yields (tokentap, receiver, the first "firing")."""
    with Hook(tls=ctx) as h, Mock() as m:
        notify = "".join(f"    - {{type: webhook, url: '{u.replace('PORT', str(h.port))}'}}\n"
                         for u in urls)
        with Tokentap(config(m.port, notify), env={"SSL_CERT_FILE": cert}) as t:
            wait_port(t.admin)
            burst(t.port, 3, ttft="300ms")
            yield t, h, h.wait(lambda b: b["status"] == "firing", EVERY + 5)


def test_https_webhook_is_verified():
    cert, ctx = tls_server("localhost", "DNS:localhost")
    with tls_webhooks(cert, ctx, "https://bob:pw@localhost:PORT/good",
                      "https://127.0.0.1:PORT/bad") as (t, h, first):
        good = f"https://localhost:{h.port}/good"
        bad = f"https://127.0.0.1:{h.port}/bad"         # not a name the certificate has
        _, path, headers, body = first
        assert path == "/good" and body["alertname"] == "TTFTHigh"
        assert headers["Authorization"] == "Basic Ym9iOnB3"          # bob:pw
        wait_for(lambda: metric(t, f'tokentap_notify_sent_total{{notifier="webhook",url="{good}"}}') == 1,
                 2, "sent counted")
        wait_for(lambda: f"notify: webhook {bad}: no response" in t.stderr(), 3, "TLS failure logged")
        assert metric(t, f'tokentap_notify_sent_total{{notifier="webhook",url="{bad}"}}') == 0
        assert [g[1] for g in h.got] == ["/good"]


def test_https_webhook_to_an_ip_literal_checks_the_ip_and_sends_no_sni():
    # not CN=localhost: OpenSSL checks the CN when no DNS entry is there
    cert, ctx = tls_server("tokentap-test", "IP:127.0.0.1")
    names = []
    ctx.sni_callback = lambda sock, name, c: names.append(name)
    with tls_webhooks(cert, ctx, "https://127.0.0.1:PORT/ip",
                      "https://localhost:PORT/name") as (t, h, first):
        by_name = f"https://localhost:{h.port}/name"     # a name the certificate lacks
        assert first[1] == "/ip"
        wait_for(lambda: f"notify: webhook {by_name}: no response" in t.stderr(), 3,
                 "TLS failure logged")
        assert [g[1] for g in h.got] == ["/ip"]
        # the IP literal went as no SNI; the host name as itself
        assert None in names and "localhost" in names, names
        assert set(names) <= {None, "localhost"}, names


def test_alert_window_is_the_one_configured():
    """alerts.window: 3s is honoured although stats.windows has only 1m:
    the statistics keep the rules' own window (before, the rules used 60 s,
    the nearest, and the webhook said so). The burst fires, and resolves
    about 3 s later with no sample left in the window; /stats still serves
    only 1m."""
    with Mock() as m, Hook() as h:
        url = f"http://127.0.0.1:{h.port}/hooks/latency"
        notify = f"    - {{type: webhook, url: '{url}'}}\n"
        conf = config(m.port, notify).replace("stats: {windows: [10s]}", "stats: {windows: [1m]}")
        conf = conf.replace("  window: 10s\n", "  window: 3s\n")
        with Tokentap(conf) as t:
            wait_port(t.admin)
            burst(t.port, 4, ttft="300ms")
            done = time.monotonic()
            _, _, _, body = h.wait(lambda b: b["status"] == "firing", EVERY + 3)
            assert body["window_s"] == 3, body
            at, _, _, body = h.wait(lambda b: b["status"] == "resolved", 3 + EVERY + 4)
            assert 2.5 < at - done < 3 + EVERY + 3, at - done
            assert "not one of stats.windows" not in t.stderr(), t.stderr()
            out = raw_request(t.admin, b"GET /stats?window=3s HTTP/1.1\r\nHost: x\r\n"
                              b"Connection: close\r\n\r\n")
            assert out.startswith(b"HTTP/1.1 400"), out[:200]
