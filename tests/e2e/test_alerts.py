# SPDX-License-Identifier: Apache-2.0
"""Threshold alerts end to end: slow streams through the real proxy make a
webhook receiver get "firing", fast ones "resolved"; the log line, /alerts
and /metrics agree; a real Alertmanager shows the alert; dead webhooks
neither slow the proxy nor go uncounted; the Prometheus rules file is
valid and fires on the same thresholds."""
import calendar
import contextlib
import re
import socket
import statistics
import time

from harness import CHAT, Mock, Tokentap, conf, free_port, metric, parallel, promtool_check, \
    request, until
from peers import Alertmanager, Backend, Hook, flood, self_signed

RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TOKEN = re.compile(rb'"content":"[^"]')
EVERY = 0.5          # alerts.evaluate_every of these tests
RSS_MAX_KIB = 64 * 1024     # what a receiver may grow tokentap to, at most
# how long a test waits for what is due after an evaluation or two: the
# main thread runs 10 nice levels below the workers, and a busy host can
# keep it waiting (the promptness itself is no claim of these tests)
DUE = 15


def config(mock_port, notify, thresholds="{ttft_warning: 150ms, ttft_critical: 10s}",
           routes=""):
    return conf(mock_port, routes + f"""stats: {{windows: [10s]}}
alerts:
  evaluate_every: {int(EVERY * 1000)}ms
  window: 10s
  min_samples: 3
  thresholds: {thresholds}
  notify:
{notify}""")


def burst(port, n, ttft="20ms", threads=8):
    """n streamed completions, threads at a time: each one's client-side
    TTFT in seconds."""
    def one(_):
        r = request(port, CHAT, {"model": "m", "stream": True},
                    {"X-Mock-TTFT": ttft, "X-Mock-TPOT": "2ms", "X-Mock-Tokens": "2"})
        assert b"[DONE]" in r.body and r.after(TOKEN) is not None, r.body[-300:]
        return r.after(TOKEN)
    return parallel(one, range(n), threads)


def rule(js, name, severity, route="llm"):
    """The rule (alertname, severity, route) of an /alerts document."""
    for r in js["rules"]:
        if (r["alertname"], r["severity"], r["route"]) == (name, severity, route):
            return r
    raise AssertionError(f"no rule {name} {severity} {route} in {js['rules']}")


WEBHOOK_KEYS = {"status", "alertname", "severity", "route", "tenant", "metric", "quantile",
                "value_ms", "threshold_ms", "samples", "window_s", "starts_at", "ends_at",
                "instance"}


def test_webhook_fires_and_resolves_and_alerts_endpoint_agrees():
    with Mock() as m, Hook() as h:
        url = f"http://127.0.0.1:{h.port}/hooks/latency"
        notify = f"    - {{type: log}}\n    - {{type: webhook, url: '{url}', headers: {{X-Token: sekrit}}}}\n"
        with Tokentap(config(m.port, notify)) as t:
            ttfts = burst(t.port, 4, ttft="300ms")
            done = time.monotonic()
            at, path, headers, body = h.wait(lambda b: b["status"] == "firing", DUE)
            print(f"firing webhook {at - done:.3f} s after the burst (evaluate_every {EVERY} s)")
            assert path == "/hooks/latency" and headers["X-Token"] == "sekrit"
            assert headers["Content-Type"] == "application/json"
            assert set(body) == WEBHOOK_KEYS, body
            assert (body["alertname"], body["severity"], body["route"], body["metric"]) == \
                ("TTFTHigh", "warning", "llm", "ttft"), body
            assert body["tenant"] is None and body["ends_at"] is None
            assert body["quantile"] == 0.95 and body["window_s"] == 10
            # tokentap's TTFTs lie between the mock's 300 ms and the client's
            # (a bucket's width above it at most: 5 %)
            assert 300 <= body["value_ms"] <= max(ttfts) * 1000 * 1.05, (body, ttfts)
            assert body["threshold_ms"] == 150 and body["samples"] >= 3, body
            assert RFC3339_MS.match(body["starts_at"]), body
            assert body["instance"].endswith(f"/127.0.0.1:{t.port}"), body
            assert len(h.got) == 1                      # critical (10s) stays quiet

            until(lambda: re.search(
                r"alert firing: TTFTHigh severity=warning route=llm p95=\d+ms > 150ms "
                r"\(n=\d+, window 10s\)", t.stderr()), DUE, "the log line")

            js = t.get("/alerts", json=True)
            w = rule(js, "TTFTHigh", "warning")
            assert w["state"] == "firing" and w["threshold"] == 150 and w["tenant"] is None
            assert w["value"] > 150 and w["samples"] >= 3 and RFC3339_MS.match(w["since"])
            assert rule(js, "TTFTHigh", "critical")["state"] == "ok"
            assert rule(js, "TPOTHigh", "warning")["state"] == "ok"
            tr = js["transitions"]
            assert len(tr) == 1 and tr[0]["status"] == "firing" and tr[0]["alertname"] == "TTFTHigh"
            assert tr[0]["at"] == body["starts_at"] and tr[0]["threshold"] == 150
            firing = {"alertname": "TTFTHigh", "route": "llm"}
            assert metric(t, "tokentap_alert_firing", severity="warning", **firing) == 1
            assert metric(t, "tokentap_alert_firing", severity="critical", **firing) == 0

            # a reload that adds a route keeps the firing alert as it is
            t.reload("routes:\n", "routes:\n  - name: other\n    upstream: http://127.0.0.1:9\n"
                     "    match: {path_prefix: /other/}\n")
            until(lambda: any(r["route"] == "other" for r in t.get("/alerts", json=True)["rules"]),
                  DUE, "the reload")
            js = t.get("/alerts", json=True)
            assert rule(js, "TTFTHigh", "warning")["state"] == "firing"
            assert len(js["transitions"]) == 1

            # traffic turns fast: the p95 falls below 150ms * (1 - 0.1)
            burst(t.port, 120, ttft="5ms")
            _, _, _, res = h.wait(lambda b: b["status"] == "resolved", DUE)
            assert set(res) == WEBHOOK_KEYS
            assert res["value_ms"] < 135 and res["starts_at"] == body["starts_at"], res
            assert RFC3339_MS.match(res["ends_at"]) and res["ends_at"] >= res["starts_at"]
            until(lambda: "alert resolved: TTFTHigh severity=warning route=llm" in t.stderr(),
                  DUE, "the resolved log line")
            js = t.get("/alerts", json=True)
            assert rule(js, "TTFTHigh", "warning")["state"] == "ok"
            assert [x["status"] for x in js["transitions"]] == ["resolved", "firing"]
            hook = {"notifier": "webhook", "url": url}
            # counted when tokentap has the hook's reply, a moment after
            # the hook has the body
            until(lambda: metric(t, "tokentap_notify_sent_total", **hook) == 2, DUE,
                  "two notifications counted sent")
            assert metric(t, "tokentap_notify_dropped_total", **hook) == 0
            promtool_check(t.get("/metrics").text)


def iso_seconds(ts):
    """Seconds since the epoch of an RFC 3339 time (Alertmanager's or ours)."""
    m = re.match(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z$", ts)
    assert m, ts
    whole = calendar.timegm(tuple(int(x) for x in m.groups()[:6]))
    return whole + float(m.group(7) or 0)


def test_alertmanager_shows_the_alert():
    with Alertmanager() as am, Mock() as m:
        notify = f"    - {{type: alertmanager, url: '{am.url}', repeat_interval: 1m}}\n"
        sent = {"notifier": "alertmanager", "url": am.url}
        with Tokentap(config(m.port, notify)) as t:
            burst(t.port, 4, ttft="300ms")
            got = until(am.alerts, DUE, "the alert in Alertmanager")
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
            until(lambda: metric(t, "tokentap_notify_sent_total", **sent) == 1, DUE,
                  "the notification counted sent (on Alertmanager's reply)")

            # a reload to a short repeat_interval: re-sent every second, same counter
            reloaded = time.time()
            t.reload("repeat_interval: 1m", "repeat_interval: 1s")
            until(lambda: metric(t, "tokentap_notify_sent_total", **sent) >= 3, DUE, "re-sends")
            a = am.alerts()[0]
            # two re-sends a repeat interval apart: the second a second or more on
            assert iso_seconds(a["updatedAt"]) > reloaded + 0.9, (reloaded, a)

            # resolved: Alertmanager lists active alerts only
            burst(t.port, 120, ttft="5ms")
            until(lambda: am.alerts() == [], DUE, "resolved in Alertmanager")
            assert metric(t, "tokentap_notify_dropped_total", **sent) == 0


def test_dead_or_slow_webhooks_neither_slow_the_proxy_nor_go_uncounted():
    """Webhooks that time out, refuse, or take 1.5 s to answer: /alerts
    answers while they wait (a main loop blocked on one would take up to
    1.5 s), streams through this proxy are no slower than through one
    without them, and every delivery is counted, sent or dropped."""
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
                burst(slow.port, 5, ttft="20ms")
                fired = time.monotonic()
                until(lambda: rule(slow.get("/alerts", json=True), "TTFTHigh",
                                   "critical")["state"] == "firing", DUE, "alerts firing")
                # the main loop answers at once while every notifier waits
                worst = 0.0
                while time.monotonic() - fired < 2.0:
                    t0 = time.monotonic()
                    slow.get("/alerts")
                    worst = max(worst, time.monotonic() - t0)
                    time.sleep(0.02)
                assert worst < 1.0, worst
                # alternate so that drift hits both proxies alike; a notifier
                # in the streams' way would add its 300 ms or 1.5 s
                a, b = [], []
                for _ in range(25):
                    a += burst(base.port, 1, ttft="20ms")
                    b += burst(slow.port, 1, ttft="20ms")
                ma, mb = statistics.median(a), statistics.median(b)
                print(f"median client TTFT {ma * 1000:.1f} ms without, {mb * 1000:.1f} ms with")
                assert mb < ma + 0.150 and min(a + b) >= 0.020, (ma, mb)

                # the slow one gets both transitions, in order
                lazy.wait(lambda x: x["severity"] == "critical", DUE)
                assert [g[3]["severity"] for g in lazy.got] == ["warning", "critical"]
                # 5 attempts: 0.5 + 1 + 2 + 4 s of backoff (plus 5 timeouts for the hole)
                for url in (down_url, hole_url):
                    hook = {"notifier": "webhook", "url": url}
                    until(lambda: metric(slow, "tokentap_notify_dropped_total", **hook) >= 1,
                          30, f"the drop counted for {url}")
                    assert metric(slow, "tokentap_notify_sent_total", **hook) == 0
                    assert f"notify: webhook {url}: dropped" in slow.stderr()
                assert time.monotonic() - fired > 7.0     # not before the retries ran out
                assert metric(slow, "tokentap_notify_sent_total", notifier="webhook",
                              url=lazy_url) == 2
    finally:
        hole.close()


def receiver_against(kind, reason, words):
    """A webhook receiver answering `kind` (peers.flood: 1 GiB of body,
    of header lines, of chunks; a chunk size without end; a byte every
    0.2 s): the delivery fails for `reason`, counted and logged with
    `words`, at the notifier's timeout from its start at the latest, and
    tokentap's RSS, now and at its peak, stays under 64 MB."""
    log = []
    with Backend(flood(kind, log=log)) as h, Mock() as m:
        url = f"http://127.0.0.1:{h.port}/hook"
        notify = f"    - {{type: webhook, url: '{url}', timeout: 1s}}\n"
        with Tokentap(config(m.port, notify)) as t:
            burst(t.port, 4, ttft="300ms")
            hook = {"notifier": "webhook", "url": url}
            until(lambda: (metric(t, "tokentap_notify_failures_total", reason=reason,
                                  **hook) or 0) >= 1, DUE, f"a delivery failed: {reason}")
            until(lambda: log, DUE, "the receiver seeing tokentap stop reading")
            rss, peak = t.rss_kib(), t.rss_kib("VmHWM")
            print(f"{kind}: receiver sent {log[0][3]} bytes; tokentap VmRSS {rss} KiB, "
                  f"VmHWM {peak} KiB")
            assert log[0][3] < (1 << 30), log
            assert rss < RSS_MAX_KIB and peak < RSS_MAX_KIB, (rss, peak)
            until(lambda: f"notify: webhook {url}: {words}" in t.stderr(), DUE,
                  "the failure logged")
            assert metric(t, "tokentap_notify_sent_total", **hook) == 0


def test_receiver_sending_a_1gib_body():
    receiver_against("body", "too_large", "answer too large")


def test_receiver_sending_endless_headers():
    receiver_against("headers", "invalid", "not an HTTP answer, a malformed one, or a head over")


def test_receiver_sending_endless_chunks():
    receiver_against("chunks", "too_large", "answer too large")


def test_receiver_sending_a_chunk_size_without_end():
    receiver_against("line", "deadline", "no complete answer within the timeout")


def test_trickling_receiver_ends_at_the_timeout():
    """A byte every 0.2 s never lets an inactivity timeout of 1 s fire; the
    notifier's timeout from the attempt's start does."""
    receiver_against("trickle", "deadline", "no complete answer within the timeout")


@contextlib.contextmanager
def tls_webhooks(cert, ctx, *urls):
    """tokentap with a webhook per URL (PORT: the receiver's), trusting cert,
    and three slow streams: yields (tokentap, receiver, the first "firing")."""
    with Hook(tls=ctx) as h, Mock() as m:
        notify = "".join(f"    - {{type: webhook, url: '{u.replace('PORT', str(h.port))}'}}\n"
                         for u in urls)
        with Tokentap(config(m.port, notify), env={"SSL_CERT_FILE": cert}) as t:
            burst(t.port, 3, ttft="300ms")
            yield t, h, h.wait(lambda b: b["status"] == "firing", DUE)


def test_https_webhook_is_verified():
    cert, ctx = self_signed("localhost", "DNS:localhost")
    with tls_webhooks(cert, ctx, "https://bob:pw@localhost:PORT/good",
                      "https://127.0.0.1:PORT/bad") as (t, h, first):
        good = f"https://localhost:{h.port}/good"
        bad = f"https://127.0.0.1:{h.port}/bad"         # not a name the certificate has
        _, path, headers, body = first
        assert path == "/good" and body["alertname"] == "TTFTHigh"
        assert headers["Authorization"] == "Basic Ym9iOnB3"          # bob:pw
        until(lambda: metric(t, "tokentap_notify_sent_total", notifier="webhook",
                             url=good) == 1, DUE, "sent counted")
        until(lambda: f"notify: webhook {bad}: no response" in t.stderr(), DUE,
              "the TLS failure logged")
        assert metric(t, "tokentap_notify_sent_total", notifier="webhook", url=bad) == 0
        assert [g[1] for g in h.got] == ["/good"]


def test_https_webhook_to_an_ip_literal_checks_the_ip_and_sends_no_sni():
    # not CN=localhost: OpenSSL checks the CN when no DNS entry is there
    cert, ctx = self_signed("tokentap-test", "IP:127.0.0.1")
    names = []
    ctx.sni_callback = lambda sock, name, c: names.append(name)
    with tls_webhooks(cert, ctx, "https://127.0.0.1:PORT/ip",
                      "https://localhost:PORT/name") as (t, h, first):
        by_name = f"https://localhost:{h.port}/name"     # a name the certificate lacks
        assert first[1] == "/ip"
        until(lambda: f"notify: webhook {by_name}: no response" in t.stderr(), DUE,
              "the TLS failure logged")
        assert [g[1] for g in h.got] == ["/ip"]
        # the IP literal went as no SNI; the host name as itself
        assert None in names and "localhost" in names, names
        assert set(names) <= {None, "localhost"}, names


def test_alert_window_is_the_one_configured():
    """alerts.window: 3s is honoured although stats.windows has only 1m:
    the statistics keep the rules' own window (before, the rules used 60 s,
    the nearest, and the webhook said so). The burst fires, and resolves
    once no sample is left in the window: 3 s after the last at the
    earliest (a slice of it sooner); /stats still serves only 1m."""
    with Mock() as m, Hook() as h:
        url = f"http://127.0.0.1:{h.port}/hooks/latency"
        notify = f"    - {{type: webhook, url: '{url}'}}\n"
        text = config(m.port, notify).replace("stats: {windows: [10s]}", "stats: {windows: [1m]}")
        text = text.replace("  window: 10s\n", "  window: 3s\n")
        with Tokentap(text) as t:
            burst(t.port, 4, ttft="300ms")
            done = time.monotonic()
            _, _, _, body = h.wait(lambda b: b["status"] == "firing", DUE)
            assert body["window_s"] == 3, body
            at, _, _, body = h.wait(lambda b: b["status"] == "resolved", 3 + DUE)
            assert at - done > 2.5, at - done
            assert "not one of stats.windows" not in t.stderr(), t.stderr()
            assert t.get("/stats?window=3s").status == 400
